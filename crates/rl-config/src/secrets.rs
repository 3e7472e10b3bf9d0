//! API keys: read from the process environment and from `<home>/.env`, handed only to the
//! processes that need them, and never written anywhere by rl.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// The keys rl knows. Nothing else from `.env` is read.
pub const SECRET_NAMES: [&str; 4] = [
    "TINKER_API_KEY",
    "WANDB_API_KEY",
    "OPENROUTER_API_KEY",
    "OPENAI_API_KEY",
];

/// Shorter values are not redacted in logs: they would match ordinary text.
const MIN_REDACTED_LEN: usize = 6;

#[derive(Clone, Default)]
pub struct Secrets {
    values: BTreeMap<&'static str, String>,
    /// Problems met while loading (`.env` readable by others, unparsable lines), to be shown.
    pub warnings: Vec<String>,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secrets")
            .field("present", &self.values.keys())
            .finish()
    }
}

impl Secrets {
    /// The process environment wins over `.env`, as the original tool's loader did.
    pub fn load(home: &Path, environment: &BTreeMap<String, String>) -> Self {
        let mut secrets = Secrets::default();
        let dotenv = home.join(".env");
        if let Err(error) = crate::store::refuse_special_file(&dotenv) {
            secrets.warnings.push(format!("{error}; it was not read"));
        } else if dotenv.exists() {
            secrets.warn_if_exposed(&dotenv);
            match dotenvy::from_path_iter(&dotenv) {
                Ok(entries) => {
                    for entry in entries {
                        match entry {
                            Ok((key, value)) => secrets.insert(&key, value),
                            Err(error) => secrets.warnings.push(format!(
                                "{}: a line could not be read: {error}",
                                dotenv.display()
                            )),
                        }
                    }
                }
                Err(error) => {
                    secrets
                        .warnings
                        .push(format!("{}: cannot read: {error}", dotenv.display()));
                }
            }
        }
        for (key, value) in environment {
            secrets.insert(key, value.clone());
        }
        secrets
    }

    fn insert(&mut self, key: &str, value: String) {
        if let Some(name) = SECRET_NAMES.iter().find(|name| **name == key)
            && !value.trim().is_empty()
        {
            self.values.insert(name, value);
        }
    }

    fn warn_if_exposed(&mut self, path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(metadata) = std::fs::metadata(path)
            && metadata.permissions().mode() & 0o077 != 0
        {
            self.warnings.push(format!(
                "{} is readable by other users (mode {:o}); run `chmod 600 {}`",
                path.display(),
                metadata.permissions().mode() & 0o777,
                path.display()
            ));
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Which keys are present; never their values.
    pub fn presence(&self) -> BTreeMap<&'static str, bool> {
        SECRET_NAMES
            .iter()
            .map(|name| (*name, self.values.contains_key(name)))
            .collect()
    }

    /// `(name, value)` pairs for a child process's environment.
    pub fn for_child<'a>(&'a self, names: &'a [&str]) -> impl Iterator<Item = (&'a str, &'a str)> {
        names
            .iter()
            .filter_map(|name| self.get(name).map(|value| (*name, value)))
    }

    /// `text` with every known secret value replaced by `[REDACTED NAME]`.
    pub fn redact(&self, text: &str) -> String {
        let mut redacted = text.to_owned();
        for (name, value) in &self.values {
            if value.len() >= MIN_REDACTED_LEN && redacted.contains(value.as_str()) {
                redacted = redacted.replace(value.as_str(), &format!("[REDACTED {name}]"));
            }
        }
        redacted
    }
}
