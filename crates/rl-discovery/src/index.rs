//! Questions about classes after a scan: where an environment's config class and `config_init`
//! live, and what a class's bases are. rl-config follows these to read config fields.

use std::collections::HashMap;

use crate::resolve::{Ancestor, ClassId, ParsedModule, Resolver};
use crate::summary::Dotted;
use crate::{Environment, Scan};

/// A class of the scan: its file (relative to the scan root), name and line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClassLocation {
    pub file: String,
    pub class_name: String,
    pub line: u32,
}

/// What a class reference denotes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassTarget {
    Scanned(ClassLocation),
    /// Outside the scan, by qualified name as imported (`atroposlib.envs.base.BaseEnvConfig`,
    /// `pydantic.BaseModel`), or a bare name nothing in its file binds.
    External(String),
}

/// Where an environment's facts came from, for the questions above.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Origin {
    /// `None` for a verifiers v0 environment: a function, not a class.
    pub class: Option<ClassId>,
    /// The module in which the config class is named, and the reference as written there.
    pub config_ref: Option<(usize, Dotted)>,
    /// The nearest class (itself or a scanned ancestor) that defines `config_init`.
    pub config_init_class: Option<ClassId>,
}

#[derive(Debug, Default)]
pub(crate) struct ScanIndex {
    modules: Vec<ParsedModule>,
    files: Vec<String>,
    by_file: HashMap<String, usize>,
}

impl ScanIndex {
    pub(crate) fn new(modules: Vec<ParsedModule>, files: Vec<String>) -> Self {
        let by_file = files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.clone(), i))
            .collect();
        Self {
            modules,
            files,
            by_file,
        }
    }

    fn location(&self, (module, class): ClassId) -> ClassLocation {
        let summary = &self.modules[module].summary.classes[class];
        ClassLocation {
            file: self.files[module].clone(),
            class_name: summary.name.clone(),
            line: summary.line,
        }
    }

    fn id_of(&self, location: &ClassLocation) -> Option<ClassId> {
        let module = *self.by_file.get(&location.file)?;
        let class = self.modules[module]
            .summary
            .classes
            .iter()
            .position(|c| c.name == location.class_name && c.line == location.line)?;
        Some((module, class))
    }

    fn target(&self, ancestor: Ancestor) -> ClassTarget {
        match ancestor {
            Ancestor::Scanned(id) => ClassTarget::Scanned(self.location(id)),
            Ancestor::External(name) => ClassTarget::External(name),
        }
    }
}

impl Scan {
    /// The class `env`'s config class reference denotes (the first candidate when branches
    /// disagree), or `None` when nothing names one and atroposlib's default applies.
    pub fn config_class_target(&self, env: &Environment) -> Option<ClassTarget> {
        let (module, reference) = env.origin.config_ref.as_ref()?;
        let resolver = Resolver::new(&self.index.modules);
        let first = resolver.resolve(*module, reference).into_iter().next()?;
        Some(self.index.target(first))
    }

    /// The class whose `config_init` runs for `env`: its own, or its nearest scanned ancestor's.
    pub fn config_init_location(&self, env: &Environment) -> Option<ClassLocation> {
        env.origin
            .config_init_class
            .map(|id| self.index.location(id))
    }

    /// The location of `env`'s own class statement (none for a verifiers v0 environment).
    pub fn class_location(&self, env: &Environment) -> Option<ClassLocation> {
        env.origin.class.map(|id| self.index.location(id))
    }

    /// The bases of a scanned class, resolved, in the order written.
    pub fn class_bases(&self, class: &ClassLocation) -> Vec<ClassTarget> {
        let Some(id) = self.index.id_of(class) else {
            return Vec::new();
        };
        let resolver = Resolver::new(&self.index.modules);
        resolver
            .bases(id)
            .into_iter()
            .map(|a| self.index.target(a))
            .collect()
    }

    /// What `reference` (dotted, e.g. `EvalHandlingEnum` or `enums.Mode`) written in `file`
    /// denotes: the first candidate.
    pub fn resolve_reference(&self, file: &str, reference: &str) -> Option<ClassTarget> {
        let module = *self.index.by_file.get(file)?;
        let dotted: Dotted = reference.split('.').map(str::to_owned).collect();
        let resolver = Resolver::new(&self.index.modules);
        let first = resolver.resolve(module, &dotted).into_iter().next()?;
        Some(self.index.target(first))
    }
}
