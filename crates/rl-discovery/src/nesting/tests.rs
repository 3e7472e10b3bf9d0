//! The bound against limits, real code and ruff's own trees.

use super::*;

fn nesting(source: &str) -> Option<Nesting> {
    measure(source, Mode::Module)
        .err()
        .map(|refused| refused.nesting)
}

/// The depth of expression and statement nodes in ruff's tree: what Drop and our walks
/// recurse through.
fn tree_depth(source: &str) -> u32 {
    use ruff_python_ast::visitor::{self, Visitor};
    #[derive(Default)]
    struct Depth {
        current: u32,
        deepest: u32,
    }
    impl<'a> Visitor<'a> for Depth {
        fn visit_expr(&mut self, expr: &'a ruff_python_ast::Expr) {
            self.current += 1;
            self.deepest = self.deepest.max(self.current);
            visitor::walk_expr(self, expr);
            self.current -= 1;
        }
        fn visit_stmt(&mut self, stmt: &'a ruff_python_ast::Stmt) {
            self.current += 1;
            self.deepest = self.deepest.max(self.current);
            visitor::walk_stmt(self, stmt);
            self.current -= 1;
        }
    }
    // Unchecked: a tree with syntax errors is dropped too, so it must be bounded as well.
    let options = ruff_python_parser::ParseOptions::from(Mode::Module);
    let parsed = ruff_python_parser::parse_unchecked(source, options);
    let mut depth = Depth::default();
    if let Some(module) = parsed.syntax().as_module() {
        depth.visit_body(&module.body);
    }
    depth.deepest
}

/// A random expression of every kind of nesting, `budget` nodes at most.
fn random_expression(rng: &mut fastrand::Rng, budget: &mut u32) -> String {
    if *budget == 0 {
        return ["a", "1", "'s'", "None", "x.y"][rng.usize(..5)].to_owned();
    }
    *budget -= 1;
    let mut sub = |rng: &mut fastrand::Rng| random_expression(rng, budget);
    match rng.u32(..30) {
        0 => format!("{} + {}", sub(rng), sub(rng)),
        1 => format!("{} * {} ** {}", sub(rng), sub(rng), sub(rng)),
        2 => format!("-{}", sub(rng)),
        3 => format!("not {}", sub(rng)),
        4 => format!("{} and {} or {}", sub(rng), sub(rng), sub(rng)),
        5 => format!("{} < {} in {}", sub(rng), sub(rng), sub(rng)),
        6 => format!("{} if {} else {}", sub(rng), sub(rng), sub(rng)),
        7 => format!("(lambda p, q={}: {})", sub(rng), sub(rng)),
        8 => format!("({}).b", sub(rng)),
        9 => format!("f({}, k={})", sub(rng), sub(rng)),
        10 => format!("({})[{}:{}]", sub(rng), sub(rng), sub(rng)),
        11 => format!("[{}, *{}]", sub(rng), sub(rng)),
        12 => format!("{{{}: {}, **{}}}", sub(rng), sub(rng), sub(rng)),
        13 => format!("f\"{{{}!r:>{{{}}}}}\"", sub(rng), sub(rng)),
        14 => format!("[{} for v in {} if {}]", sub(rng), sub(rng), sub(rng)),
        15 => format!("(w := {})", sub(rng)),
        16 => format!(
            "({} | {} & {} ^ {} << {})",
            sub(rng),
            sub(rng),
            sub(rng),
            sub(rng),
            sub(rng)
        ),
        17 => format!("(yield {})", sub(rng)),
        18 => format!("await {}", sub(rng)),
        19 => format!("~{} @ {}", sub(rng), sub(rng)),
        20 => format!("({}, {})", sub(rng), sub(rng)),
        21 => format!("{} is not {}", sub(rng), sub(rng)),
        22 => format!("g({})({})", sub(rng), sub(rng)),
        23 => format!("(lambda *p, **q: {})", sub(rng)),
        24 => format!("[*{}, *{}][::{}]", sub(rng), sub(rng), sub(rng)),
        25 => format!("(yield from {})", sub(rng)),
        26 => format!("((w := {}) if {} else {})", sub(rng), sub(rng), sub(rng)),
        27 => format!("{{**{}, 'k': {}}}", sub(rng), sub(rng)),
        28 => format!("{{v: {} async for v in {}}}", sub(rng), sub(rng)),
        _ => format!("({})", sub(rng)),
    }
}

#[test]
fn the_bound_is_never_below_the_trees_depth_and_not_far_above_it() {
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..8_000 {
        let mut budget = rng.u32(1..60);
        let expression = random_expression(&mut rng, &mut budget);
        let mut budget = rng.u32(1..20);
        let other = random_expression(&mut rng, &mut budget);
        let source = match rng.u32(..11) {
            0 => format!("x = {expression}\n"),
            1 => format!("async def f():\n    return {expression}, 1\n"),
            2 => format!("@deco({expression})\nclass C(B, metaclass={other}):\n    pass\n"),
            3 => format!("with {expression} as w, {other}:\n    pass\n"),
            4 => format!(
                "match {expression}:\n    case [a, *b] if {other}:\n        pass\n    case C(d=[e, {{'k': f}}]) | g:\n        pass\n"
            ),
            5 => format!("for v in {expression}:\n    pass\nelse:\n    x[{other}] += 1\n"),
            6 => {
                format!("try:\n    del x[{expression}]\nexcept* E as e:\n    assert {other}, 'm'\n")
            }
            7 => format!("type T[U: int] = {expression}\n"),
            8 => format!("def f[T](a: {other} = {expression}, *, b=1) -> {other}:\n    pass\n"),
            9 => format!("a, *b = c = {expression}; d = {other}\n"),
            _ => format!("if a:\n    f({expression})\n"),
        };
        let tree = tree_depth(&source);
        let Ok(bound) = measure(&source, Mode::Module) else {
            panic!("refused: {source}");
        };
        // Drop and every walk recurse through the tree: it must never be deeper than the
        // bound (a statement and a tuple node are not counted).
        assert!(
            tree <= bound + 2,
            "tree {tree} deeper than bound {bound}: {source}"
        );
        // A valid file is never refused for a depth far from its own.
        if ruff_python_parser::parse_module(&source).is_ok() {
            assert!(
                bound <= 3 * tree,
                "bound {bound} far above tree {tree}: {source}"
            );
        }
    }
}

#[test]
fn ordinary_code_is_far_from_every_limit() {
    let source = "import os\nclass A(B):\n    def f(self, a=lambda x, y: x + y, *, b=[1, -2]):\n        return {k: v.strip() for k, v in os.environ.items() if k.startswith('A') and not v}, f\"{a!r:>{b}}\"\n";
    assert_eq!(nesting(source), None);
}

#[test]
fn long_flat_lists_are_not_deep() {
    let elements = vec!["-1.5 + x.y(z)"; 20_000].join(", ");
    assert_eq!(nesting(&format!("x = [{elements}]\n")), None);
    let kwargs = vec!["a=not b"; 20_000].join(", ");
    assert_eq!(nesting(&format!("f({kwargs})\n")), None);
    let entries = vec!["'k': lambda a, b: a"; 20_000].join(", ");
    assert_eq!(nesting(&format!("d = {{{entries}}}\n")), None);
    let statements = "x = a.b.c + 1\n".repeat(20_000);
    assert_eq!(nesting(&statements), None);
}

#[test]
fn brackets_at_pythons_limit_pass_and_one_more_is_refused() {
    let at = |n: usize| format!("x = {}{}\n", "[".repeat(n), "]".repeat(n));
    assert_eq!(nesting(&at(200)), None);
    assert_eq!(nesting(&at(201)), Some(Nesting::Brackets));
    assert_eq!(nesting(&"[".repeat(150_000)), Some(Nesting::Brackets));
}

#[test]
fn indentation_at_pythons_limit_passes_and_one_more_is_refused() {
    let at = |n: usize| {
        let mut source: String = (0..n)
            .flat_map(|i| [" ".repeat(i), "if a:\n".to_owned()])
            .collect();
        source.push_str(&format!("{}pass\n", " ".repeat(n)));
        source
    };
    assert_eq!(nesting(&at(99)), None);
    assert_eq!(nesting(&at(100)), Some(Nesting::Indentation));
}

#[test]
fn chains_are_refused_past_the_limit() {
    let limit = MAX_EXPRESSION_DEPTH as usize;
    // `x =` is one level.
    assert_eq!(nesting(&format!("x = 1{}\n", "+1".repeat(limit - 1))), None);
    for source in [
        format!("x = 1{}\n", "+1".repeat(limit)),
        format!("x = {}1\n", "-".repeat(limit)),
        format!("x = a{}\n", ".b".repeat(limit)),
        format!("x = f{}\n", "()".repeat(limit)),
        format!("x = a{}\n", "[0]".repeat(limit)),
        format!("x = {}a\n", "not ".repeat(limit)),
        format!("x = {}1\n", "lambda: ".repeat(limit)),
        format!("x = {}1\n", "lambda a, b=1: ".repeat(limit)),
        format!("x = 1{}\n", " if a else 1".repeat(limit)),
        format!("x = 1{}\n", "**1".repeat(limit)),
    ] {
        assert_eq!(
            nesting(&source),
            Some(Nesting::Expression),
            "{}",
            &source[..40]
        );
    }
}

#[test]
fn a_chain_after_a_bracket_group_counts_the_group_inside_it() {
    // `f(a+…+a) + 1 + … + 1`: the call is the deepest left operand of the outer chain.
    let half = MAX_EXPRESSION_DEPTH as usize / 2 + 1;
    let source = format!("f(a{}){}\n", "+a".repeat(half), "+1".repeat(half));
    assert_eq!(nesting(&source), Some(Nesting::Expression));
}

#[test]
fn elements_under_a_spanning_token_count_it() {
    // `=` and `yield` are two levels above every element of `a, -…-1`.
    let limit = MAX_EXPRESSION_DEPTH as usize;
    let at = |minus: usize| format!("x = yield a, {}1\n", "-".repeat(minus));
    assert_eq!(nesting(&at(limit - 2)), None);
    assert_eq!(nesting(&at(limit - 1)), Some(Nesting::Expression));
}

#[test]
fn the_line_named_is_where_the_nesting_is() {
    let source = format!(
        "a = '''\n\n'''\nb = 1\nc = (\n  {}1)\nd = 2\n",
        "-".repeat(MAX_EXPRESSION_DEPTH as usize)
    );
    assert_eq!(check(&source, Mode::Module), Err((Nesting::Expression, 6)));
}
