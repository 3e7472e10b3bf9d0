//! Values written in source: literals (signs, containers), enum members, a field's default.

use rl_settings::Value;
use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::Ranged;

use crate::schema::{DefaultValue, EnumMember, FieldType};

pub(super) fn field_default(text: &str, expr: &Expr, field_type: &FieldType) -> DefaultValue {
    if matches!(expr, Expr::EllipsisLiteral(_)) {
        return DefaultValue::Required;
    }
    default_for(text, expr, Some(field_type))
}

pub(super) fn non_negative(expr: &Expr) -> Option<u64> {
    match literal(expr)? {
        Value::Int(i) => u64::try_from(i).ok(),
        _ => None,
    }
}

/// A literal as a value; an enum member (`Mode.FAST`) as its value when the field is that enum;
/// anything else as an expression computed at run time.
pub(super) fn default_for(text: &str, expr: &Expr, field_type: Option<&FieldType>) -> DefaultValue {
    if let Some(value) = literal(expr) {
        return DefaultValue::Value { value };
    }
    let member = enum_member_name(expr)
        .zip(field_type.and_then(enum_members_of))
        .and_then(|(member, members)| members.iter().find(|m| m.name == member));
    if let Some(found) = member {
        return DefaultValue::Value {
            value: found.value.clone(),
        };
    }
    DefaultValue::Computed {
        expression: slice(text, expr).to_owned(),
    }
}

pub(super) fn enum_member_name(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Attribute(attribute) => Some(attribute.attr.as_str()),
        _ => None,
    }
}

pub(super) fn enum_members_of(field_type: &FieldType) -> Option<&[EnumMember]> {
    match field_type {
        FieldType::Enum { members, .. } => Some(members),
        FieldType::Optional { inner } => enum_members_of(inner),
        _ => None,
    }
}

pub(super) fn enum_members(class: &ast::StmtClassDef) -> Vec<EnumMember> {
    class
        .body
        .iter()
        .filter_map(|stmt| {
            let Stmt::Assign(assign) = stmt else {
                return None;
            };
            let [Expr::Name(target)] = assign.targets.as_slice() else {
                return None;
            };
            let value = literal(&assign.value)?;
            Some(EnumMember {
                name: target.id.to_string(),
                value,
            })
        })
        .collect()
}

pub(crate) fn literal(expr: &Expr) -> Option<Value> {
    Some(match expr {
        Expr::NoneLiteral(_) => Value::Null,
        Expr::BooleanLiteral(b) => Value::Bool(b.value),
        Expr::StringLiteral(s) => Value::Str(s.value.to_str().to_owned()),
        Expr::NumberLiteral(number) => match &number.value {
            ast::Number::Int(int) => Value::Int(int.as_i64()?),
            ast::Number::Float(float) => Value::Float(*float),
            ast::Number::Complex { .. } => return None,
        },
        Expr::UnaryOp(unary) if matches!(unary.op, ast::UnaryOp::USub) => negated_literal(unary)?,
        Expr::List(list) => Value::List(list.elts.iter().map(literal).collect::<Option<_>>()?),
        Expr::Tuple(tuple) => Value::List(tuple.elts.iter().map(literal).collect::<Option<_>>()?),
        Expr::Dict(dict) => {
            let mut map = std::collections::BTreeMap::new();
            for item in &dict.items {
                let Some(Value::Str(key)) = item.key.as_ref().and_then(literal) else {
                    return None;
                };
                map.insert(key, literal(&item.value)?);
            }
            Value::Map(map)
        }
        _ => return None,
    })
}

/// `-1`, `--1.5`: the signs are counted by a loop, as a chain of them may be thousands long.
pub(super) fn negated_literal(unary: &ast::ExprUnaryOp) -> Option<Value> {
    let mut negative = true;
    let mut operand = unary.operand.as_ref();
    while let Expr::UnaryOp(inner) = operand
        && matches!(inner.op, ast::UnaryOp::USub)
    {
        negative = !negative;
        operand = inner.operand.as_ref();
    }
    match literal(operand)? {
        Value::Int(i) if negative => Some(Value::Int(i.checked_neg()?)),
        Value::Float(f) if negative => Some(Value::Float(-f)),
        value @ (Value::Int(_) | Value::Float(_)) => Some(value),
        _ => None,
    }
}

pub(super) fn string_value(expr: &Expr) -> Option<String> {
    match expr {
        Expr::StringLiteral(s) => Some(s.value.to_str().to_owned()),
        _ => None,
    }
}

/// The source text of `node`.
pub(super) fn slice<'t>(text: &'t str, node: &impl Ranged) -> &'t str {
    text.get(node.start().to_usize()..node.end().to_usize())
        .unwrap_or("")
}
