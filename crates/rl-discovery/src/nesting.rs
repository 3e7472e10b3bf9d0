//! How deeply a Python source nests, bounded from its tokens alone, so that a file too deep to
//! handle is refused before a syntax tree exists. ruff's parser grows its own stack, but the
//! tree it returns is dropped, and walked, by recursion: `x = 1+1+…+1` with 150 000 terms is a
//! tree 150 000 levels deep, and dropping it overflows any thread's stack and aborts the
//! process. The lexer is a loop, so reading tokens is safe at any depth.
//!
//! The bound: every token that can make a tree node (an operator, `.`, a keyword, an opening
//! bracket, an f-string) is one level; names, literals and separators are none. Elements
//! separated by commas are siblings, so a comma starts the count again, except in a lambda's
//! parameters and after a token whose operand spans the commas (`x = yield a, b`). A bracket
//! group counts as deep as its deepest element, once, in the expression around it.

use ruff_python_ast::token::TokenKind;
use ruff_python_parser::Mode;

/// CPython's tokenizer refuses more open brackets than this ("too many nested parentheses").
pub(crate) const MAX_BRACKET_NESTING: u32 = 200;
/// CPython's tokenizer refuses a 100th level ("too many levels of indentation").
pub(crate) const MAX_INDENTATION: u32 = 99;
/// About where CPython 3.11 and 3.12's compiler gives up on a chain of operators, calls or
/// attribute accesses ("maximum recursion depth exceeded during compilation", near 2 990).
/// Real code stays under 100; a syntax tree this deep is dropped in well under a megabyte of
/// stack (measured in debug builds at twice this depth).
pub(crate) const MAX_EXPRESSION_DEPTH: u32 = 3_000;

/// What nests too deeply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nesting {
    Brackets,
    Indentation,
    Expression,
}

impl Nesting {
    pub fn limit(self) -> u32 {
        match self {
            Nesting::Brackets => MAX_BRACKET_NESTING,
            Nesting::Indentation => MAX_INDENTATION,
            Nesting::Expression => MAX_EXPRESSION_DEPTH,
        }
    }

    /// The refusal in words, with what CPython says about the same file.
    pub(crate) fn describe(self, line: u32) -> String {
        let limit = self.limit();
        match self {
            Nesting::Brackets => format!(
                "brackets nested more than {limit} deep at line {line}; Python refuses this \
                 file too (\"too many nested parentheses\")"
            ),
            Nesting::Indentation => format!(
                "blocks indented more than {limit} levels deep at line {line}; Python refuses \
                 this file too (\"too many levels of indentation\")"
            ),
            Nesting::Expression => format!(
                "an expression nested more than {limit} levels deep at line {line} (operators, \
                 calls, attribute accesses or lambdas chained), over rl's limit; Python's \
                 compiler gives up near this depth too (\"maximum recursion depth exceeded \
                 during compilation\")"
            ),
        }
    }
}

/// Refuses a source nesting deeper than the limits above, naming the first line at which it
/// already does.
pub(crate) fn check(source: &str, mode: Mode) -> Result<(), (Nesting, u32)> {
    let Err(refused) = measure(source, mode) else {
        return Ok(());
    };
    Err((
        refused.nesting,
        first_failing_line(source, mode, refused.lines_before),
    ))
}

/// The lexer gives token kinds but not their positions, so the line is found by measuring
/// prefixes that end at line ends: the first prefix already too deep ends at the culprit line.
/// The search starts at the lines the tokens ended before the refusal (more only when strings
/// span lines), and runs only for a refused file.
fn first_failing_line(source: &str, mode: Mode, lines_before: usize) -> u32 {
    let line_ends: Vec<usize> = source
        .bytes()
        .enumerate()
        .filter(|&(_, byte)| byte == b'\n')
        .map(|(at, _)| at + 1)
        .chain(std::iter::once(source.len()))
        .collect();
    let start = lines_before.min(line_ends.len().saturating_sub(1));
    let failing =
        start + line_ends[start..].partition_point(|&end| measure(&source[..end], mode).is_ok());
    u32::try_from(failing + 1).unwrap_or(u32::MAX)
}

/// What nests past a limit, and how many lines had ended (by their newline tokens) before.
struct Refusal {
    nesting: Nesting,
    lines_before: usize,
}

/// Binding strength, loosest first: Python's operator precedence, with the statement-level
/// words (`=`, `return`, `:`, `for`, `yield` …) below everything.
type Level = u8;
const STATEMENT: Level = 1;
const LAMBDA: Level = 2;
const CONDITIONAL: Level = 3;
const OR: Level = 4;
const AND: Level = 5;
const NOT: Level = 6;
/// Comparisons, and `*x` / `**x` unpacking, which takes a comparison-free operand.
const COMPARISON: Level = 7;
const BIT_OR: Level = 8;
const BIT_XOR: Level = 9;
const BIT_AND: Level = 10;
const SHIFT: Level = 11;
const SUM: Level = 12;
const PRODUCT: Level = 13;
const SIGN: Level = 14;
const POWER: Level = 15;
const AWAIT: Level = 16;
/// `.`, and a call's or subscript's bracket.
const PRIMARY: Level = 17;

/// A run of operators of one level: `count` of them over operands at most `deepest_operand`
/// deep. Whatever shape the run's tree takes, it is at most `count` deeper than its operands.
struct Run {
    level: Level,
    count: u32,
    deepest_operand: u32,
}

/// One comma-separated element, read operator-precedence style, as a parser would.
struct Element {
    /// Open runs, loosest at the bottom.
    runs: Vec<Run>,
    /// The depth of the operand being read.
    operand: u32,
    expecting_operand: bool,
    /// The sum of the open runs' counts: the element is at least this deep already.
    open_levels: u32,
}

impl Element {
    /// An element under `spanning` levels that all elements of its group share.
    fn under(spanning: u32) -> Self {
        let runs = if spanning > 0 {
            vec![Run {
                level: STATEMENT,
                count: spanning,
                deepest_operand: 0,
            }]
        } else {
            Vec::new()
        };
        Self {
            runs,
            operand: 0,
            expecting_operand: true,
            open_levels: spanning,
        }
    }

    fn operand(&mut self, depth: u32) {
        if self.expecting_operand {
            self.operand = depth;
            self.expecting_operand = false;
        } else {
            // Two operands in a row: a syntax error, or an `else` branch, or an f-string's
            // parts. Either way no deeper than the deeper of the two.
            self.operand = self.operand.max(depth);
        }
    }

    /// Ends the runs binding tighter than `level`: their operand is complete.
    fn fold_tighter_than(&mut self, level: Level) {
        while let Some(run) = self.runs.pop_if(|run| run.level > level) {
            self.operand = run
                .count
                .saturating_add(run.deepest_operand.max(self.operand));
            self.open_levels = self.open_levels.saturating_sub(run.count);
        }
    }

    fn binary(&mut self, level: Level) {
        if self.expecting_operand {
            // The second word of `not in` / `is not`, or a syntax error: no node of its own.
            return;
        }
        self.fold_tighter_than(level);
        match self.runs.last_mut() {
            Some(run) if run.level == level => {
                run.count = run.count.saturating_add(1);
                run.deepest_operand = run.deepest_operand.max(self.operand);
            }
            _ => self.runs.push(Run {
                level,
                count: 1,
                deepest_operand: self.operand,
            }),
        }
        self.open_levels = self.open_levels.saturating_add(1);
        self.operand = 0;
        self.expecting_operand = true;
    }

    fn prefix(&mut self, level: Level) {
        if !self.expecting_operand {
            self.binary(level);
            return;
        }
        match self.runs.last_mut() {
            Some(run) if run.level == level => run.count = run.count.saturating_add(1),
            _ => self.runs.push(Run {
                level,
                count: 1,
                deepest_operand: 0,
            }),
        }
        self.open_levels = self.open_levels.saturating_add(1);
    }

    /// A lambda's parameters, read as a group of their own: part of the lambda, not its body.
    fn lambda_parameters(&mut self, depth: u32) {
        if let Some(run) = self.runs.last_mut() {
            run.deepest_operand = run.deepest_operand.max(depth);
        }
    }

    fn depth(mut self) -> u32 {
        self.fold_tighter_than(0);
        self.operand
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum GroupKind {
    Statement,
    /// `(`, `[` or `{`; `atom` when it makes a value (a tuple, a list) rather than follows one
    /// (a call, a subscript).
    Bracket {
        atom: bool,
    },
    LambdaParameters,
    FString,
}

/// A statement, bracket group, f-string or lambda parameter list being measured.
struct Group {
    kind: GroupKind,
    element: Element,
    deepest_element: u32,
    /// Levels every later element sits under (`x = yield a, b`: `=` and `yield`).
    spanning: u32,
    /// The statement-level count the current element started with.
    element_start: u32,
}

impl Group {
    fn new(kind: GroupKind) -> Self {
        Self {
            kind,
            element: Element::under(0),
            deepest_element: 0,
            spanning: 0,
            element_start: 0,
        }
    }

    fn next_element(&mut self) {
        let finished = std::mem::replace(&mut self.element, Element::under(self.spanning));
        self.deepest_element = self.deepest_element.max(finished.depth());
        self.element_start = self.spanning;
    }

    /// The statement-level words read so far in this element span the elements that follow;
    /// counted within the element, so `x = a in b, c in d, …` does not pile up.
    fn spans_elements(&mut self) {
        if let Some(run) = self.element.runs.first()
            && run.level == STATEMENT
        {
            let local = run.count.saturating_sub(self.element_start);
            self.spanning = self.spanning.max(local);
        }
    }

    fn depth(self) -> u32 {
        self.deepest_element.max(self.element.depth())
    }
}

struct Measure {
    /// The statement at the bottom, then each open group inside it.
    groups: Vec<Group>,
    /// The deepest statement so far, its indentation included.
    deepest: u32,
    brackets: u32,
    indentation: u32,
}

impl Measure {
    fn new() -> Self {
        Self {
            groups: vec![Group::new(GroupKind::Statement)],
            deepest: 0,
            brackets: 0,
            indentation: 0,
        }
    }

    fn innermost(&mut self) -> &mut Group {
        if self.groups.is_empty() {
            self.groups.push(Group::new(GroupKind::Statement));
        }
        let last = self.groups.len() - 1;
        &mut self.groups[last]
    }

    fn element(&mut self) -> &mut Element {
        &mut self.innermost().element
    }

    fn check_depth(&self, depth: u32) -> Result<(), Nesting> {
        if depth.saturating_add(self.indentation) > MAX_EXPRESSION_DEPTH {
            return Err(Nesting::Expression);
        }
        Ok(())
    }

    fn check_open_levels(&mut self) -> Result<(), Nesting> {
        let open = self.element().open_levels;
        self.check_depth(open)
    }

    fn open(&mut self, kind: GroupKind) -> Result<(), Nesting> {
        if let GroupKind::Bracket { .. } = kind {
            self.brackets += 1;
            if self.brackets > MAX_BRACKET_NESTING {
                return Err(Nesting::Brackets);
            }
        }
        // Every group is at least one level; this bounds the stack whatever the source.
        if self.groups.len() > MAX_EXPRESSION_DEPTH as usize {
            return Err(Nesting::Expression);
        }
        self.groups.push(Group::new(kind));
        Ok(())
    }

    fn open_bracket(&mut self, may_follow_a_value: bool) -> Result<(), Nesting> {
        let element = self.element();
        let atom = !may_follow_a_value || element.expecting_operand;
        if !atom {
            element.binary(PRIMARY);
        }
        self.open(GroupKind::Bracket { atom })?;
        self.check_open_levels()
    }

    /// Closes groups up to the innermost one `closes` accepts; a closer nothing open accepts is
    /// the parser's to report.
    fn close_up_to(&mut self, closes: impl Fn(GroupKind) -> bool) -> Result<(), Nesting> {
        if !self.groups.iter().skip(1).any(|group| closes(group.kind)) {
            return Ok(());
        }
        while self.groups.len() > 1 {
            let kind = self.close_innermost()?;
            if closes(kind) {
                break;
            }
        }
        Ok(())
    }

    fn close_innermost(&mut self) -> Result<GroupKind, Nesting> {
        let Some(group) = self.groups.pop() else {
            return Ok(GroupKind::Statement);
        };
        let kind = group.kind;
        let depth = group.depth();
        self.check_depth(depth)?;
        let outer = self.element();
        match kind {
            GroupKind::Bracket { atom } => {
                outer.operand(depth.saturating_add(u32::from(atom)));
                self.brackets = self.brackets.saturating_sub(1);
            }
            GroupKind::FString => outer.operand(depth.saturating_add(1)),
            GroupKind::LambdaParameters => outer.lambda_parameters(depth),
            GroupKind::Statement => {}
        }
        Ok(kind)
    }

    fn end_statement(&mut self) -> Result<(), Nesting> {
        while self.groups.len() > 1 {
            self.close_innermost()?;
        }
        let statement = std::mem::replace(self.innermost(), Group::new(GroupKind::Statement));
        let depth = statement.depth();
        self.deepest = self.deepest.max(depth.saturating_add(self.indentation));
        self.check_depth(depth)
    }

    fn binary(&mut self, level: Level) -> Result<(), Nesting> {
        self.element().binary(level);
        self.check_open_levels()
    }

    fn prefix(&mut self, level: Level) -> Result<(), Nesting> {
        self.element().prefix(level);
        self.check_open_levels()
    }

    /// `-x` or `a - b`: which one depends on whether an operand is expected.
    fn prefix_or_binary(&mut self, prefix: Level, binary: Level) -> Result<(), Nesting> {
        if self.element().expecting_operand {
            self.prefix(prefix)
        } else {
            self.binary(binary)
        }
    }

    fn token(&mut self, kind: TokenKind) -> Result<(), Nesting> {
        use TokenKind as T;
        match kind {
            T::Name
            | T::Int
            | T::Float
            | T::Complex
            | T::String
            | T::Ellipsis
            | T::True
            | T::False
            | T::None
            | T::Pass
            | T::Break
            | T::Continue
            // Soft keywords are names as often as not (`type`, `match`).
            | T::Match
            | T::Case
            | T::Type
            | T::Lazy => {
                self.element().operand(0);
                Ok(())
            }
            T::FStringMiddle
            | T::TStringMiddle
            | T::Comment
            | T::NonLogicalNewline
            | T::Async
            // The `if` of a conditional expression is its level.
            | T::Else
            // Lexical errors are the parser's to report; it reads each as one flat expression.
            | T::Unknown => Ok(()),
            T::Lpar | T::Lsqb => self.open_bracket(true),
            T::Lbrace => self.open_bracket(false),
            T::Rpar | T::Rsqb | T::Rbrace => {
                self.close_up_to(|kind| matches!(kind, GroupKind::Bracket { .. }))
            }
            T::FStringStart | T::TStringStart => self.open(GroupKind::FString),
            T::FStringEnd | T::TStringEnd => self.close_up_to(|kind| kind == GroupKind::FString),
            T::Newline | T::Semi | T::EndOfFile => self.end_statement(),
            T::Indent => {
                self.indentation += 1;
                if self.indentation > MAX_INDENTATION {
                    return Err(Nesting::Indentation);
                }
                Ok(())
            }
            T::Dedent => {
                self.indentation = self.indentation.saturating_sub(1);
                Ok(())
            }
            T::Comma => {
                self.innermost().next_element();
                Ok(())
            }
            T::Lambda => {
                self.prefix(LAMBDA)?;
                self.open(GroupKind::LambdaParameters)
            }
            T::Colon if self.innermost().kind == GroupKind::LambdaParameters => {
                self.close_innermost()?;
                Ok(())
            }
            T::Yield => {
                self.prefix(STATEMENT)?;
                self.innermost().spans_elements();
                Ok(())
            }
            T::Dot => self.binary(PRIMARY),
            T::Await => self.prefix(AWAIT),
            T::Tilde => self.prefix(SIGN),
            T::Minus | T::Plus => self.prefix_or_binary(SIGN, SUM),
            T::Star => self.prefix_or_binary(COMPARISON, PRODUCT),
            T::DoubleStar => self.prefix_or_binary(COMPARISON, POWER),
            T::At => self.prefix_or_binary(STATEMENT, PRODUCT),
            T::Not => self.prefix_or_binary(NOT, COMPARISON),
            T::If => self.prefix_or_binary(STATEMENT, CONDITIONAL),
            T::Or => self.binary(OR),
            T::And => self.binary(AND),
            T::Less
            | T::Greater
            | T::EqEqual
            | T::NotEqual
            | T::LessEqual
            | T::GreaterEqual
            | T::In
            | T::Is => self.binary(COMPARISON),
            T::Vbar => self.binary(BIT_OR),
            T::CircumFlex => self.binary(BIT_XOR),
            T::Amper => self.binary(BIT_AND),
            T::LeftShift | T::RightShift => self.binary(SHIFT),
            T::Slash | T::DoubleSlash | T::Percent => self.binary(PRODUCT),
            // `=`, `:`, `->`, `:=`, and the statement keywords.
            _ => {
                self.prefix_or_binary(STATEMENT, STATEMENT)?;
                if self.groups.len() == 1 && spans_statement_elements(kind) {
                    self.innermost().spans_elements();
                }
                Ok(())
            }
        }
    }
}

/// Statement words whose operand is a whole comma-separated list: `x = a, b`, `return a, b`,
/// `for a, b in c:`, `del a, b`, `import a, b`, `with a, b:`, `assert a, b`.
fn spans_statement_elements(kind: TokenKind) -> bool {
    use TokenKind as T;
    matches!(
        kind,
        T::Equal
            | T::PlusEqual
            | T::MinusEqual
            | T::StarEqual
            | T::SlashEqual
            | T::DoubleSlashEqual
            | T::PercentEqual
            | T::AmperEqual
            | T::VbarEqual
            | T::CircumflexEqual
            | T::LeftShiftEqual
            | T::RightShiftEqual
            | T::DoubleStarEqual
            | T::AtEqual
            | T::Colon
            | T::Return
            | T::Del
            | T::For
            | T::Import
            | T::Global
            | T::Nonlocal
            | T::With
            | T::Except
            | T::Assert
    )
}

/// The bound on the source's depth, or what nests past a limit.
fn measure(source: &str, mode: Mode) -> Result<u32, Refusal> {
    let mut lexer = ruff_python_parser::lexer::lex(source, mode);
    let mut measure = Measure::new();
    let mut lines_before = 0;
    loop {
        let kind = lexer.next_token();
        if let Err(nesting) = measure.token(kind) {
            return Err(Refusal {
                nesting,
                lines_before,
            });
        }
        match kind {
            TokenKind::EndOfFile => return Ok(measure.deepest),
            TokenKind::Newline | TokenKind::NonLogicalNewline => lines_before += 1,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
