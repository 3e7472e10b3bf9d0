//! The one way rl parses Python: a source nesting too deeply for a syntax tree is refused from
//! its tokens first (see `nesting`), then ruff parses it. Discovery and rl-config both parse
//! through here, so no file reaches the parser unchecked.

use ruff_python_ast::{Expr, ModModule};
use ruff_python_parser::{Mode, ParseError};

use crate::SkipReason;
use crate::nesting;

/// A module's syntax tree, or why the file is skipped.
pub fn parse_python_module(source: &str) -> Result<ModModule, SkipReason> {
    refuse_deep_nesting(source, Mode::Module)?;
    ruff_python_parser::parse_module(source)
        .map(ruff_python_parser::Parsed::into_syntax)
        .map_err(|error| syntax_error(source, &error))
}

/// One expression's syntax tree (a string annotation, say), or why it cannot be read.
pub fn parse_python_expression(source: &str) -> Result<Expr, SkipReason> {
    refuse_deep_nesting(source, Mode::Expression)?;
    ruff_python_parser::parse_expression(source)
        .map(|parsed| *parsed.into_syntax().body)
        .map_err(|error| syntax_error(source, &error))
}

fn refuse_deep_nesting(source: &str, mode: Mode) -> Result<(), SkipReason> {
    nesting::check(source, mode).map_err(|(nesting, line)| SkipReason::TooDeeplyNested {
        nesting,
        line,
        limit: nesting.limit(),
    })
}

fn syntax_error(source: &str, error: &ParseError) -> SkipReason {
    let (line, column) = line_and_column(source, error.location.start().to_u32());
    SkipReason::SyntaxError {
        line,
        column,
        message: error.error.to_string(),
    }
}

fn line_and_column(text: &str, offset: u32) -> (u32, u32) {
    let offset = (offset as usize).min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let column = 1 + text
        .get(line_start..offset)
        .map_or(0, |text| text.chars().count());
    (line as u32, column as u32)
}
