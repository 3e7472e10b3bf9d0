//! Every import statement of a file, whatever its scope, with how much a run needs it: an
//! import a run cannot go on without, one with a fallback (optional), or one only a type
//! checker reads.

use std::collections::HashSet;

use ruff_python_ast::statement_visitor::{StatementVisitor, walk_stmt};
use ruff_python_ast::{self as ast, Expr, Stmt};

use super::{Dotted, dotted_str};

/// One import statement: `from {level dots}{module} import {names}`, or `import {module}`
/// (`names` empty; one per module of `import a, b`). A star import names nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Import {
    pub level: u32,
    pub module: Dotted,
    pub names: Vec<String>,
    pub need: Need,
}

/// How much a run needs an import, read from the statements around it. Ordered from the
/// strongest need to the weakest: an import nested in two contexts gets the weaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Need {
    /// Runs unguarded; or in a `try` whose handler of its failure raises; or its name, left
    /// `None` by such a handler, is later checked and an `ImportError` raised
    /// (`if lib is None: raise ImportError(...)`): the environment stops without it.
    Required,
    /// In a `try` whose handler of an import's failure goes on (a fallback, a warning), or in
    /// such a handler (the fallback itself): the environment may run without it.
    Optional,
    /// Under `if TYPE_CHECKING:`: a run never imports it.
    TypeChecking,
}

/// The imports of a module body.
pub(crate) fn collect(body: &[Stmt]) -> Vec<Import> {
    let mut collector = Collector {
        imports: Vec::new(),
        bound: Vec::new(),
        need: Need::Required,
        checked_for_none: HashSet::new(),
    };
    collector.visit_body(body);
    let Collector {
        mut imports,
        bound,
        checked_for_none,
        ..
    } = collector;
    for (import, names) in imports.iter_mut().zip(&bound) {
        if import.need == Need::Optional && names.iter().any(|n| checked_for_none.contains(n)) {
            import.need = Need::Required;
        }
    }
    imports
}

struct Collector {
    imports: Vec<Import>,
    /// The names each import binds, by index into `imports`.
    bound: Vec<Vec<String>>,
    /// The need of the statements being visited.
    need: Need,
    /// Names tested for `None` (`if x is None:` / `if not x:`) by an `if` that raises an
    /// `ImportError`.
    checked_for_none: HashSet<String>,
}

impl Collector {
    fn push(&mut self, import: Import, bound: Vec<String>) {
        self.imports.push(import);
        self.bound.push(bound);
    }

    /// Visits `body` with the need weakened to `need`.
    fn visit_with(&mut self, need: Need, body: &[Stmt]) {
        let outer = self.need;
        self.need = outer.max(need);
        self.visit_body(body);
        self.need = outer;
    }
}

impl<'a> StatementVisitor<'a> for Collector {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::ImportFrom(import) => {
                let bound = import
                    .names
                    .iter()
                    .filter(|alias| alias.name.as_str() != "*")
                    .map(|alias| alias.asname.as_ref().unwrap_or(&alias.name).to_string())
                    .collect();
                let import = Import {
                    level: import.level,
                    module: import
                        .module
                        .as_ref()
                        .map(|m| dotted_str(m.as_str()))
                        .unwrap_or_default(),
                    names: import
                        .names
                        .iter()
                        .map(|alias| alias.name.to_string())
                        .filter(|name| name != "*")
                        .collect(),
                    need: self.need,
                };
                self.push(import, bound);
            }
            Stmt::Import(import) => {
                for alias in &import.names {
                    let module = dotted_str(alias.name.as_str());
                    let bound = match &alias.asname {
                        Some(asname) => asname.to_string(),
                        None => module[0].clone(),
                    };
                    let import = Import {
                        level: 0,
                        module,
                        names: Vec::new(),
                        need: self.need,
                    };
                    self.push(import, vec![bound]);
                }
            }
            Stmt::Try(stmt_try) => {
                let catching: Vec<&ast::ExceptHandlerExceptHandler> = stmt_try
                    .handlers
                    .iter()
                    .map(|handler| {
                        let ast::ExceptHandler::ExceptHandler(handler) = handler;
                        handler
                    })
                    .filter(|handler| catches_import_failure(handler.type_.as_deref()))
                    .collect();
                // A failed import goes on only when a handler catches it and none of those
                // raises again.
                let goes_on =
                    !catching.is_empty() && !catching.iter().any(|h| raises(&h.body, |_| true));
                let body_need = if goes_on {
                    Need::Optional
                } else {
                    Need::Required
                };
                self.visit_with(body_need, &stmt_try.body);
                for handler in &stmt_try.handlers {
                    let ast::ExceptHandler::ExceptHandler(handler) = handler;
                    self.visit_with(Need::Optional, &handler.body);
                }
                self.visit_body(&stmt_try.orelse);
                self.visit_body(&stmt_try.finalbody);
            }
            Stmt::If(stmt_if) if is_type_checking(&stmt_if.test) => {
                self.visit_with(Need::TypeChecking, &stmt_if.body);
                for clause in &stmt_if.elif_else_clauses {
                    self.visit_body(&clause.body);
                }
            }
            Stmt::If(stmt_if) => {
                let tests = std::iter::once((Some(&*stmt_if.test), &stmt_if.body)).chain(
                    stmt_if
                        .elif_else_clauses
                        .iter()
                        .map(|clause| (clause.test.as_ref(), &clause.body)),
                );
                for (test, body) in tests {
                    if let Some(name) = test.and_then(name_tested_for_none)
                        && raises(body, is_import_error)
                    {
                        self.checked_for_none.insert(name.to_owned());
                    }
                }
                walk_stmt(self, stmt);
            }
            _ => walk_stmt(self, stmt),
        }
    }
}

/// `TYPE_CHECKING` or `typing.TYPE_CHECKING`.
fn is_type_checking(test: &Expr) -> bool {
    match test {
        Expr::Name(name) => name.id.as_str() == "TYPE_CHECKING",
        Expr::Attribute(attribute) => attribute.attr.as_str() == "TYPE_CHECKING",
        _ => false,
    }
}

/// A bare `except:`, or one naming `ImportError`, `ModuleNotFoundError` or a base of theirs.
fn catches_import_failure(kind: Option<&Expr>) -> bool {
    const CATCHING: [&str; 4] = [
        "ImportError",
        "ModuleNotFoundError",
        "Exception",
        "BaseException",
    ];
    match kind {
        None => true,
        Some(Expr::Tuple(tuple)) => tuple.iter().any(|kind| catches_import_failure(Some(kind))),
        Some(kind) => exception_name(kind).is_some_and(|name| CATCHING.contains(&name)),
    }
}

/// `ImportError` or `ModuleNotFoundError`, raised as a class or an instance.
fn is_import_error(raised: Option<&Expr>) -> bool {
    let raised = match raised {
        Some(Expr::Call(call)) => &*call.func,
        Some(other) => other,
        None => return false,
    };
    exception_name(raised).is_some_and(|name| matches!(name, "ImportError" | "ModuleNotFoundError"))
}

/// `Name` or `module.Name`: the last part.
fn exception_name(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Name(name) => Some(name.id.as_str()),
        Expr::Attribute(attribute) => Some(attribute.attr.as_str()),
        _ => None,
    }
}

/// `x is None` or `not x`: `x`.
fn name_tested_for_none(test: &Expr) -> Option<&str> {
    match test {
        Expr::Compare(compare)
            if matches!(&*compare.ops, [ast::CmpOp::Is])
                && matches!(&*compare.comparators, [Expr::NoneLiteral(_)]) =>
        {
            match &*compare.left {
                Expr::Name(name) => Some(name.id.as_str()),
                _ => None,
            }
        }
        Expr::UnaryOp(unary) if unary.op == ast::UnaryOp::Not => match &*unary.operand {
            Expr::Name(name) => Some(name.id.as_str()),
            _ => None,
        },
        _ => None,
    }
}

/// `body` holds a `raise` (outside the functions and classes it defines) that `counts`
/// accepts, given what it raises (`None` for a bare `raise`).
fn raises(body: &[Stmt], counts: fn(Option<&Expr>) -> bool) -> bool {
    struct Finder {
        counts: fn(Option<&Expr>) -> bool,
        found: bool,
    }
    impl<'a> StatementVisitor<'a> for Finder {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            match stmt {
                Stmt::Raise(raise) => self.found |= (self.counts)(raise.exc.as_deref()),
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
                _ => walk_stmt(self, stmt),
            }
        }
    }
    let mut finder = Finder {
        counts,
        found: false,
    };
    finder.visit_body(body);
    finder.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(source: &str) -> Vec<(String, Need)> {
        let module = crate::parse::parse_python_module(source).unwrap();
        collect(&module.body)
            .into_iter()
            .map(|import| (import.module.join("."), import.need))
            .collect()
    }

    fn pairs(expected: &[(&str, Need)]) -> Vec<(String, Need)> {
        expected
            .iter()
            .map(|(name, need)| ((*name).to_owned(), *need))
            .collect()
    }

    #[test]
    fn a_try_that_goes_on_makes_its_imports_optional() {
        let found = needs(
            "try:\n    import fast\nexcept ImportError:\n    import slow\ntry:\n    import must\nfinally:\n    pass\n\
             import plain\nif typing.TYPE_CHECKING:\n    import typed\nelse:\n    import untyped\n\
             try:\n    import warned\nexcept Exception as e:\n    print(e)\nelse:\n    import after\n",
        );
        assert_eq!(
            found,
            pairs(&[
                ("fast", Need::Optional),
                ("slow", Need::Optional),
                ("must", Need::Required),
                ("plain", Need::Required),
                ("typed", Need::TypeChecking),
                ("untyped", Need::Required),
                ("warned", Need::Optional),
                ("after", Need::Required),
            ])
        );
    }

    #[test]
    fn a_handler_that_raises_or_does_not_catch_leaves_the_import_required() {
        let found = needs(
            "try:\n    import reraised\nexcept ImportError:\n    log('x')\n    raise\n\
             try:\n    import explained\nexcept (ModuleNotFoundError, OSError) as e:\n    raise ImportError('pip install explained') from e\n\
             try:\n    import uncaught\nexcept KeyError:\n    pass\n\
             try:\n    import lazy\nexcept ImportError:\n    def later():\n        raise ImportError('x')\n",
        );
        assert_eq!(
            found,
            pairs(&[
                ("reraised", Need::Required),
                ("explained", Need::Required),
                ("uncaught", Need::Required),
                ("lazy", Need::Optional),
            ])
        );
    }

    #[test]
    fn a_name_left_none_then_refused_with_an_import_error_is_required() {
        let found = needs(
            "try:\n    import gymlib\n    from gymlib.utils import pick\nexcept ImportError as e:\n    print(e)\n    gymlib = None\n    pick = None\n\
             try:\n    import extra\nexcept ImportError:\n    extra = None\n\
             class Env:\n    def setup(self):\n        if gymlib is None:\n            raise ImportError('gymlib could not be imported')\n\
             \x20       if not extra:\n            print('no extra')\n",
        );
        assert_eq!(
            found,
            pairs(&[
                ("gymlib", Need::Required),
                ("gymlib.utils", Need::Optional),
                ("extra", Need::Optional),
            ])
        );
    }
}
