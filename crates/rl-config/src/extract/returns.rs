//! What `config_init`'s body returns and assigns: the statements rl reads its config's
//! construction from.

use ruff_python_ast::{self as ast, Expr, Stmt};

pub(super) fn collect_returns<'b>(body: &'b [Stmt], returns: &mut Vec<&'b Expr>) {
    for stmt in body {
        match stmt {
            Stmt::Return(ret) => returns.extend(ret.value.as_deref()),
            Stmt::If(stmt_if) => {
                collect_returns(&stmt_if.body, returns);
                for clause in &stmt_if.elif_else_clauses {
                    collect_returns(&clause.body, returns);
                }
            }
            Stmt::Try(stmt_try) => {
                collect_returns(&stmt_try.body, returns);
                for handler in &stmt_try.handlers {
                    let ast::ExceptHandler::ExceptHandler(handler) = handler;
                    collect_returns(&handler.body, returns);
                }
                collect_returns(&stmt_try.orelse, returns);
                collect_returns(&stmt_try.finalbody, returns);
            }
            Stmt::With(with) => collect_returns(&with.body, returns),
            _ => {}
        }
    }
}

/// The value last assigned to `variable` among the top-level statements of `body`.
pub(super) fn last_assigned<'b>(body: &'b [Stmt], variable: &str) -> Option<&'b Expr> {
    body.iter().rev().find_map(|stmt| {
        let (targets, value): (Vec<&Expr>, &Expr) = match stmt {
            Stmt::Assign(assign) => (assign.targets.iter().collect(), &assign.value),
            Stmt::AnnAssign(assign) => (vec![&assign.target], assign.value.as_deref()?),
            _ => return None,
        };
        targets
            .iter()
            .any(|t| matches!(t, Expr::Name(n) if n.id.as_str() == variable))
            .then_some(value)
    })
}

pub(super) fn last_call_assigned<'b>(
    body: &'b [Stmt],
    variable: &str,
) -> Option<&'b ast::ExprCall> {
    match last_assigned(body, variable)? {
        Expr::Call(call) => Some(call),
        _ => None,
    }
}
