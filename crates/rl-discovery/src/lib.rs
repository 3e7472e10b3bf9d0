//! Finds Atropos RL environments — Python classes deriving, directly or not, from atroposlib's
//! `BaseEnv` — in a folder of `.py` files, by parsing them. No environment code is ever run.
//!
//! ```ignore
#![doc = include_str!("../examples/scan.rs")]
//! ```

mod dependencies;
mod error;
mod index;
mod known;
mod lookup;
mod module_names;
mod nesting;
mod package;
mod parse;
mod resolve;
mod source;
mod summary;
mod verifiers;
mod walk;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

pub use dependencies::{ExternalImports, external_imports};
pub use error::DiscoveryError;
pub use index::{ClassLocation, ClassTarget};
pub use known::KNOWN_ENV_BASES;
pub use module_names::{RUNTIME_DEPENDENCIES, STANDARD_LIBRARY_MODULES, Shadowed, shadowed_module};
pub use nesting::Nesting;
pub use package::{PackageModule, package_module};
pub use parse::{parse_python_expression, parse_python_module};
pub use rl_settings::EnvironmentKind;
pub use source::{MAX_SOURCE_BYTES, read_python_source};
pub use summary::dotted as dotted_name;
pub use verifiers::{Project, entry_module, run_module};

use resolve::{Ancestor, ParsedModule, Resolver};

/// How to scan. The default matches the original tool: the top level of the folder only.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Descend into sub-folders (hidden folders and `__pycache__` are never entered).
    pub recursive: bool,
    /// Files larger than this are reported as skipped instead of parsed.
    pub max_file_bytes: u64,
}

impl Default for ScanOptions {
    fn default() -> Self {
        Self {
            recursive: false,
            max_file_bytes: MAX_SOURCE_BYTES,
        }
    }
}

/// The outcome of scanning one folder.
#[derive(Clone)]
pub struct Scan {
    /// The scanned folder, canonicalised. Every `file` below is relative to it.
    pub root: PathBuf,
    pub recursive: bool,
    /// `.py` files read, including those only used to follow imports (names starting with `_`).
    pub files_scanned: usize,
    /// Sorted by name, then file, then line.
    pub environments: Vec<Environment>,
    /// Files that could not be read or parsed, with the reason; they never abort a scan.
    pub skipped: Vec<SkippedFile>,
    /// Files that endanger the environments beside them, or hold classes rl did not follow.
    pub warnings: Vec<FileWarning>,
    /// Names that more than one environment uses; select those by `key`.
    pub duplicate_names: Vec<DuplicateName>,
    /// What was parsed, kept (without syntax trees) to answer questions about classes later.
    index: Arc<index::ScanIndex>,
}

#[derive(Clone, PartialEq, Eq)]
pub struct Environment {
    /// The `name` class attribute, else the file stem.
    pub name: String,
    pub name_source: NameSource,
    /// Unique in the scan: `name@relative/path.py`, plus `:ClassName` where a file holds two
    /// environments of the same name.
    pub key: String,
    pub class_name: String,
    /// Path relative to [`Scan::root`], with `/` separators.
    pub file: String,
    /// Line of the `class` statement, 1-based.
    pub line: u32,
    /// First non-empty line of the class docstring, else a generic sentence.
    pub description: String,
    pub has_docstring: bool,
    pub config_class: String,
    pub config_class_source: ConfigClassSource,
    /// `config_init` is defined by the class or by a scanned ancestor.
    pub has_config_init: bool,
    /// The file starts this class with `Class.cli()` under `if __name__ == "__main__":`.
    pub runnable: bool,
    /// Ancestors up to the atroposlib base reached: scanned classes as `Class (file:line)`,
    /// atroposlib's own by qualified name.
    pub bases: Vec<String>,
    /// Which API it is written against.
    pub kind: EnvironmentKind,
    /// The verifiers package (its `pyproject.toml`) holding it, if any.
    pub project: Option<Project>,
    origin: index::Origin,
}

/// What was read, without the index kept for later questions.
impl std::fmt::Debug for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan")
            .field("root", &self.root)
            .field("recursive", &self.recursive)
            .field("files_scanned", &self.files_scanned)
            .field("environments", &self.environments)
            .field("skipped", &self.skipped)
            .field("warnings", &self.warnings)
            .field("duplicate_names", &self.duplicate_names)
            .finish_non_exhaustive()
    }
}

/// What was read, without the index's ids (which change with the scan's order).
impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Environment")
            .field("name", &self.name)
            .field("name_source", &self.name_source)
            .field("key", &self.key)
            .field("class_name", &self.class_name)
            .field("file", &self.file)
            .field("line", &self.line)
            .field("description", &self.description)
            .field("has_docstring", &self.has_docstring)
            .field("config_class", &self.config_class)
            .field("config_class_source", &self.config_class_source)
            .field("has_config_init", &self.has_config_init)
            .field("runnable", &self.runnable)
            .field("bases", &self.bases)
            .field("kind", &self.kind)
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

impl Environment {
    pub fn path_in(&self, root: &Path) -> PathBuf {
        root.join(&self.file)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameSource {
    Attribute,
    FileStem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigClassSource {
    /// `env_config_cls = X` in the class body.
    EnvConfigCls,
    /// The first element of `config_init`'s `Tuple[X, ...]` return annotation.
    ConfigInitAnnotation,
    /// Taken from an ancestor environment.
    Inherited { from: String },
    /// The second argument of `vf.Taskset[Task, Config]` (a verifiers v1 taskset).
    TasksetArgument,
    /// Nothing says otherwise: atroposlib's `BaseEnvConfig` (or the known base's own config).
    Default,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    pub file: String,
    pub reason: SkipReason,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkipReason {
    #[error("syntax error at line {line}, column {column}: {message}")]
    SyntaxError {
        line: u32,
        column: u32,
        message: String,
    },
    #[error("cannot decode as {encoding}: {detail}")]
    Undecodable { encoding: String, detail: String },
    #[error("declares an encoding Python or rl does not know: '{label}'")]
    UnknownEncoding { label: String },
    /// Refused from its tokens, before parsing: a syntax tree this deep cannot be handled.
    #[error("{}", nesting.describe(*line))]
    TooDeeplyNested {
        nesting: Nesting,
        line: u32,
        limit: u32,
    },
    #[error("binary file (contains NUL bytes), not Python source")]
    Binary,
    #[error("its name is not valid UTF-8, so rl cannot name it to Python or to you; rename it")]
    NameNotUtf8,
    #[error("a {file_type}, not a regular file: not read")]
    NotAFile { file_type: String },
    #[error("{bytes} bytes, over the limit of {limit} bytes")]
    TooLarge { bytes: u64, limit: u64 },
    #[error("symbolic link loop (points back to {ancestor})")]
    SymlinkLoop { ancestor: String },
    #[error("cannot read: {message}")]
    Unreadable { message: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWarning {
    pub file: String,
    pub warning: Warning,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Warning {
    #[error(
        "shadows {shadowed} `{module}`: a run started from this folder imports this file for \
         every `import {module}`, atroposlib's included, and fails; rename it"
    )]
    ShadowsModule { module: String, shadowed: Shadowed },
    #[error(
        "class {class} is more than {limit} classes away from BaseEnv; rl follows inheritance no \
         deeper, so it and the classes deriving from it are not listed"
    )]
    InheritanceTooDeep { class: String, limit: usize },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateName {
    pub name: String,
    pub keys: Vec<String>,
}

/// Scans `root` for environments. Fails only when `root` itself is unusable; every problem with
/// a single file is reported in [`Scan::skipped`].
pub fn scan(root: &Path, options: &ScanOptions) -> Result<Scan, DiscoveryError> {
    let root = walk::check_root(root)?;
    let listing = walk::python_files(&root, options.recursive);
    let parsed: Vec<Result<ParsedModule, SkipReason>> = listing
        .files
        .par_iter()
        .map(|file| read_and_summarize(&root, file, options.max_file_bytes))
        .collect();

    let mut skipped = listing.skipped;
    let mut modules = Vec::with_capacity(parsed.len());
    let mut module_files = Vec::with_capacity(parsed.len());
    for (file, outcome) in listing.files.iter().zip(parsed) {
        match outcome {
            Ok(module) => {
                modules.push(module);
                module_files.push(file.as_str());
            }
            Err(reason) => skipped.push(SkippedFile {
                file: file.clone(),
                reason,
            }),
        }
    }
    skipped.sort_by(|a, b| a.file.cmp(&b.file));

    let mut warnings = Vec::new();
    let mut environments =
        collect_environments(&modules, &module_files, &listing.projects, &mut warnings);
    let run_folders: BTreeSet<&str> = environments
        .iter()
        .map(|env| folder_of(&env.file))
        .chain(std::iter::once(""))
        .collect();
    warnings.extend(
        listing
            .files
            .iter()
            .filter_map(|file| shadowing_warning(file, &run_folders)),
    );
    warnings.sort_by(|a, b| a.file.cmp(&b.file));
    let index = Arc::new(index::ScanIndex::new(
        modules,
        module_files.iter().map(|file| (*file).to_owned()).collect(),
    ));
    environments.sort_by(|a, b| (&a.name, &a.file, a.line).cmp(&(&b.name, &b.file, b.line)));
    let duplicate_names = lookup::assign_keys(&mut environments);

    Ok(Scan {
        root,
        recursive: options.recursive,
        files_scanned: listing.files.len(),
        environments,
        skipped,
        warnings,
        duplicate_names,
        index,
    })
}

/// A file whose module name (its stem, or its package's folder for `__init__.py`) is one a
/// run imports, in a folder that runs start from: the scan's root, or one holding an
/// environment. (`pkg/typing.py` in a package no environment runs from is `pkg.typing`.)
fn shadowing_warning(file: &str, run_folders: &BTreeSet<&str>) -> Option<FileWarning> {
    let module_path = file.trim_end_matches(".py");
    let module_path = module_path.strip_suffix("/__init__").unwrap_or(module_path);
    let module = module_path.rsplit('/').next()?;
    if module == "__init__" || !run_folders.contains(folder_of(module_path)) {
        return None;
    }
    let shadowed = shadowed_module(module)?;
    Some(FileWarning {
        file: file.to_owned(),
        warning: Warning::ShadowsModule {
            module: module.to_owned(),
            shadowed,
        },
    })
}

fn read_and_summarize(root: &Path, file: &str, limit: u64) -> Result<ParsedModule, SkipReason> {
    let bytes = source::read_source_bytes(&root.join(file), limit)?;
    let text = source::decode(&bytes)?;
    let summary = summary::summarize(&text)?;
    let mut module_path: Vec<String> = file
        .trim_end_matches(".py")
        .split('/')
        .map(str::to_owned)
        .collect();
    let is_package = module_path.last().is_some_and(|last| last == "__init__");
    if is_package {
        module_path.pop();
    }
    Ok(ParsedModule {
        module_path,
        is_package,
        summary,
    })
}

/// `a/b/c.py` → `a/b`; a top-level file → `` (the root).
fn folder_of(file: &str) -> &str {
    file.rsplit_once('/').map_or("", |(folder, _)| folder)
}

/// Files whose name starts with `_` are read so imports through them resolve, but what they
/// define is not listed: by convention they are private helpers, as the original tool assumed.
fn is_listed(file: &str) -> bool {
    !file.rsplit('/').next().unwrap_or(file).starts_with('_')
}

/// A package's `__init__.py` is where a verifiers environment may live, never an Atropos one
/// (the original tool's rule for files starting with `_`).
fn is_package_init(file: &str) -> bool {
    file.rsplit('/').next() == Some("__init__.py")
}

fn collect_environments(
    modules: &[ParsedModule],
    files: &[&str],
    projects: &BTreeMap<String, Project>,
    warnings: &mut Vec<FileWarning>,
) -> Vec<Environment> {
    let mut resolver = Resolver::new(modules);
    let mut environments = Vec::new();
    for (module_index, module) in modules.iter().enumerate() {
        let file = files[module_index];
        let listed = is_listed(file);
        if !listed && !is_package_init(file) {
            continue;
        }
        let project = verifiers::project_of(projects, file);
        if verifiers::is_legacy_environment(&module.summary) {
            environments.push(describe_legacy(module, file, project));
        }
        // A class defined twice in one file (try/except fallbacks) is one environment: the
        // first definition, which is the one that runs when its imports succeed.
        let mut first_definition: BTreeMap<&str, usize> = BTreeMap::new();
        let mut warned = false;
        for (class_index, class) in module.summary.classes.iter().enumerate() {
            let ancestry = match resolver.env_ancestry((module_index, class_index)) {
                Ok(Some(ancestry)) => ancestry,
                Ok(None) => continue,
                Err(resolve::TooDeep) => {
                    // Once per file: the classes after it are as deep or deeper.
                    if !std::mem::replace(&mut warned, true) {
                        warnings.push(FileWarning {
                            file: files[module_index].to_owned(),
                            warning: Warning::InheritanceTooDeep {
                                class: class.name.clone(),
                                limit: resolve::MAX_INHERITANCE_DEPTH,
                            },
                        });
                    }
                    continue;
                }
            };
            if first_definition.insert(&class.name, class_index).is_some() {
                continue;
            }
            let env = describe(
                modules,
                files,
                (module_index, class_index),
                &ancestry,
                project,
            );
            if listed || env.kind != EnvironmentKind::Atropos {
                environments.push(env);
            }
        }
    }
    environments
}

/// A verifiers v0 environment: its module's `load_environment`, whose keyword arguments are
/// its settings.
fn describe_legacy(module: &ParsedModule, file: &str, project: Option<&Project>) -> Environment {
    let summary = &module.summary;
    Environment {
        name: verifiers_name(project, file),
        name_source: NameSource::FileStem,
        key: String::new(),
        class_name: LOAD_ENVIRONMENT.to_owned(),
        file: file.to_owned(),
        line: summary.load_environment.unwrap_or(1),
        description: summary
            .docstring_first_line
            .clone()
            .or_else(|| project.and_then(|p| p.description.clone()))
            .unwrap_or_else(|| format!("verifiers environment from {file}")),
        has_docstring: summary.docstring_first_line.is_some(),
        config_class: LOAD_ENVIRONMENT.to_owned(),
        config_class_source: ConfigClassSource::Default,
        has_config_init: false,
        runnable: true,
        bases: Vec::new(),
        kind: EnvironmentKind::VerifiersV0,
        project: project.cloned(),
        origin: index::Origin::default(),
    }
}

/// What a v0 environment's `class_name` and `config_class` say: its settings are that
/// function's keyword arguments.
pub const LOAD_ENVIRONMENT: &str = "load_environment";

/// A verifiers environment is called by its package's name (`[project] name`), else by its
/// module's (the file's stem, or its package's folder for `__init__.py`).
fn verifiers_name(project: Option<&Project>, file: &str) -> String {
    if let Some(project) = project {
        return project.name.clone();
    }
    let module = file.trim_end_matches(".py");
    let module = module.strip_suffix("/__init__").unwrap_or(module);
    module.rsplit('/').next().unwrap_or(module).to_owned()
}

/// A v1 taskset is named for its package (`pkg/taskset.py` → `pkg`) when no project names it.
fn package_folder(file: &str) -> Option<&str> {
    file.rsplit_once('/').map(|(folder, _)| folder)
}

/// A v1 taskset's config class: the second argument of the `Taskset[Task, Config]` it
/// subscripts.
fn taskset_config_argument(class: &summary::ClassSummary) -> Option<summary::Dotted> {
    class
        .bases
        .iter()
        .zip(&class.base_arguments)
        .find(|(base, arguments)| {
            base.last().is_some_and(|b| b == "Taskset") && arguments.len() >= 2
        })
        .map(|(_, arguments)| arguments[1].clone())
}

fn describe(
    modules: &[ParsedModule],
    files: &[&str],
    (module_index, class_index): resolve::ClassId,
    ancestry: &[Ancestor],
    project: Option<&Project>,
) -> Environment {
    let file = files[module_index];
    let module = &modules[module_index];
    let class = &module.summary.classes[class_index];
    let stem = file
        .rsplit('/')
        .next()
        .unwrap_or(file)
        .trim_end_matches(".py");
    // The class itself, then its scanned ancestors nearest first: Python's lookup order for
    // `env_config_cls` and `config_init` along a single-inheritance chain.
    let chain = || {
        std::iter::once((module_index, class_index)).chain(ancestry.iter().filter_map(
            |a| match a {
                Ancestor::Scanned(id) => Some(*id),
                Ancestor::External(_) => None,
            },
        ))
    };
    let kind = ancestry
        .last()
        .and_then(|root| match root {
            Ancestor::External(name) => known::known_base(name).map(|base| base.kind),
            Ancestor::Scanned(_) => None,
        })
        .unwrap_or_default();
    // Where the config class is named: atroposlib's `env_config_cls` or `config_init`'s
    // annotation; a taskset's `Taskset[Task, Config]`.
    let declares_config = chain().find_map(|(m, c)| {
        let declaring = &modules[m].summary.classes[c];
        let reference = match kind {
            EnvironmentKind::VerifiersV1 => taskset_config_argument(declaring),
            _ => declaring
                .env_config_cls
                .clone()
                .or_else(|| declaring.config_init_returns.clone()),
        }?;
        Some(((m, c), declaring, reference))
    });
    let config_init_class = chain().find(|&(m, c)| modules[m].summary.classes[c].has_config_init);

    let (config_class, config_class_source) = match &declares_config {
        Some((id, _, reference)) if *id == (module_index, class_index) => {
            let source = if kind == EnvironmentKind::VerifiersV1 {
                ConfigClassSource::TasksetArgument
            } else if class.env_config_cls.is_some() {
                ConfigClassSource::EnvConfigCls
            } else {
                ConfigClassSource::ConfigInitAnnotation
            };
            (reference.join("."), source)
        }
        Some((_, declaring, reference)) => (
            reference.join("."),
            ConfigClassSource::Inherited {
                from: declaring.name.clone(),
            },
        ),
        None => {
            let known_config = ancestry.last().and_then(|root| match root {
                Ancestor::External(name) => known::config_class_of(name),
                Ancestor::Scanned(_) => None,
            });
            (
                known_config.unwrap_or("BaseEnvConfig").to_owned(),
                ConfigClassSource::Default,
            )
        }
    };
    let config_ref = declares_config.map(|((m, _), _, reference)| (m, reference));

    let bases = ancestry
        .iter()
        .map(|ancestor| match ancestor {
            Ancestor::Scanned((m, c)) => {
                let base = &modules[*m].summary.classes[*c];
                format!("{} ({}:{})", base.name, files[*m], base.line)
            }
            Ancestor::External(name) => name.clone(),
        })
        .collect();

    let verifiers = kind != EnvironmentKind::Atropos;
    Environment {
        name: match (&class.name_attribute, verifiers) {
            (_, true) => verifiers_name(project, package_folder(file).unwrap_or(file)),
            (Some(name), false) => name.clone(),
            (None, false) => stem.to_owned(),
        },
        name_source: if class.name_attribute.is_some() && !verifiers {
            NameSource::Attribute
        } else {
            NameSource::FileStem
        },
        key: String::new(),
        class_name: class.name.clone(),
        file: file.to_owned(),
        line: class.line,
        description: class
            .docstring_first_line
            .clone()
            .or_else(|| {
                project
                    .filter(|_| verifiers)
                    .and_then(|p| p.description.clone())
            })
            .unwrap_or_else(|| format!("{} from {}", class.name, file)),
        has_docstring: class.docstring_first_line.is_some(),
        config_class,
        config_class_source,
        has_config_init: config_init_class.is_some(),
        // A taskset runs through rl_verifiers, never as a script.
        runnable: verifiers || module.summary.cli_classes.contains(&class.name),
        bases,
        kind,
        project: project.filter(|_| verifiers).cloned(),
        origin: index::Origin {
            class: Some((module_index, class_index)),
            config_ref,
            config_init_class,
        },
    }
}
