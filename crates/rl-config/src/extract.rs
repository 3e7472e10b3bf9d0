//! Reading an environment's config fields from Python source, without running it.
//!
//! The config class is the one discovery located; its pydantic fields are read from its body,
//! its bases followed through the scanned files down to atroposlib's `BaseEnvConfig`, which is
//! a built-in table (`base_env_config.py`, read by this same code). The environment's own
//! defaults are the literal keyword arguments of the config constructed in `config_init`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::OnceLock;

use rl_discovery::{
    ClassLocation, ClassTarget, Environment, EnvironmentKind, Scan, dotted_name as dotted,
};
use rl_settings::Value;
use ruff_python_ast::{self as ast, Expr, ModModule, Stmt};
use ruff_text_size::Ranged;

use crate::schema::{Constraints, DefaultValue, FieldSpec, FieldType};
use crate::{ConfigError, ConfigSchema};

mod returns;
mod values;
mod verifiers;

use returns::{collect_returns, last_assigned, last_call_assigned};
pub(crate) use values::literal;
use values::{default_for, enum_members, field_default, non_negative, slice, string_value};

/// Deep enough for any real hierarchy, shallow enough to stop a pathological one.
const MAX_BASE_DEPTH: usize = 16;

const BUILTIN_SOURCE: &str = include_str!("base_env_config.py");
const BUILTIN_FILE: &str = "<atroposlib 0.4.0 BaseEnvConfig>";
/// atroposlib's base config class: where the run-level fields are declared (`declared_in`).
pub const BASE_ENV_CONFIG: &str = "BaseEnvConfig";

/// The fields `env` can set, with class defaults, its own defaults and constraints.
pub fn config_schema(scan: &Scan, env: &Environment) -> Result<ConfigSchema, ConfigError> {
    let reader = Reader {
        scan,
        files: RefCell::default(),
    };
    let mut notes = Vec::new();
    if env.kind == EnvironmentKind::VerifiersV0 {
        let mut fields = verifiers::run_fields()?;
        merge_fields(
            &mut fields,
            verifiers::load_environment_fields(&reader, env, &mut notes)?,
        );
        return Ok(ConfigSchema {
            environment: env.key.clone(),
            config_class: env.config_class.clone(),
            fields,
            config_init: None,
            notes,
        });
    }
    let (config_class, mut fields) = match scan.config_class_target(env) {
        Some(target) => {
            let fields = reader.class_fields(&target, 0, &mut notes)?;
            (env.config_class.clone(), fields)
        }
        None if env.kind == EnvironmentKind::VerifiersV1 => {
            (env.config_class.clone(), verifiers::taskset_config_fields())
        }
        None if env.config_class == BASE_ENV_CONFIG => {
            (env.config_class.clone(), builtin()?.fields.clone())
        }
        None => {
            notes.push(format!(
                "{} comes from atroposlib outside the scanned tree; only BaseEnvConfig's fields \
                 are known",
                env.config_class
            ));
            (env.config_class.clone(), builtin()?.fields.clone())
        }
    };

    if env.kind == EnvironmentKind::VerifiersV1 {
        let mut run = verifiers::run_fields()?;
        merge_fields(&mut run, fields);
        fields = run;
    }
    let config_init = scan.config_init_location(env);
    if let Some(location) = &config_init {
        let env_defaults = reader.config_init_kwargs(location, &fields, &mut notes)?;
        for (name, default) in env_defaults {
            match fields.iter_mut().find(|field| field.name == name) {
                Some(field) => field.env_default = Some(default),
                None => notes.push(format!(
                    "config_init sets '{name}', which is not a field of {config_class}"
                )),
            }
        }
    }
    notes.dedup();
    Ok(ConfigSchema {
        environment: env.key.clone(),
        config_class,
        fields,
        config_init: config_init
            .map(|loc| format!("{} ({}:{})", loc.class_name, loc.file, loc.line)),
        notes,
    })
}

struct ParsedFile {
    text: String,
    module: ModModule,
}

impl ParsedFile {
    fn parse(file: &str, text: String) -> Result<Self, ConfigError> {
        let module =
            rl_discovery::parse_python_module(&text).map_err(|reason| ConfigError::Source {
                file: file.to_owned(),
                reason: reason.to_string(),
            })?;
        Ok(Self { text, module })
    }

    fn class(&self, name: &str, line: Option<u32>) -> Option<&ast::StmtClassDef> {
        find_class(&self.module.body, &self.text, name, line)
    }
}

struct Builtin {
    parsed: ParsedFile,
    fields: Vec<FieldSpec>,
    /// atroposlib's `APIServerConfig`: an entry of the run config's `openai:` list.
    servers: Vec<FieldSpec>,
}

/// atroposlib's `BaseEnvConfig` fields, from the built-in table.
pub(crate) fn builtin_env_fields() -> Result<&'static [FieldSpec], ConfigError> {
    Ok(&builtin()?.fields)
}

/// atroposlib's `APIServerConfig` fields (an `openai:` entry), from the built-in table.
pub(crate) fn builtin_server_fields() -> Result<&'static [FieldSpec], ConfigError> {
    Ok(&builtin()?.servers)
}

fn builtin() -> Result<&'static Builtin, ConfigError> {
    static BUILTIN: OnceLock<Result<Builtin, String>> = OnceLock::new();
    let built = BUILTIN.get_or_init(|| {
        let parsed = ParsedFile::parse(BUILTIN_FILE, BUILTIN_SOURCE.to_owned())
            .map_err(|error| error.to_string())?;
        let class = parsed
            .class(BASE_ENV_CONFIG, None)
            .ok_or("no BaseEnvConfig")?;
        let context = TypeContext::Local(&parsed);
        let fields = own_fields(&parsed.text, class, &context);
        let server = parsed
            .class("APIServerConfig", None)
            .ok_or("no APIServerConfig")?;
        let servers = own_fields(&parsed.text, server, &context);
        Ok(Builtin {
            parsed,
            fields,
            servers,
        })
    });
    built.as_ref().map_err(|reason| ConfigError::Source {
        file: BUILTIN_FILE.to_owned(),
        reason: reason.clone(),
    })
}

struct Reader<'a> {
    scan: &'a Scan,
    files: RefCell<HashMap<String, Rc<ParsedFile>>>,
}

impl Reader<'_> {
    fn file(&self, file: &str) -> Result<Rc<ParsedFile>, ConfigError> {
        if let Some(parsed) = self.files.borrow().get(file) {
            return Ok(Rc::clone(parsed));
        }
        let text =
            rl_discovery::read_python_source(&self.scan.root.join(file)).map_err(|reason| {
                ConfigError::Source {
                    file: file.to_owned(),
                    reason: reason.to_string(),
                }
            })?;
        let parsed = Rc::new(ParsedFile::parse(file, text)?);
        self.files
            .borrow_mut()
            .insert(file.to_owned(), Rc::clone(&parsed));
        Ok(parsed)
    }

    fn class_fields(
        &self,
        target: &ClassTarget,
        depth: usize,
        notes: &mut Vec<String>,
    ) -> Result<Vec<FieldSpec>, ConfigError> {
        if depth > MAX_BASE_DEPTH {
            notes.push("config class hierarchy is deeper than rl follows".to_owned());
            return Ok(Vec::new());
        }
        let location = match target {
            ClassTarget::External(qualified) => return Self::external_fields(qualified, notes),
            ClassTarget::Scanned(location) => location,
        };
        let parsed = self.file(&location.file)?;
        let Some(class) = parsed.class(&location.class_name, Some(location.line)) else {
            notes.push(format!("{} moved while being read", location.class_name));
            return Ok(Vec::new());
        };
        let mut fields = Vec::new();
        // pydantic merges along the MRO from the far end: the last base first, the class last.
        for base in self.scan.class_bases(location).iter().rev() {
            merge_fields(&mut fields, self.class_fields(base, depth + 1, notes)?);
        }
        let context = TypeContext::Scanned {
            reader: self,
            file: location.file.clone(),
        };
        merge_fields(&mut fields, own_fields(&parsed.text, class, &context));
        Ok(fields)
    }

    fn external_fields(
        qualified: &str,
        notes: &mut Vec<String>,
    ) -> Result<Vec<FieldSpec>, ConfigError> {
        let name = qualified.rsplit('.').next().unwrap_or(qualified);
        let from_atroposlib = qualified.starts_with("atroposlib.") || qualified == name;
        match name {
            BASE_ENV_CONFIG if from_atroposlib => Ok(builtin()?.fields.clone()),
            _ if verifiers::is_taskset_config(qualified) => Ok(verifiers::taskset_config_fields()),
            "BaseConfig" if qualified.starts_with("pydantic_config.") => Ok(Vec::new()),
            "BaseModel" | "object" | "Generic" => Ok(Vec::new()),
            _ => {
                notes.push(format!(
                    "base class {qualified} is outside the scanned tree; its fields are not known"
                ));
                Ok(Vec::new())
            }
        }
    }

    fn scanned_enum(&self, location: &ClassLocation) -> Option<FieldType> {
        let is_enum = self
            .scan
            .class_bases(location)
            .iter()
            .any(|base| matches!(base, ClassTarget::External(name) if name.ends_with("Enum")));
        if !is_enum {
            return None;
        }
        let parsed = self.file(&location.file).ok()?;
        let class = parsed.class(&location.class_name, Some(location.line))?;
        Some(FieldType::Enum {
            name: location.class_name.clone(),
            members: enum_members(class),
        })
    }

    /// The keyword arguments of the config built by `config_init`: `Config(a=1, ...)` returned
    /// directly or through a variable, with later `config.a = ...` assignments applied.
    fn config_init_kwargs(
        &self,
        location: &ClassLocation,
        fields: &[FieldSpec],
        notes: &mut Vec<String>,
    ) -> Result<Vec<(String, DefaultValue)>, ConfigError> {
        let parsed = self.file(&location.file)?;
        let Some(class) = parsed.class(&location.class_name, Some(location.line)) else {
            return Ok(Vec::new());
        };
        let Some(function) = class.body.iter().find_map(|stmt| match stmt {
            Stmt::FunctionDef(f) if f.name.as_str() == "config_init" => Some(f),
            _ => None,
        }) else {
            return Ok(Vec::new());
        };
        let mut returns = Vec::new();
        collect_returns(&function.body, &mut returns);
        let Some(returned) = returns.last() else {
            notes.push("config_init returns nothing rl can read".to_owned());
            return Ok(Vec::new());
        };
        let config_expr = match returned {
            Expr::Tuple(tuple) => tuple.elts.first(),
            other => Some(*other),
        };
        let (variable, call) = match config_expr {
            Some(Expr::Call(call)) => (None, Some(call)),
            Some(Expr::Name(name)) => (
                Some(name.id.as_str()),
                last_call_assigned(&function.body, name.id.as_str()),
            ),
            _ => (None, None),
        };
        let Some(call) = call else {
            notes.push(
                "config_init builds its config in a way rl does not read; its defaults are \
                 computed at run time"
                    .to_owned(),
            );
            return Ok(Vec::new());
        };
        let field_type = |name: &str| {
            fields
                .iter()
                .find(|f| f.name == name)
                .map(|f| &f.field_type)
        };
        let mut kwargs: Vec<(String, DefaultValue)> = Vec::new();
        let mut set = |name: &str, expr: &Expr| {
            let default = default_for(&parsed.text, expr, field_type(name));
            match kwargs.iter_mut().find(|(n, _)| n == name) {
                Some(existing) => existing.1 = default,
                None => kwargs.push((name.to_owned(), default)),
            }
        };
        for keyword in &call.arguments.keywords {
            if let Some(name) = &keyword.arg {
                set(name.as_str(), &keyword.value);
                continue;
            }
            // `**extra` where `extra = {"seed": 7}` in the function is still literal.
            let unpacked = match &keyword.value {
                Expr::Name(name) => last_assigned(&function.body, name.id.as_str()),
                other => Some(other),
            };
            match unpacked {
                Some(Expr::Dict(dict))
                    if dict
                        .items
                        .iter()
                        .all(|item| matches!(item.key, Some(Expr::StringLiteral(_)))) =>
                {
                    for item in &dict.items {
                        if let Some(Expr::StringLiteral(key)) = &item.key {
                            set(key.value.to_str(), &item.value);
                        }
                    }
                }
                _ => notes.push(format!(
                    "config_init passes **{}; fields it sets may differ from the defaults shown",
                    slice(&parsed.text, &keyword.value)
                )),
            }
        }
        if let Some(variable) = variable {
            for stmt in &function.body {
                let Stmt::Assign(assign) = stmt else { continue };
                for target in &assign.targets {
                    if let Expr::Attribute(attribute) = target
                        && matches!(attribute.value.as_ref(), Expr::Name(n) if n.id.as_str() == variable)
                    {
                        set(attribute.attr.as_str(), &assign.value);
                    }
                }
            }
        }
        Ok(kwargs)
    }
}

fn merge_fields(fields: &mut Vec<FieldSpec>, newer: Vec<FieldSpec>) {
    // Found by name through an index: a class may declare 100 000 fields, and a search of the
    // list for each of them took longer than any caller waits.
    let mut position: std::collections::HashMap<String, usize> =
        std::collections::HashMap::with_capacity(fields.len() + newer.len());
    for (index, field) in fields.iter().enumerate() {
        position.entry(field.name.clone()).or_insert(index);
    }
    for field in newer {
        if let Some(&index) = position.get(&field.name) {
            fields[index] = field;
        } else {
            position.insert(field.name.clone(), fields.len());
            fields.push(field);
        }
    }
}

fn own_fields(text: &str, class: &ast::StmtClassDef, context: &TypeContext<'_>) -> Vec<FieldSpec> {
    let mut fields = Vec::new();
    for (index, stmt) in class.body.iter().enumerate() {
        let Stmt::AnnAssign(assign) = stmt else {
            continue;
        };
        let Expr::Name(target) = assign.target.as_ref() else {
            continue;
        };
        let name = target.id.as_str();
        if name.starts_with('_') || name == "model_config" || is_class_var(&assign.annotation) {
            continue;
        }
        let field_type = field_type(text, &assign.annotation, context);
        let mut field = FieldSpec {
            name: name.to_owned(),
            type_text: slice(text, assign.annotation.as_ref()).to_owned(),
            class_default: DefaultValue::Required,
            env_default: None,
            description: None,
            constraints: Constraints::default(),
            declared_in: class.name.to_string(),
            field_type,
        };
        match assign.value.as_deref() {
            None => {}
            Some(Expr::Call(call)) if is_pydantic_field(&call.func) => {
                read_field_call(text, call, &mut field);
            }
            Some(value) => field.class_default = default_for(text, value, Some(&field.field_type)),
        }
        if field.description.is_none() {
            // An attribute docstring (the string right after the field), as pydantic's
            // `use_attribute_docstrings` and verifiers' configs document their fields.
            field.description = attribute_docstring(class.body.get(index + 1));
        }
        fields.push(field);
    }
    fields
}

fn attribute_docstring(next: Option<&Stmt>) -> Option<String> {
    let Some(Stmt::Expr(ast::StmtExpr { value, .. })) = next else {
        return None;
    };
    let Expr::StringLiteral(literal) = value.as_ref() else {
        return None;
    };
    let text = literal
        .value
        .to_str()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    (!text.is_empty()).then_some(text)
}

fn is_class_var(annotation: &Expr) -> bool {
    let base = match annotation {
        Expr::Subscript(subscript) => subscript.value.as_ref(),
        other => other,
    };
    dotted(base).is_some_and(|d| d.last().is_some_and(|last| last == "ClassVar"))
}

fn is_pydantic_field(func: &Expr) -> bool {
    dotted(func).is_some_and(|d| d.last().is_some_and(|last| last == "Field"))
}

/// `Field(default, *, default=…, default_factory=…, description=…, ge=…, …)`.
fn read_field_call(text: &str, call: &ast::ExprCall, field: &mut FieldSpec) {
    if let Some(first) = call.arguments.args.first() {
        field.class_default = field_default(text, first, &field.field_type);
    }
    for keyword in &call.arguments.keywords {
        let Some(arg) = &keyword.arg else { continue };
        let value = &keyword.value;
        match arg.as_str() {
            "default" => field.class_default = field_default(text, value, &field.field_type),
            "default_factory" => {
                field.class_default = match dotted(value).as_deref() {
                    Some([name]) if name == "list" => DefaultValue::Value {
                        value: Value::List(Vec::new()),
                    },
                    Some([name]) if name == "dict" => DefaultValue::Value {
                        value: Value::Map(std::collections::BTreeMap::new()),
                    },
                    _ => DefaultValue::Computed {
                        expression: format!("{}()", slice(text, value)),
                    },
                };
            }
            "description" => field.description = string_value(value),
            "ge" => field.constraints.ge = literal(value).and_then(|v| v.as_f64()),
            "gt" => field.constraints.gt = literal(value).and_then(|v| v.as_f64()),
            "le" => field.constraints.le = literal(value).and_then(|v| v.as_f64()),
            "lt" => field.constraints.lt = literal(value).and_then(|v| v.as_f64()),
            "min_length" => field.constraints.min_length = non_negative(value),
            "max_length" => field.constraints.max_length = non_negative(value),
            _ => {}
        }
    }
}

/// A class among the module-level statements (and their blocks), by name and, when given, by
/// the line discovery reported.
fn find_class<'m>(
    body: &'m [Stmt],
    text: &str,
    name: &str,
    line: Option<u32>,
) -> Option<&'m ast::StmtClassDef> {
    for stmt in body {
        let found = match stmt {
            Stmt::ClassDef(class) if class.name.as_str() == name => {
                let class_line = line_of(text, class.name.start().to_usize());
                line.is_none_or(|wanted| wanted == class_line)
                    .then_some(class)
            }
            Stmt::If(stmt_if) => find_class(&stmt_if.body, text, name, line).or_else(|| {
                stmt_if
                    .elif_else_clauses
                    .iter()
                    .find_map(|c| find_class(&c.body, text, name, line))
            }),
            Stmt::Try(stmt_try) => find_class(&stmt_try.body, text, name, line)
                .or_else(|| {
                    stmt_try.handlers.iter().find_map(|handler| {
                        let ast::ExceptHandler::ExceptHandler(handler) = handler;
                        find_class(&handler.body, text, name, line)
                    })
                })
                .or_else(|| find_class(&stmt_try.orelse, text, name, line))
                .or_else(|| find_class(&stmt_try.finalbody, text, name, line)),
            Stmt::With(with) => find_class(&with.body, text, name, line),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

fn line_of(text: &str, offset: usize) -> u32 {
    let offset = offset.min(text.len());
    1 + text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count() as u32
}

/// Where names in an annotation are looked up.
enum TypeContext<'a> {
    /// Classes of this one file (the built-in table, which cannot look itself up while built).
    Local(&'a ParsedFile),
    Scanned {
        reader: &'a Reader<'a>,
        file: String,
    },
}

impl TypeContext<'_> {
    fn enum_type(&self, reference: &[String]) -> Option<FieldType> {
        let name = reference.last()?;
        match self {
            TypeContext::Local(parsed) => local_enum(parsed, name),
            TypeContext::Scanned { reader, file } => {
                match reader.scan.resolve_reference(file, &reference.join("."))? {
                    ClassTarget::External(qualified) => {
                        let atroposlib =
                            qualified.starts_with("atroposlib.") || !qualified.contains('.');
                        atroposlib.then(|| builtin_enum(name)).flatten()
                    }
                    ClassTarget::Scanned(location) => reader.scanned_enum(&location),
                }
            }
        }
    }
}

fn builtin_enum(name: &str) -> Option<FieldType> {
    local_enum(&builtin().ok()?.parsed, name)
}

fn local_enum(parsed: &ParsedFile, name: &str) -> Option<FieldType> {
    let class = parsed.class(name, None)?;
    Some(FieldType::Enum {
        name: name.to_owned(),
        members: enum_members(class),
    })
}
fn field_type(text: &str, annotation: &Expr, context: &TypeContext<'_>) -> FieldType {
    let unknown = || FieldType::Unknown {
        annotation: slice(text, annotation).to_owned(),
    };
    match annotation {
        Expr::Name(_) | Expr::Attribute(_) => {
            let Some(path) = dotted(annotation) else {
                return unknown();
            };
            match path.last().map(String::as_str) {
                Some("int") => FieldType::Int,
                Some("float") => FieldType::Float,
                Some("bool") => FieldType::Bool,
                Some("str") => FieldType::Str,
                Some("Any") => FieldType::Any,
                Some("dict" | "Dict" | "Mapping") => FieldType::Map,
                Some("list" | "List" | "Sequence") => FieldType::List {
                    item: Box::new(FieldType::Any),
                },
                _ => context.enum_type(&path).unwrap_or_else(unknown),
            }
        }
        Expr::Subscript(subscript) => {
            let Some(container) = dotted(&subscript.value) else {
                return unknown();
            };
            let arguments: Vec<&Expr> = match subscript.slice.as_ref() {
                Expr::Tuple(tuple) => tuple.elts.iter().collect(),
                single => vec![single],
            };
            match container.last().map(String::as_str) {
                Some("Optional") => match arguments.as_slice() {
                    [inner] => FieldType::Optional {
                        inner: Box::new(field_type(text, inner, context)),
                    },
                    _ => unknown(),
                },
                Some("Union") => union(text, &arguments, context).unwrap_or_else(unknown),
                Some("List" | "list" | "Sequence" | "Set" | "set" | "FrozenSet") => {
                    match arguments.as_slice() {
                        [item] => FieldType::List {
                            item: Box::new(field_type(text, item, context)),
                        },
                        _ => unknown(),
                    }
                }
                Some("Tuple" | "tuple") => FieldType::List {
                    item: Box::new(FieldType::Any),
                },
                Some("Dict" | "dict" | "Mapping") => FieldType::Map,
                Some("Literal") => arguments
                    .iter()
                    .map(|a| literal(a))
                    .collect::<Option<Vec<_>>>()
                    .map_or_else(unknown, |values| FieldType::Literal { values }),
                Some("Annotated") => arguments
                    .first()
                    .map_or_else(unknown, |inner| field_type(text, inner, context)),
                _ => unknown(),
            }
        }
        Expr::BinOp(binop) if matches!(binop.op, ast::Operator::BitOr) => {
            let mut members = Vec::new();
            flatten_bitor(annotation, &mut members);
            union(text, &members, context).unwrap_or_else(unknown)
        }
        Expr::StringLiteral(forward) => {
            match rl_discovery::parse_python_expression(forward.value.to_str()) {
                Ok(expression) => field_type(forward.value.to_str(), &expression, context),
                Err(_) => unknown(),
            }
        }
        _ => unknown(),
    }
}

/// `A | B | C` as `[A, B, C]`, by a loop: a chain may be thousands of members long.
fn flatten_bitor<'e>(expr: &'e Expr, members: &mut Vec<&'e Expr>) {
    let mut pending = vec![expr];
    while let Some(expr) = pending.pop() {
        match expr {
            Expr::BinOp(binop) if matches!(binop.op, ast::Operator::BitOr) => {
                pending.push(&binop.right);
                pending.push(&binop.left);
            }
            other => members.push(other),
        }
    }
}

/// `X | None`, `Union[X, None]` → optional X; a single member → itself; wider unions are not
/// checked statically.
fn union(text: &str, members: &[&Expr], context: &TypeContext<'_>) -> Option<FieldType> {
    let is_none =
        |e: &&&Expr| matches!(e, Expr::NoneLiteral(_)) || dotted(e).is_some_and(|d| d == ["None"]);
    let others: Vec<&&Expr> = members.iter().filter(|e| !is_none(e)).collect();
    let has_none = others.len() < members.len();
    match (others.as_slice(), has_none) {
        ([single], true) => Some(FieldType::Optional {
            inner: Box::new(field_type(text, single, context)),
        }),
        ([single], false) => Some(field_type(text, single, context)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
