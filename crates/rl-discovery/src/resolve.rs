//! Which classes derive from `BaseEnv`, following bases through local classes, import aliases,
//! module imports, relative imports and other scanned files.

use std::collections::HashMap;

use crate::known::{is_known_env_base, qualified_known_base};
use crate::summary::{BindingTarget, Dotted, ModuleSummary};

/// A scanned file, as the resolver sees it.
#[derive(Debug)]
pub(crate) struct ParsedModule {
    /// Dotted module path relative to the scan root: `nested/deep/x.py` → `nested.deep.x`.
    pub module_path: Dotted,
    /// `true` for `__init__.py`, whose relative imports are relative to itself.
    pub is_package: bool,
    pub summary: ModuleSummary,
}

/// A class in the scan: (module index, class index).
pub(crate) type ClassId = (usize, usize);

/// What a class reference denotes: a class of the scan, or a class outside it by qualified
/// name (atroposlib's own, or a bare name nobody in the file binds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ancestor {
    Scanned(ClassId),
    External(String),
}

impl Ancestor {
    fn is_known_env_base(&self) -> bool {
        match self {
            Ancestor::External(qualified) => {
                let (module, name) = match qualified.rsplit_once('.') {
                    Some((module, name)) => (Some(module), name),
                    None => (None, qualified.as_str()),
                };
                is_known_env_base(module, name)
            }
            Ancestor::Scanned(_) => false,
        }
    }
}

#[derive(Clone)]
enum Visit {
    InProgress,
    Done(Lineage),
}

/// Where a class's bases lead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lineage {
    /// The parent on the way to `BaseEnv`, and how many classes away `BaseEnv` is (1: a
    /// direct subclass).
    Environment {
        parent: Ancestor,
        distance: usize,
    },
    NotAnEnvironment,
    /// More than [`MAX_INHERITANCE_DEPTH`] classes from `BaseEnv`, or found in a chain that
    /// long: not followed, so that a file of 100 000 classes each deriving from the one
    /// before cannot exhaust the stack, or the memory with their ancestries.
    TooDeep,
}

/// Real environments are one to four classes from `BaseEnv`.
pub(crate) const MAX_INHERITANCE_DEPTH: usize = 64;

/// A class further from `BaseEnv` than [`MAX_INHERITANCE_DEPTH`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooDeep;

/// Bindings looked at to resolve one reference: a name bound 20 000 times, or bound twice in
/// each of 30 files importing one another, would otherwise cost minutes (real references take
/// a handful).
const MAX_RESOLUTION_STEPS: usize = 128;

/// Guards against pathological re-export chains; real trees need three or four hops.
const MAX_IMPORT_HOPS: usize = 32;

pub(crate) struct Resolver<'a> {
    modules: &'a [ParsedModule],
    /// Last module path component → modules ending with it, for import lookups.
    by_last_component: HashMap<&'a str, Vec<usize>>,
    visits: HashMap<ClassId, Visit>,
}

impl<'a> Resolver<'a> {
    pub(crate) fn new(modules: &'a [ParsedModule]) -> Self {
        let mut by_last_component: HashMap<&str, Vec<usize>> = HashMap::new();
        for (index, module) in modules.iter().enumerate() {
            if let Some(last) = module.module_path.last() {
                by_last_component
                    .entry(last.as_str())
                    .or_default()
                    .push(index);
            }
        }
        Self {
            modules,
            by_last_component,
            visits: HashMap::new(),
        }
    }

    /// The ancestry of a class up to and including the `BaseEnv` it reaches; `Ok(None)` when it
    /// is not an environment, `Err` when it is further from `BaseEnv` than rl follows.
    pub(crate) fn env_ancestry(
        &mut self,
        class: ClassId,
    ) -> Result<Option<Vec<Ancestor>>, TooDeep> {
        let mut chain = Vec::new();
        let mut current = class;
        loop {
            match self.parent_env(current, 0) {
                Lineage::Environment { parent, .. } => {
                    chain.push(parent.clone());
                    match parent {
                        Ancestor::External(_) => return Ok(Some(chain)),
                        Ancestor::Scanned(id) => current = id,
                    }
                }
                Lineage::NotAnEnvironment => return Ok(None),
                Lineage::TooDeep => return Err(TooDeep),
            }
        }
    }

    /// Every class a base list of `class` may denote, in order, unresolved bases left out.
    pub(crate) fn bases(&self, class: ClassId) -> Vec<Ancestor> {
        let (module, index) = class;
        let summary = &self.modules[module].summary.classes[index];
        summary
            .bases
            .iter()
            .flat_map(|base| {
                let mut steps = MAX_RESOLUTION_STEPS;
                self.resolve_in_module(module, base, Some(summary.offset), 0, &mut steps)
            })
            .collect()
    }

    /// What `reference`, written in `module`, may denote (all bindings considered).
    pub(crate) fn resolve(&self, module: usize, reference: &[String]) -> Vec<Ancestor> {
        let mut steps = MAX_RESOLUTION_STEPS;
        self.resolve_in_module(module, reference, None, 0, &mut steps)
    }

    /// The first base of `class` that leads to `BaseEnv`; `depth` counts the classes below it
    /// whose lineage is being worked out.
    fn parent_env(&mut self, class: ClassId, depth: usize) -> Lineage {
        match self.visits.get(&class) {
            Some(Visit::Done(lineage)) => return lineage.clone(),
            // A cycle (`class A(B)` / `class B(A)` across files) cannot reach BaseEnv.
            Some(Visit::InProgress) => return Lineage::NotAnEnvironment,
            None => {}
        }
        if depth > MAX_INHERITANCE_DEPTH {
            // Not remembered: from a class nearer the end of the chain, this one may be near.
            return Lineage::TooDeep;
        }
        self.visits.insert(class, Visit::InProgress);
        let (module, index) = class;
        let summary = &self.modules[module].summary.classes[index];
        let mut lineage = Lineage::NotAnEnvironment;
        let mut cut_short = false;
        'bases: for base in &summary.bases {
            let mut steps = MAX_RESOLUTION_STEPS;
            let candidates =
                self.resolve_in_module(module, base, Some(summary.offset), 0, &mut steps);
            for candidate in candidates {
                let distance = match &candidate {
                    Ancestor::External(_) => candidate.is_known_env_base().then_some(1),
                    Ancestor::Scanned(id) => match self.parent_env(*id, depth + 1) {
                        Lineage::Environment { distance, .. } => Some(distance + 1),
                        Lineage::NotAnEnvironment => None,
                        Lineage::TooDeep => {
                            cut_short = true;
                            break 'bases;
                        }
                    },
                };
                if let Some(distance) = distance {
                    lineage = if distance > MAX_INHERITANCE_DEPTH {
                        Lineage::TooDeep
                    } else {
                        Lineage::Environment {
                            parent: candidate,
                            distance,
                        }
                    };
                    break 'bases;
                }
            }
        }
        if cut_short {
            self.visits.remove(&class);
            return Lineage::TooDeep;
        }
        self.visits.insert(class, Visit::Done(lineage.clone()));
        lineage
    }

    /// What a dotted reference used in `module` may denote: every class it could be, given all
    /// bindings of its first part (made before `before`, when given).
    fn resolve_in_module(
        &self,
        module: usize,
        reference: &[String],
        before: Option<u32>,
        hops: usize,
        steps: &mut usize,
    ) -> Vec<Ancestor> {
        let Some((head, rest)) = reference.split_first() else {
            return Vec::new();
        };
        if hops > MAX_IMPORT_HOPS {
            return Vec::new();
        }
        let bindings = self.modules[module].summary.bindings.get(head.as_str());
        let visible = bindings
            .into_iter()
            .flatten()
            .filter(|binding| before.is_none_or(|limit| binding.offset < limit));
        let mut found = Vec::new();
        let mut bound = false;
        for binding in visible {
            bound = true;
            if *steps == 0 {
                break;
            }
            *steps -= 1;
            match &binding.target {
                BindingTarget::Class(index) if rest.is_empty() => {
                    found.push(Ancestor::Scanned((module, *index)));
                }
                BindingTarget::Class(_) => {}
                BindingTarget::ImportedName {
                    level,
                    module: from,
                    name,
                } => {
                    let absolute = self.absolute_module(module, *level, from);
                    let mut path = absolute;
                    path.push(name.clone());
                    path.extend(rest.iter().cloned());
                    found.extend(self.resolve_qualified(&path, hops + 1, steps));
                }
                BindingTarget::ImportedModule { module: imported } => {
                    let mut path = imported.clone();
                    path.extend(rest.iter().cloned());
                    found.extend(self.resolve_qualified(&path, hops + 1, steps));
                }
            }
        }
        // A bare name nobody binds comes from a star import or a builtin. Known atroposlib
        // bases are taken at their word, as the original tool did.
        if !bound && rest.is_empty() {
            found.push(match qualified_known_base(head) {
                Some(qualified) => Ancestor::External(qualified),
                None => Ancestor::External(head.clone()),
            });
        }
        found
    }

    /// A fully qualified `package.module.Name[.Inner…]`: the longest module prefix that is a
    /// scanned file, then the name inside it; otherwise a class outside the scan. atroposlib's
    /// environment bases are reported under their canonical module, whatever re-export was used.
    fn resolve_qualified(&self, path: &[String], hops: usize, steps: &mut usize) -> Vec<Ancestor> {
        let Some((name, module_path)) = path.split_last() else {
            return Vec::new();
        };
        if module_path
            .first()
            .is_some_and(|first| crate::known::is_known_package(first))
        {
            let module = module_path.join(".");
            let canonical = is_known_env_base(Some(&module), name)
                .then(|| qualified_known_base(name))
                .flatten();
            return vec![Ancestor::External(
                canonical.unwrap_or_else(|| path.join(".")),
            )];
        }
        for split in (1..path.len()).rev() {
            let (module_part, inside) = path.split_at(split);
            if let Some(target) = self.find_module(module_part) {
                return self.resolve_in_module(target, inside, None, hops, steps);
            }
        }
        vec![Ancestor::External(path.join("."))]
    }

    /// The scanned module an import names. Scan roots rarely coincide with the Python path, so
    /// an import matches a file when one dotted path is a suffix of the other; the longest
    /// overlap wins, then the shortest file path.
    fn find_module(&self, imported: &[String]) -> Option<usize> {
        let last = imported.last()?;
        let candidates = self.by_last_component.get(last.as_str())?;
        candidates
            .iter()
            .copied()
            .filter_map(|index| {
                let file = &self.modules[index].module_path;
                let overlap = common_suffix_len(file, imported);
                (overlap == file.len() || overlap == imported.len()).then_some((
                    overlap,
                    std::cmp::Reverse(file.len()),
                    index,
                ))
            })
            .max()
            .map(|(_, _, index)| index)
    }

    fn absolute_module(&self, module: usize, level: u32, from: &[String]) -> Dotted {
        if level == 0 {
            return from.to_vec();
        }
        let this = &self.modules[module];
        let mut package = this.module_path.clone();
        if !this.is_package {
            package.pop();
        }
        for _ in 1..level {
            package.pop();
        }
        package.extend(from.iter().cloned());
        package
    }
}

fn common_suffix_len(a: &[String], b: &[String]) -> usize {
    a.iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}
