//! One parsed file reduced to what discovery needs: its classes, the names its imports bind,
//! and the classes its `__main__` block starts with `.cli()`. Everything else is dropped right
//! after parsing so a scan of thousands of files holds no syntax trees.

use std::collections::{HashMap, HashSet};

use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::Ranged;

use crate::SkipReason;

mod imports;

pub(crate) use imports::{Import, Need};

/// A dotted reference as written in the source, e.g. `["base", "BaseEnv"]` for `base.BaseEnv`.
pub(crate) type Dotted = Vec<String>;

#[derive(Debug, Default)]
pub(crate) struct ModuleSummary {
    pub classes: Vec<ClassSummary>,
    /// Every binding of a module-level name in source order. A name bound in several branches
    /// (`try: from x import A` / `except ImportError: class A: ...`) keeps all of them, because
    /// statically any branch may be the one that runs.
    pub bindings: HashMap<String, Vec<Binding>>,
    /// Class names called as `Name.cli()` under `if __name__ == "__main__":`.
    pub cli_classes: HashSet<String>,
    /// Every import statement of the file, in functions and classes too (they run when
    /// called): how the file must be started for them to resolve (`package.rs`).
    pub imports: Vec<Import>,
    /// The line of a module-level `def load_environment`: a verifiers v0 environment's entry.
    pub load_environment: Option<u32>,
    pub docstring_first_line: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Binding {
    /// Byte offset of the statement that binds the name; a class base may only use bindings
    /// made before the class statement.
    pub offset: u32,
    pub target: BindingTarget,
}

#[derive(Debug, Clone)]
pub(crate) enum BindingTarget {
    /// Index into [`ModuleSummary::classes`].
    Class(usize),
    /// `from module import name [as local]`; `level` counts the leading dots.
    ImportedName {
        level: u32,
        module: Dotted,
        name: String,
    },
    /// `import a.b.c as local` binds `local` to `a.b.c`; `import a.b.c` binds `a` to `a`.
    ImportedModule { module: Dotted },
}

#[derive(Debug, Clone)]
pub(crate) struct ClassSummary {
    pub name: String,
    pub offset: u32,
    pub line: u32,
    pub bases: Vec<Dotted>,
    /// The references subscripting each of `bases` (`vf.Taskset[MyTask, MyConfig]` →
    /// `[MyTask, MyConfig]`), empty where a base is not subscripted.
    pub base_arguments: Vec<Vec<Dotted>>,
    pub docstring_first_line: Option<String>,
    pub name_attribute: Option<String>,
    pub env_config_cls: Option<Dotted>,
    pub has_config_init: bool,
    /// The first element of `config_init`'s `Tuple[Config, ...]` return annotation.
    pub config_init_returns: Option<Dotted>,
}

pub(crate) fn summarize(text: &str) -> Result<ModuleSummary, SkipReason> {
    let module = crate::parse::parse_python_module(text)?;
    let lines = LineIndex::new(text);
    let mut summary = ModuleSummary::default();
    collect_module_level(&module.body, &lines, &mut summary);
    summary.imports = imports::collect(&module.body);
    summary.docstring_first_line = docstring_first_line(&module.body);
    Ok(summary)
}

/// Walks the statements that run at import time: the module body and the blocks of compound
/// statements in it, but not function or class bodies.
fn collect_module_level(body: &[Stmt], lines: &LineIndex, summary: &mut ModuleSummary) {
    for stmt in body {
        let offset = stmt.start().to_u32();
        match stmt {
            Stmt::ClassDef(class) => {
                let index = summary.classes.len();
                summary.classes.push(summarize_class(class, lines));
                summary.bind(class.name.as_str(), offset, BindingTarget::Class(index));
            }
            Stmt::ImportFrom(import) => {
                let module = import
                    .module
                    .as_ref()
                    .map(|m| dotted_str(m.as_str()))
                    .unwrap_or_default();
                for alias in &import.names {
                    if alias.name.as_str() == "*" {
                        continue;
                    }
                    let local = alias.asname.as_ref().unwrap_or(&alias.name);
                    summary.bind(
                        local.as_str(),
                        offset,
                        BindingTarget::ImportedName {
                            level: import.level,
                            module: module.clone(),
                            name: alias.name.to_string(),
                        },
                    );
                }
            }
            Stmt::Import(import) => {
                for alias in &import.names {
                    let full = dotted_str(alias.name.as_str());
                    let (local, module) = match &alias.asname {
                        Some(asname) => (asname.to_string(), full),
                        None => (full[0].clone(), vec![full[0].clone()]),
                    };
                    summary.bind(&local, offset, BindingTarget::ImportedModule { module });
                }
            }
            Stmt::FunctionDef(function) if function.name.as_str() == "load_environment" => {
                summary.load_environment = Some(lines.line_of(function.name.start().to_u32()));
            }
            Stmt::If(stmt_if) => {
                if is_main_guard(&stmt_if.test) {
                    collect_cli_calls(&stmt_if.body, &mut summary.cli_classes);
                }
                collect_module_level(&stmt_if.body, lines, summary);
                for clause in &stmt_if.elif_else_clauses {
                    collect_module_level(&clause.body, lines, summary);
                }
            }
            Stmt::Try(stmt_try) => {
                collect_module_level(&stmt_try.body, lines, summary);
                for handler in &stmt_try.handlers {
                    let ast::ExceptHandler::ExceptHandler(handler) = handler;
                    collect_module_level(&handler.body, lines, summary);
                }
                collect_module_level(&stmt_try.orelse, lines, summary);
                collect_module_level(&stmt_try.finalbody, lines, summary);
            }
            Stmt::With(with) => collect_module_level(&with.body, lines, summary),
            Stmt::For(stmt_for) => {
                collect_module_level(&stmt_for.body, lines, summary);
                collect_module_level(&stmt_for.orelse, lines, summary);
            }
            Stmt::While(stmt_while) => {
                collect_module_level(&stmt_while.body, lines, summary);
                collect_module_level(&stmt_while.orelse, lines, summary);
            }
            Stmt::Match(stmt_match) => {
                for case in &stmt_match.cases {
                    collect_module_level(&case.body, lines, summary);
                }
            }
            _ => {}
        }
    }
}

impl ModuleSummary {
    fn bind(&mut self, name: &str, offset: u32, target: BindingTarget) {
        self.bindings
            .entry(name.to_owned())
            .or_default()
            .push(Binding { offset, target });
    }
}

fn summarize_class(class: &ast::StmtClassDef, lines: &LineIndex) -> ClassSummary {
    let (bases, base_arguments) = class
        .bases()
        .iter()
        .filter_map(|base| Some((base_reference(base)?, base_arguments(base))))
        .unzip();
    let mut summary = ClassSummary {
        name: class.name.to_string(),
        offset: class.start().to_u32(),
        line: lines.line_of(class.name.start().to_u32()),
        bases,
        base_arguments,
        docstring_first_line: docstring_first_line(&class.body),
        name_attribute: None,
        env_config_cls: None,
        has_config_init: false,
        config_init_returns: None,
    };
    for stmt in &class.body {
        match stmt {
            Stmt::Assign(assign) => {
                for target in &assign.targets {
                    summary.record_attribute(target, &assign.value);
                }
            }
            Stmt::AnnAssign(ast::StmtAnnAssign {
                target,
                value: Some(value),
                ..
            }) => {
                summary.record_attribute(target, value);
            }
            Stmt::FunctionDef(function) if function.name.as_str() == "config_init" => {
                summary.has_config_init = true;
                summary.config_init_returns =
                    function.returns.as_deref().and_then(first_tuple_element);
            }
            _ => {}
        }
    }
    summary
}

impl ClassSummary {
    fn record_attribute(&mut self, target: &Expr, value: &Expr) {
        let Expr::Name(target) = target else { return };
        match target.id.as_str() {
            "name" => {
                if let Expr::StringLiteral(literal) = value {
                    self.name_attribute = Some(literal.value.to_str().to_owned());
                }
            }
            "env_config_cls" => self.env_config_cls = dotted(value),
            _ => {}
        }
    }
}

/// A base class as a dotted reference; `Generic[T]`-style subscripts are reduced to the
/// subscripted class, and anything computed (calls, `type(...)`) is not a reference at all.
fn base_reference(expr: &Expr) -> Option<Dotted> {
    match expr {
        Expr::Subscript(subscript) => dotted(&subscript.value),
        other => dotted(other),
    }
}

/// The references a subscripted base is given (`Base[A, b.C]` → `[A, b.C]`), in order; an
/// argument that is no reference (a literal, a nested subscript) is left out.
fn base_arguments(expr: &Expr) -> Vec<Dotted> {
    let Expr::Subscript(subscript) = expr else {
        return Vec::new();
    };
    match subscript.slice.as_ref() {
        Expr::Tuple(elements) => elements.elts.iter().filter_map(dotted).collect(),
        single => dotted(single).into_iter().collect(),
    }
}

/// `a.b.C` as `["a", "b", "C"]`; `None` for anything but names and attribute chains.
pub fn dotted(expr: &Expr) -> Option<Dotted> {
    // A loop, not recursion: an attribute chain may be thousands of links long.
    let mut parts = Vec::new();
    let mut current = expr;
    loop {
        match current {
            Expr::Name(name) => {
                parts.push(name.id.to_string());
                parts.reverse();
                return Some(parts);
            }
            Expr::Attribute(attribute) => {
                parts.push(attribute.attr.to_string());
                current = &attribute.value;
            }
            _ => return None,
        }
    }
}

fn dotted_str(path: &str) -> Dotted {
    path.split('.').map(str::to_owned).collect()
}

/// `Tuple[Config, List[APIServerConfig]]` or `tuple[Config, ...]` → `Config`.
fn first_tuple_element(annotation: &Expr) -> Option<Dotted> {
    let Expr::Subscript(subscript) = annotation else {
        return None;
    };
    let container = dotted(&subscript.value)?;
    let last = container.last()?;
    if last != "Tuple" && last != "tuple" {
        return None;
    }
    match subscript.slice.as_ref() {
        Expr::Tuple(elements) => elements.elts.first().and_then(dotted),
        single => dotted(single),
    }
}

fn docstring_first_line(body: &[Stmt]) -> Option<String> {
    let Some(Stmt::Expr(ast::StmtExpr { value, .. })) = body.first() else {
        return None;
    };
    let Expr::StringLiteral(literal) = value.as_ref() else {
        return None;
    };
    literal
        .value
        .to_str()
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .map(str::to_owned)
}

/// `__name__ == "__main__"` or `"__main__" == __name__`.
fn is_main_guard(test: &Expr) -> bool {
    let Expr::Compare(compare) = test else {
        return false;
    };
    if compare.ops.len() != 1 || !matches!(compare.ops[0], ast::CmpOp::Eq) {
        return false;
    }
    let is_name = |e: &Expr| matches!(e, Expr::Name(n) if n.id.as_str() == "__name__");
    let is_main = |e: &Expr| matches!(e, Expr::StringLiteral(s) if s.value.to_str() == "__main__");
    let (left, right) = (compare.left.as_ref(), &compare.comparators[0]);
    (is_name(left) && is_main(right)) || (is_main(left) && is_name(right))
}

fn collect_cli_calls(body: &[Stmt], cli_classes: &mut HashSet<String>) {
    for stmt in body {
        let Stmt::Expr(ast::StmtExpr { value, .. }) = stmt else {
            continue;
        };
        let Expr::Call(call) = value.as_ref() else {
            continue;
        };
        let Expr::Attribute(attribute) = call.func.as_ref() else {
            continue;
        };
        if attribute.attr.as_str() != "cli" {
            continue;
        }
        if let Expr::Name(class) = attribute.value.as_ref() {
            cli_classes.insert(class.id.to_string());
        }
    }
}

/// Byte offsets of line starts, so a class's line costs one binary search.
struct LineIndex {
    starts: Vec<u32>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i as u32 + 1),
        );
        Self { starts }
    }

    fn line_of(&self, offset: u32) -> u32 {
        self.starts.partition_point(|&start| start <= offset) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(source: &str) -> ModuleSummary {
        summarize(source).unwrap()
    }

    #[test]
    fn class_attributes_docstring_and_config_init() {
        let s = summary(
            "class E(BaseEnv):\n    \"\"\"\n    First line.\n    More.\n    \"\"\"\n    name = 'e'\n    env_config_cls = cfg.EConfig\n    @classmethod\n    def config_init(cls) -> Tuple[EConfig, List[X]]:\n        pass\n",
        );
        let class = &s.classes[0];
        assert_eq!(class.name, "E");
        assert_eq!(class.line, 1);
        assert_eq!(class.bases, vec![vec!["BaseEnv".to_owned()]]);
        assert_eq!(class.docstring_first_line.as_deref(), Some("First line."));
        assert_eq!(class.name_attribute.as_deref(), Some("e"));
        assert_eq!(
            class.env_config_cls,
            Some(vec!["cfg".to_owned(), "EConfig".to_owned()])
        );
        assert!(class.has_config_init);
        assert_eq!(class.config_init_returns, Some(vec!["EConfig".to_owned()]));
    }

    #[test]
    fn annotated_name_counts_and_non_literal_name_does_not() {
        let s = summary("class A(B):\n    name: str = 'a'\nclass C(B):\n    name = make()\n");
        assert_eq!(s.classes[0].name_attribute.as_deref(), Some("a"));
        assert_eq!(s.classes[1].name_attribute, None);
    }

    #[test]
    fn generic_and_attribute_bases() {
        let s = summary("class A(base.BaseEnv, Generic[T], metaclass=M):\n    pass\n");
        assert_eq!(
            s.classes[0].bases,
            vec![
                vec!["base".to_owned(), "BaseEnv".to_owned()],
                vec!["Generic".to_owned()]
            ]
        );
    }

    #[test]
    fn subscripted_bases_keep_their_arguments_and_load_environment_is_seen() {
        let s = summary(
            "\"\"\"Reverse text.\"\"\"\nclass T(vf.Taskset[MyTask, cfg.MyConfig], Other):\n    pass\ndef load_environment(n: int = 3):\n    pass\n",
        );
        let class = &s.classes[0];
        assert_eq!(
            class.base_arguments,
            vec![
                vec![
                    vec!["MyTask".to_owned()],
                    vec!["cfg".to_owned(), "MyConfig".to_owned()]
                ],
                vec![]
            ]
        );
        assert_eq!(s.load_environment, Some(4));
        assert_eq!(s.docstring_first_line.as_deref(), Some("Reverse text."));
    }

    #[test]
    fn imports_bind_local_names() {
        let s = summary(
            "from atroposlib.envs.base import BaseEnv as B\nimport a.b.c\nimport x.y as z\nfrom . import sib\n",
        );
        assert!(matches!(
            &s.bindings["B"][0].target,
            BindingTarget::ImportedName { level: 0, module, name } if module == &["atroposlib", "envs", "base"] && name == "BaseEnv"
        ));
        assert!(
            matches!(&s.bindings["a"][0].target, BindingTarget::ImportedModule { module } if module == &["a"])
        );
        assert!(
            matches!(&s.bindings["z"][0].target, BindingTarget::ImportedModule { module } if module == &["x", "y"])
        );
        assert!(
            matches!(&s.bindings["sib"][0].target, BindingTarget::ImportedName { level: 1, module, .. } if module.is_empty())
        );
    }

    #[test]
    fn every_import_is_listed_whatever_its_scope() {
        let s = summary(
            "import a.b.c, d as e\nfrom .. import x, y\nfrom .sib import *\ndef f():\n    from environments.p.q import R\nclass C:\n    if True:\n        import z\n",
        );
        let import = |level: u32, module: &[&str], names: &[&str]| Import {
            level,
            module: module.iter().map(|m| (*m).to_owned()).collect(),
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            need: Need::Required,
        };
        assert_eq!(
            s.imports,
            [
                import(0, &["a", "b", "c"], &[]),
                import(0, &["d"], &[]),
                import(2, &[], &["x", "y"]),
                import(1, &["sib"], &[]),
                import(0, &["environments", "p", "q"], &["R"]),
                import(0, &["z"], &[]),
            ]
        );
    }

    #[test]
    fn classes_in_try_and_if_blocks_are_found_but_not_in_functions() {
        let s = summary(
            "try:\n    class A(X): pass\nexcept ImportError:\n    class A: pass\nif True:\n    class B(X): pass\ndef f():\n    class C(X): pass\n",
        );
        let names: Vec<_> = s.classes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["A", "A", "B"]);
        assert_eq!(s.bindings["A"].len(), 2);
    }

    #[test]
    fn main_guard_cli_calls() {
        let s = summary("if __name__ == '__main__':\n    E.cli()\n    other()\n");
        assert!(s.cli_classes.contains("E"));
        let s = summary("if '__main__' == __name__:\n    F.cli()\n");
        assert!(s.cli_classes.contains("F"));
        let s = summary("if __name__ != '__main__':\n    G.cli()\n");
        assert!(s.cli_classes.is_empty());
    }

    #[test]
    fn syntax_error_reports_line_and_column() {
        let err = summarize("x = 1\ndef f(:\n").unwrap_err();
        let SkipReason::SyntaxError { line, .. } = err else {
            panic!("{err:?}")
        };
        assert_eq!(line, 2);
    }

    #[test]
    fn python_312_syntax_parses() {
        let s = summary(
            "type Score = float\nclass Buf[T](BaseEnv):\n    pass\nx = f\"{d[\"k\"]}\"\ndef first[T](xs: list[T]) -> T:\n    return xs[0]\n",
        );
        assert_eq!(s.classes[0].name, "Buf");
        assert_eq!(s.classes[0].line, 2);
    }

    #[test]
    fn crlf_lines_are_counted() {
        let s = summary("a = 1\r\nb = 2\r\nclass E(BaseEnv):\r\n    pass\r\n");
        assert_eq!(s.classes[0].line, 3);
    }
}
