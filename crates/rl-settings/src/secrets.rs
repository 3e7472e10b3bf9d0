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
    /// Keys known under other names (an endpoint's key in a variable the operator chose):
    /// redacted like the others, never handed out.
    others: Vec<(String, String)>,
    /// Problems met while loading (`.env` readable by others, unparsable lines), to be shown.
    pub warnings: Vec<String>,
}

#[expect(
    clippy::missing_fields_in_debug,
    reason = "the values are keys: only the names of those present are shown"
)]
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
        if let Err(error) = crate::files::refuse_special_file(&dotenv) {
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

    /// Redacts `value` too, as `[REDACTED name]`: a key rl holds under a name of the operator's
    /// choosing. An empty value is no key.
    pub fn also_redact(&mut self, name: &str, value: &str) {
        if !value.trim().is_empty() {
            self.others.push((name.to_owned(), value.to_owned()));
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
        // A match of a valid UTF-8 value starts and ends on character boundaries, and the
        // marker is ASCII: the result is valid UTF-8.
        match String::from_utf8(self.redact_bytes(text.as_bytes())) {
            Ok(redacted) => redacted,
            Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
        }
    }

    /// `bytes` (a process's output, not necessarily UTF-8) with every known secret value
    /// replaced by `[REDACTED NAME]`: the one redaction rule, for text and output alike.
    pub fn redact_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let mut redacted = bytes.to_vec();
        for (name, value) in self.redacted_values() {
            redacted = replace_all(
                &redacted,
                value.as_bytes(),
                format!("[REDACTED {name}]").as_bytes(),
            );
        }
        redacted
    }

    /// How many bytes at the end of `bytes` could be the start of a secret value still being
    /// written: output redacted as it streams holds those back until the rest arrives.
    pub fn unfinished_secret_len(&self, bytes: &[u8]) -> usize {
        self.redacted_values()
            .filter_map(|(_, value)| {
                let value = value.as_bytes();
                (1..value.len().min(bytes.len() + 1))
                    .rev()
                    .find(|len| bytes.ends_with(&value[..*len]))
            })
            .max()
            .unwrap_or(0)
    }

    /// The values redaction replaces, with their names.
    fn redacted_values(&self) -> impl Iterator<Item = (&str, &str)> {
        let known = self
            .values
            .iter()
            .map(|(name, value)| (*name, value.as_str()));
        let others = self
            .others
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()));
        known
            .chain(others)
            .filter(|(_, value)| value.len() >= MIN_REDACTED_LEN)
    }
}

/// The prefixes of a credential the Tinker SDK takes (tinker 0.38.0,
/// `lib/_auth_token_provider.py`, `ApiKeyAuthProvider`): an API key (`tml-`), or a JWT
/// (`eyJ`, a credential command's token). Anything else it refuses with "The api_key must
/// start with the 'tml-' prefix" before sending a request.
const TINKER_KEY_PREFIXES: [&str; 2] = ["tml-", "eyJ"];

/// Why `key` (TINKER_API_KEY's value, as rl's trainer hands it to the SDK: trimmed) cannot
/// be a Tinker key; `None` when its form is one the SDK takes. The message never quotes the
/// key.
pub fn tinker_key_problem(key: &str) -> Option<String> {
    let key = key.trim();
    if TINKER_KEY_PREFIXES
        .iter()
        .any(|prefix| key.starts_with(prefix))
    {
        return None;
    }
    Some(
        "TINKER_API_KEY does not start with tml-, and the Tinker SDK refuses such a key before \
         sending anything (\"The api_key must start with the 'tml-' prefix\"): a Tinker API key \
         starts with tml-"
            .to_owned(),
    )
}

/// `haystack` with every occurrence of `needle` (not empty) replaced by `with`, left to right.
fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = 0;
    for at in memchr::memmem::find_iter(haystack, needle) {
        // Matches may overlap; one already replaced swallows the next.
        if at < rest {
            continue;
        }
        out.extend_from_slice(&haystack[rest..at]);
        out.extend_from_slice(with);
        rest = at + needle.len();
    }
    out.extend_from_slice(&haystack[rest..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tinker_key_must_have_the_sdks_prefix() {
        assert_eq!(tinker_key_problem("tml-abc"), None);
        assert_eq!(tinker_key_problem("  tml-abc\n"), None);
        assert_eq!(tinker_key_problem("eyJhbGciOi.x.y"), None);
        let problem = tinker_key_problem("sk-test").unwrap();
        assert!(problem.contains("tml-"), "{problem}");
        assert!(!problem.contains("sk-test"), "the key is quoted: {problem}");
        assert!(tinker_key_problem("TML-abc").is_some());
    }

    fn secrets(pairs: &[(&str, &str)]) -> Secrets {
        let environment = pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        Secrets::load(std::path::Path::new("/nonexistent"), &environment)
    }

    #[test]
    fn bytes_and_text_are_redacted_by_one_rule() {
        let keys = secrets(&[
            ("TINKER_API_KEY", "tk-0123456789"),
            ("WANDB_API_KEY", "wb-12"),
        ]);
        let output = b"a\xff tk-0123456789 tk-0123456789\n wb-12";
        assert_eq!(
            keys.redact_bytes(output),
            b"a\xff [REDACTED TINKER_API_KEY] [REDACTED TINKER_API_KEY]\n wb-12".to_vec(),
            "bytes that are not UTF-8 are kept; a value too short to redact is left"
        );
        assert_eq!(
            keys.redact("\u{e9}tk-0123456789\u{e9}"),
            "\u{e9}[REDACTED TINKER_API_KEY]\u{e9}"
        );
    }

    #[test]
    fn a_key_under_another_name_is_redacted_by_the_same_rule_and_never_handed_out() {
        let mut keys = secrets(&[("TINKER_API_KEY", "tk-0123456789")]);
        keys.also_redact("MY_ENDPOINT_KEY", "sk-endpoint-42");
        keys.also_redact("SHORT", "abc");
        keys.also_redact("EMPTY", " ");
        assert_eq!(
            keys.redact("tk-0123456789 sk-endpoint-42 abc"),
            "[REDACTED TINKER_API_KEY] [REDACTED MY_ENDPOINT_KEY] abc"
        );
        assert_eq!(keys.unfinished_secret_len(b"x sk-end"), 6);
        assert_eq!(keys.get("MY_ENDPOINT_KEY"), None);
        assert!(!format!("{keys:?}").contains("sk-endpoint"));
    }

    #[test]
    fn the_start_of_a_value_at_the_end_is_unfinished() {
        let keys = secrets(&[("TINKER_API_KEY", "tk-0123456789")]);
        assert_eq!(keys.unfinished_secret_len(b"line tk-01"), 5);
        assert_eq!(keys.unfinished_secret_len(b"line t"), 1);
        assert_eq!(
            keys.unfinished_secret_len(b"line tk-0123456789"),
            0,
            "a whole value is not unfinished"
        );
        assert_eq!(keys.unfinished_secret_len(b"line x"), 0);
        assert_eq!(keys.unfinished_secret_len(b""), 0);
        assert_eq!(secrets(&[]).unfinished_secret_len(b"tk-01"), 0);
    }
}
