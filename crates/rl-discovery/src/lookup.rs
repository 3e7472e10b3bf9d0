//! Unique keys for environments and finding one by what a user typed.

use std::collections::BTreeMap;

use crate::{DiscoveryError, DuplicateName, Environment, Scan};

/// At most this many "did you mean" suggestions.
const MAX_SUGGESTIONS: usize = 3;

/// Gives every environment a unique key and returns the names used more than once.
pub(crate) fn assign_keys(environments: &mut [Environment]) -> Vec<DuplicateName> {
    let mut per_file: BTreeMap<(String, String), usize> = BTreeMap::new();
    for env in environments.iter() {
        *per_file
            .entry((env.name.clone(), env.file.clone()))
            .or_default() += 1;
    }
    for env in environments.iter_mut() {
        env.key = if per_file[&(env.name.clone(), env.file.clone())] > 1 {
            format!("{}@{}:{}", env.name, env.file, env.class_name)
        } else {
            format!("{}@{}", env.name, env.file)
        };
    }
    let mut by_name: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for env in environments.iter() {
        by_name.entry(&env.name).or_default().push(env.key.clone());
    }
    by_name
        .into_iter()
        .filter(|(_, keys)| keys.len() > 1)
        .map(|(name, keys)| DuplicateName {
            name: name.to_owned(),
            keys,
        })
        .collect()
}

impl Scan {
    /// The environment a user means by `query`: its key, else its name, else its class name,
    /// as long as that picks exactly one.
    pub fn find(&self, query: &str) -> Result<&Environment, DiscoveryError> {
        Ok(&self.environments[self.position(query)?])
    }

    /// Where in [`Scan::environments`] the environment [`Scan::find`] finds is.
    pub fn position(&self, query: &str) -> Result<usize, DiscoveryError> {
        let query = query.trim();
        if let Some(index) = self.environments.iter().position(|env| env.key == query) {
            return Ok(index);
        }
        for matches in [
            |env: &Environment, q: &str| env.name == q,
            |env: &Environment, q: &str| env.class_name == q,
        ] {
            let found: Vec<usize> = (0..self.environments.len())
                .filter(|&index| matches(&self.environments[index], query))
                .collect();
            match found.as_slice() {
                [single] => return Ok(*single),
                [] => {}
                several => {
                    return Err(DiscoveryError::AmbiguousEnvironment {
                        query: query.to_owned(),
                        candidates: several
                            .iter()
                            .map(|&index| self.environments[index].key.clone())
                            .collect(),
                    });
                }
            }
        }
        Err(DiscoveryError::UnknownEnvironment {
            query: brief(query),
            suggestions: self.closest_names(query),
        })
    }

    fn closest_names(&self, query: &str) -> Vec<String> {
        let query = query.to_lowercase();
        let mut scored: Vec<(f64, &str)> = self
            .environments
            .iter()
            .map(|env| {
                let name = env.name.to_lowercase();
                let similarity = strsim::jaro_winkler(&query, &name);
                let contains =
                    !query.is_empty() && (name.contains(&query) || query.contains(&name));
                (
                    if contains {
                        similarity.max(0.9)
                    } else {
                        similarity
                    },
                    env.name.as_str(),
                )
            })
            .filter(|(similarity, _)| *similarity >= 0.75)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        let mut names: Vec<String> = Vec::new();
        for (_, name) in scored {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_owned());
            }
            if names.len() == MAX_SUGGESTIONS {
                break;
            }
        }
        names
    }
}

/// A name from outside as an error repeats it: its start only when it is long (a huge one would
/// be echoed whole to the caller).
fn brief(query: &str) -> String {
    const SHOWN_CHARS: usize = 80;
    if query.chars().count() <= SHOWN_CHARS {
        return query.to_owned();
    }
    let start: String = query.chars().take(SHOWN_CHARS).collect();
    format!("{start}…")
}
