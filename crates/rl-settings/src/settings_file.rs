//! Settings written into `config.toml` by rl itself (`rl setup`): each key set in its table,
//! every other line of the operator's file kept as it was, comments included; a key rl adds
//! comes with a comment saying what it is.

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Table, value};

use crate::files::write_atomically;
use crate::{SETTINGS_FILE, SettingsError};

/// One setting to write: its table (`None`: the top level), its key, its value, and what a
/// reader of the file is told of it when rl adds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingEdit {
    pub table: Option<&'static str>,
    pub key: &'static str,
    pub value: String,
    pub comment: &'static str,
}

/// Said at the top of a `config.toml` that rl creates.
const HEADER: &str = "# rl's operator settings. `rl setup` wrote the keys it manages; every other key you add \
is kept.\n# All settings: the README's \"Operator settings\"; check them with `rl doctor`.\n";

/// Sets `edits` in `home`'s `config.toml` (created when missing) and returns its path. A file
/// that is not valid TOML is refused and left as it is.
pub fn write_settings(home: &Path, edits: &[SettingEdit]) -> Result<PathBuf, SettingsError> {
    let path = home.join(SETTINGS_FILE);
    let (text, new) = match std::fs::read_to_string(&path) {
        Ok(text) => (text, false),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => (String::new(), true),
        Err(source) => {
            return Err(SettingsError::Io {
                action: "read",
                path,
                source,
            });
        }
    };
    let mut document: DocumentMut = text.parse().map_err(|error| SettingsError::InvalidInput {
        what: path.display().to_string(),
        reason: format!("{error}; fix it (or move it away) and run again: nothing was changed"),
    })?;
    for edit in edits {
        let table: &mut Table = match edit.table {
            None => document.as_table_mut(),
            Some(name) => {
                let entry = document
                    .entry(name)
                    .or_insert_with(|| Item::Table(Table::new()));
                entry
                    .as_table_mut()
                    .ok_or_else(|| SettingsError::InvalidInput {
                        what: path.display().to_string(),
                        reason: format!("`{name}` is not a table; fix it and run again"),
                    })?
            }
        };
        let added = !table.contains_key(edit.key);
        table.insert(edit.key, value(edit.value.as_str()));
        if added && let Some(mut key) = table.key_mut(edit.key) {
            key.leaf_decor_mut()
                .set_prefix(format!("# {}\n", edit.comment));
        }
    }
    let text = if new {
        format!("{HEADER}\n{document}")
    } else {
        document.to_string()
    };
    write_atomically(&path, text.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edits() -> Vec<SettingEdit> {
        vec![
            SettingEdit {
                table: None,
                key: "python",
                value: "/home/me/.rl/venvs/trainer/bin/python".to_owned(),
                comment: "rl's managed Python",
            },
            SettingEdit {
                table: Some("engine"),
                key: "kind",
                value: "local".to_owned(),
                comment: "train on this machine",
            },
        ]
    }

    #[test]
    fn a_new_file_is_commented_and_an_old_one_keeps_what_it_had() {
        let home = tempfile::tempdir().unwrap();
        let path = write_settings(home.path(), &edits()).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.starts_with("# rl's operator settings"), "{written}");
        assert!(
            written.contains(
                "# rl's managed Python\npython = \"/home/me/.rl/venvs/trainer/bin/python\""
            ),
            "{written}"
        );
        assert!(
            written.contains("[engine]\n# train on this machine\nkind = \"local\""),
            "{written}"
        );

        std::fs::write(
            &path,
            "# mine\nmax_active_runs = 2 # two at most\npython = \"/usr/bin/python3\"\n\n[engine]\nbase_model = \"/models/q\"\n",
        )
        .unwrap();
        write_settings(home.path(), &edits()).unwrap();
        let kept = std::fs::read_to_string(&path).unwrap();
        assert!(
            kept.contains("# mine\nmax_active_runs = 2 # two at most\n"),
            "{kept}"
        );
        assert!(
            kept.contains("python = \"/home/me/.rl/venvs/trainer/bin/python\""),
            "{kept}"
        );
        assert!(!kept.contains("/usr/bin/python3"), "{kept}");
        assert!(kept.contains("base_model = \"/models/q\""), "{kept}");
        assert!(kept.contains("kind = \"local\""), "{kept}");
    }

    #[test]
    fn a_broken_file_is_refused_and_left_alone() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join(SETTINGS_FILE);
        std::fs::write(&path, "python = \n[[[").unwrap();
        let error = write_settings(home.path(), &edits()).unwrap_err();
        assert!(error.to_string().contains("nothing was changed"), "{error}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "python = \n[[[");
        std::fs::write(&path, "engine = 3\n").unwrap();
        assert!(write_settings(home.path(), &edits()).is_err());
    }
}
