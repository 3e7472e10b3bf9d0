//! The fields an environment's config accepts, as read from source.

use rl_settings::Value;

/// Every field of one environment's config class, base classes included, in pydantic's order
/// (inherited fields first, an override keeping its base's position).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigSchema {
    /// The environment's key in its scan.
    pub environment: String,
    pub config_class: String,
    pub fields: Vec<FieldSpec>,
    /// Where `config_init` is defined (`Class (file:line)`), when anywhere in the scan.
    pub config_init: Option<String>,
    /// What the static reading could not see, said once each (unknown base classes, unpacked
    /// `**kwargs` in `config_init`, …).
    pub notes: Vec<String>,
}

impl ConfigSchema {
    pub fn field(&self, name: &str) -> Option<&FieldSpec> {
        self.fields.iter().find(|field| field.name == name)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FieldSpec {
    pub name: String,
    /// The annotation as written.
    pub type_text: String,
    pub field_type: FieldType,
    /// The config class's default.
    pub class_default: DefaultValue,
    /// What the environment's `config_init` passes for this field, when it passes anything.
    pub env_default: Option<DefaultValue>,
    pub description: Option<String>,
    pub constraints: Constraints,
    /// The class that declares the field (the last one, for overrides).
    pub declared_in: String,
}

impl FieldSpec {
    /// The default that applies: the environment's own where it sets one, else the class's.
    pub fn effective_default(&self) -> &DefaultValue {
        self.env_default.as_ref().unwrap_or(&self.class_default)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum DefaultValue {
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

impl DefaultValue {
    pub fn value(&self) -> Option<&Value> {
        match self {
            DefaultValue::Value { value } => Some(value),
            _ => None,
        }
    }
}

impl std::fmt::Display for DefaultValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DefaultValue::Value { value } => write!(f, "{value}"),
            DefaultValue::Required => f.write_str("(required)"),
            DefaultValue::Computed { expression } => {
                write!(f, "computed at run time: {expression}")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum FieldType {
    Int,
    Float,
    Bool,
    Str,
    Optional {
        inner: Box<FieldType>,
    },
    Literal {
        values: Vec<Value>,
    },
    Enum {
        name: String,
        members: Vec<EnumMember>,
    },
    List {
        item: Box<FieldType>,
    },
    Map,
    Any,
    /// A type the static reading does not know (a custom class, a union); edits of such a field
    /// are accepted as given and said to be unchecked.
    Unknown {
        annotation: String,
    },
}

impl std::fmt::Display for FieldType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldType::Int => f.write_str("integer"),
            FieldType::Float => f.write_str("number"),
            FieldType::Bool => f.write_str("boolean"),
            FieldType::Str => f.write_str("string"),
            FieldType::Optional { inner } => write!(f, "{inner} or null"),
            FieldType::Literal { values } => {
                let values: Vec<String> = values.iter().map(ToString::to_string).collect();
                write!(f, "one of {}", values.join(", "))
            }
            FieldType::Enum { name, members } => {
                let values: Vec<String> = members.iter().map(|m| m.value.to_string()).collect();
                write!(f, "{name}: one of {}", values.join(", "))
            }
            FieldType::List { item } => write!(f, "list of {item}"),
            FieldType::Map => f.write_str("mapping"),
            FieldType::Any => f.write_str("any value"),
            FieldType::Unknown { annotation } => write!(f, "{annotation} (not checked)"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EnumMember {
    pub name: String,
    pub value: Value,
}

/// pydantic's numeric and length constraints, where given as literals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Constraints {
    pub ge: Option<f64>,
    pub gt: Option<f64>,
    pub le: Option<f64>,
    pub lt: Option<f64>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
}

impl Constraints {
    pub fn is_empty(&self) -> bool {
        *self == Constraints::default()
    }
}
