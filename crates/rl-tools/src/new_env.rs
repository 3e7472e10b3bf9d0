//! `rl envs new NAME`: a new environment from our template — a `BaseEnv` subclass with its own
//! config class, a JSON-lines dataset beside it, prompts, scoring, and the `cli()` entry point —
//! written next to the others, never over an existing file.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::ToolsError;

const TEMPLATE: &str = include_str!("templates/environment.py");
/// Questions the fixture models (and any model) can answer, so the new environment runs as is.
const SAMPLE_DATASET: &str = include_str!("templates/environment.jsonl");

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewEnvironment {
    pub name: String,
    pub class_name: String,
    pub file: PathBuf,
    pub dataset: PathBuf,
}

/// Writes `<dir>/<name>.py` and `<dir>/<name>.jsonl`; refuses a bad name or an existing file
/// (nothing is written then).
pub fn new_environment(dir: &Path, name: &str) -> Result<NewEnvironment, ToolsError> {
    check_name(name)?;
    if !dir.is_dir() {
        return Err(ToolsError::Invalid {
            what: "environments folder".to_owned(),
            reason: format!(
                "{} is not a folder; set --root or --envs-dir to the folder environments live in",
                dir.display()
            ),
        });
    }
    let class_name = class_name(name);
    let file = dir.join(format!("{name}.py"));
    let dataset = dir.join(format!("{name}.jsonl"));
    for path in [&file, &dataset] {
        if path.exists() {
            return Err(ToolsError::Exists { path: path.clone() });
        }
    }
    let source = TEMPLATE
        .replace("__CLASS__", &class_name)
        .replace("__NAME__", name);
    write_new(&dataset, SAMPLE_DATASET)?;
    if let Err(error) = write_new(&file, &source) {
        // Both or neither: a dataset without its environment is clutter.
        let _ = std::fs::remove_file(&dataset);
        return Err(error);
    }
    Ok(NewEnvironment {
        name: name.to_owned(),
        class_name,
        file,
        dataset,
    })
}

/// Python's keywords that a lowercase identifier can spell: no module can be named so.
const KEYWORDS: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
    "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
    "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
];

/// A Python module name that is also a good environment name: lowercase, digits, underscores,
/// not a keyword, and not the name of a module runs import (`json.py` would be imported by
/// every `import json` of every environment in the folder).
fn check_name(name: &str) -> Result<(), ToolsError> {
    let invalid = |reason: String| ToolsError::Invalid {
        what: "environment name".to_owned(),
        reason,
    };
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64;
    if !valid {
        return Err(invalid(format!(
            "{name:?} must start with a lowercase letter and hold only lowercase letters, digits and underscores (at most 64), e.g. word_count"
        )));
    }
    if KEYWORDS.contains(&name) {
        return Err(invalid(format!(
            "{name:?} is a Python keyword, which no module can be named; try {name}_env"
        )));
    }
    if let Some(shadowed) = rl_discovery::shadowed_module(name) {
        return Err(invalid(format!(
            "{name}.py would shadow {shadowed} `{name}`: every `import {name}` of the environments in the folder (atroposlib's too) would import it instead; try {name}_env"
        )));
    }
    Ok(())
}

/// `word_count` → `WordCountEnv`.
fn class_name(name: &str) -> String {
    let mut class: String = name
        .split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect();
    class.push_str("Env");
    class
}

/// Creates the file only if it does not exist yet, even against a racing writer.
fn write_new(path: &Path, text: &str) -> Result<(), ToolsError> {
    let io = |source| ToolsError::Io {
        action: "write",
        path: path.to_owned(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|source| {
            if source.kind() == std::io::ErrorKind::AlreadyExists {
                ToolsError::Exists {
                    path: path.to_owned(),
                }
            } else {
                io(source)
            }
        })?;
    file.write_all(text.as_bytes()).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_classes_and_bad_names_are_refused() {
        assert_eq!(class_name("word_count"), "WordCountEnv");
        assert_eq!(class_name("gsm8k"), "Gsm8kEnv");
        for bad in ["", "Word", "9lives", "a-b", "a b", "../x", "ü"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(check_name("a").is_ok());
    }

    #[test]
    fn names_of_modules_runs_import_are_refused_naming_the_module() {
        for (name, shadowed) in [
            ("json", "standard library"),
            ("typing", "standard library"),
            ("random", "standard library"),
            ("asyncio", "standard library"),
            ("logging", "standard library"),
            ("atroposlib", "import at run time"),
            ("openai", "import at run time"),
            ("pydantic", "import at run time"),
            ("torch", "import at run time"),
        ] {
            let error = check_name(name).unwrap_err().to_string();
            assert!(error.contains(&format!("`{name}`")), "{error}");
            assert!(error.contains(shadowed), "{error}");
        }
        for keyword in ["class", "import", "lambda", "async"] {
            let error = check_name(keyword).unwrap_err().to_string();
            assert!(error.contains("keyword"), "{error}");
        }
        let dir = tempfile::tempdir().unwrap();
        assert!(new_environment(dir.path(), "json").is_err());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "nothing written"
        );
        assert!(new_environment(dir.path(), "json_env").is_ok());
    }
}
