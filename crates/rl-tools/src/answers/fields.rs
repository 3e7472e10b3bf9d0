//! A config field as `rl_get_current_config` details it (its `spec`): the declared type, the
//! defaults, the constraints and the declaring class, each key named here from rl-config's
//! typed reading of the source.

use rl_config::{Constraints, DefaultValue, EnumMember, FieldSpec, FieldType, ValueOrigin};
use rl_settings::Value;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldSpecView {
    pub name: String,
    /// The annotation as written.
    pub type_text: String,
    pub field_type: FieldTypeView,
    /// The config class's default.
    pub class_default: DefaultView,
    /// What the environment's `config_init` passes for this field, when it passes anything.
    pub env_default: Option<DefaultView>,
    pub description: Option<String>,
    pub constraints: ConstraintsView,
    /// The class that declares the field (the last one, for overrides).
    pub declared_in: String,
    /// For people: the type in words (`integer or null`), the annotation where it is unknown.
    #[serde(skip)]
    pub type_label: String,
}

impl From<&FieldSpec> for FieldSpecView {
    fn from(spec: &FieldSpec) -> Self {
        Self {
            name: spec.name.clone(),
            type_text: spec.type_text.clone(),
            field_type: FieldTypeView::from(&spec.field_type),
            class_default: DefaultView::from(&spec.class_default),
            env_default: spec.env_default.as_ref().map(DefaultView::from),
            description: spec.description.clone(),
            constraints: ConstraintsView::from(&spec.constraints),
            declared_in: spec.declared_in.clone(),
            type_label: match &spec.field_type {
                FieldType::Unknown { annotation } => annotation.clone(),
                known => known.to_string(),
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum FieldTypeView {
    Int,
    Float,
    Bool,
    Str,
    Optional {
        inner: Box<FieldTypeView>,
    },
    Literal {
        values: Vec<Value>,
    },
    Enum {
        name: String,
        members: Vec<EnumMemberView>,
    },
    List {
        item: Box<FieldTypeView>,
    },
    Map,
    Any,
    /// A type the static reading does not know: edits are accepted as given, unchecked.
    Unknown {
        annotation: String,
    },
}

impl From<&FieldType> for FieldTypeView {
    fn from(field_type: &FieldType) -> Self {
        match field_type {
            FieldType::Int => Self::Int,
            FieldType::Float => Self::Float,
            FieldType::Bool => Self::Bool,
            FieldType::Str => Self::Str,
            FieldType::Optional { inner } => Self::Optional {
                inner: Box::new(Self::from(inner.as_ref())),
            },
            FieldType::Literal { values } => Self::Literal {
                values: values.clone(),
            },
            FieldType::Enum { name, members } => Self::Enum {
                name: name.clone(),
                members: members.iter().map(EnumMemberView::from).collect(),
            },
            FieldType::List { item } => Self::List {
                item: Box::new(Self::from(item.as_ref())),
            },
            FieldType::Map => Self::Map,
            FieldType::Any => Self::Any,
            FieldType::Unknown { annotation } => Self::Unknown {
                annotation: annotation.clone(),
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnumMemberView {
    pub name: String,
    pub value: Value,
}

impl From<&EnumMember> for EnumMemberView {
    fn from(member: &EnumMember) -> Self {
        Self {
            name: member.name.clone(),
            value: member.value.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum DefaultView {
    Value {
        value: Value,
    },
    /// No default: pydantic requires a value.
    Required,
    /// An expression only Python can evaluate (`default_factory`, a call, a variable).
    Computed {
        expression: String,
    },
}

impl From<&DefaultValue> for DefaultView {
    fn from(default: &DefaultValue) -> Self {
        match default {
            DefaultValue::Value { value } => Self::Value {
                value: value.clone(),
            },
            DefaultValue::Required => Self::Required,
            DefaultValue::Computed { expression } => Self::Computed {
                expression: expression.clone(),
            },
        }
    }
}

/// pydantic's numeric and length constraints, where given as literals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConstraintsView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ge: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gt: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub le: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lt: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
}

impl From<&Constraints> for ConstraintsView {
    fn from(constraints: &Constraints) -> Self {
        Self {
            ge: constraints.ge,
            gt: constraints.gt,
            le: constraints.le,
            lt: constraints.lt,
            min_length: constraints.min_length,
            max_length: constraints.max_length,
        }
    }
}

/// Where a field's current value comes from: `class_default`, `environment_default`,
/// `selection`, `edited` or `locked`.
pub(crate) fn origin_name(origin: ValueOrigin) -> &'static str {
    match origin {
        ValueOrigin::ClassDefault => "class_default",
        ValueOrigin::EnvironmentDefault => "environment_default",
        ValueOrigin::Selection => "selection",
        ValueOrigin::Edited => "edited",
        ValueOrigin::Locked => "locked",
    }
}
