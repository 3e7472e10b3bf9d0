//! Settings written into `config.toml` by rl itself (`rl setup`): each key set in its table,
//! every other line of the operator's file kept as it was, comments included; a key rl adds
//! comes with a comment saying what it is.

use std::path::Path;

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

/// Sets `edits` in `home`'s `config.toml` (created when missing) and returns the keys whose
/// value changed (`table.key`). A key already set to its value is left as it is, and when none
/// changed the file is not written at all. A changed key keeps its place and the comments around
/// it (the header rl wrote is the first key's comment); a key rl adds comes with `comment`. A
/// file that is not valid TOML is refused and left as it is.
pub fn write_settings(home: &Path, edits: &[SettingEdit]) -> Result<Vec<String>, SettingsError> {
    let path = home.join(SETTINGS_FILE);
    let (mut document, new) = read_document(&path)?;
    let mut changed = Vec::new();
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
        if set(table, edit) {
            changed.push(edit.table.map_or_else(
                || edit.key.to_owned(),
                |table| format!("{table}.{}", edit.key),
            ));
        }
    }
    if changed.is_empty() {
        return Ok(changed);
    }
    let text = if new {
        format!("{HEADER}\n{document}")
    } else {
        document.to_string()
    };
    write_atomically(&path, text.as_bytes())?;
    Ok(changed)
}

/// What `home`'s `config.toml` says of `key` (in `table`; `None`: the top level), as text (a
/// string as it reads, another value as TOML writes it): `None` when the file or the key is
/// not there. What `rl setup` reads before it decides whether a key is the operator's.
pub fn read_setting(
    home: &Path,
    table: Option<&str>,
    key: &str,
) -> Result<Option<String>, SettingsError> {
    let (document, _) = read_document(&home.join(SETTINGS_FILE))?;
    let item = match table {
        None => document.get(key),
        Some(name) => document.get(name).and_then(|table| table.get(key)),
    };
    Ok(item
        .and_then(Item::as_value)
        .map(|value| match value.as_str() {
            Some(text) => text.to_owned(),
            None => value.to_string().trim().to_owned(),
        }))
}

/// The settings file parsed, and whether it is new (missing: an empty document). A file that
/// is not valid TOML is refused.
fn read_document(path: &Path) -> Result<(DocumentMut, bool), SettingsError> {
    let (text, new) = match std::fs::read_to_string(path) {
        Ok(text) => (text, false),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => (String::new(), true),
        Err(source) => {
            return Err(SettingsError::Io {
                action: "read",
                path: path.to_owned(),
                source,
            });
        }
    };
    let document = text.parse().map_err(|error| SettingsError::InvalidInput {
        what: path.display().to_string(),
        reason: format!("{error}; fix it (or move it away) and run again: nothing was changed"),
    })?;
    Ok((document, new))
}

/// Sets `edit` in `table`; whether that changed its value. An existing value is replaced in
/// place, its decoration kept: `Table::insert` would make a new key, dropping the comments
/// above it (rl's header among them) and the whitespace around it.
fn set(table: &mut Table, edit: &SettingEdit) -> bool {
    match table.get_mut(edit.key) {
        Some(item) if item.as_str() == Some(edit.value.as_str()) => false,
        Some(Item::Value(old)) => {
            let decor = old.decor().clone();
            *old = toml_edit::Value::from(edit.value.as_str());
            *old.decor_mut() = decor;
            true
        }
        Some(other) => {
            *other = value(edit.value.as_str());
            true
        }
        None => {
            table.insert(edit.key, value(edit.value.as_str()));
            if let Some(mut key) = table.key_mut(edit.key) {
                key.leaf_decor_mut()
                    .set_prefix(format!("# {}\n", edit.comment));
            }
            true
        }
    }
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
        write_settings(home.path(), &edits()).unwrap();
        let path = home.path().join(SETTINGS_FILE);
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

    /// Issue 30 #7: run again with nothing to do, `rl setup` rewrote the file, losing its
    /// header, the operator's comments and the trailing newline.
    #[test]
    fn nothing_to_change_writes_nothing_and_a_change_keeps_every_comment() {
        use std::os::unix::fs::MetadataExt as _;
        let home = tempfile::tempdir().unwrap();
        let first = write_settings(home.path(), &edits()).unwrap();
        assert_eq!(first, ["python", "engine.kind"]);
        let path = home.path().join(SETTINGS_FILE);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text = text.replace(
            "# rl's managed Python\n",
            "# rl's managed Python\n# mine: keep this Python\n",
        );
        text.push_str("# the end\n");
        std::fs::write(&path, &text).unwrap();
        let before = std::fs::metadata(&path).unwrap();

        assert!(write_settings(home.path(), &edits()).unwrap().is_empty());
        let after = std::fs::metadata(&path).unwrap();
        assert_eq!(
            (after.ino(), after.mtime_nsec()),
            (before.ino(), before.mtime_nsec()),
            "the file was written"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);

        let mut moved = edits();
        moved[0].value = "/opt/rl/python".to_owned();
        assert_eq!(write_settings(home.path(), &moved).unwrap(), ["python"]);
        let changed = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            changed,
            text.replace("/home/me/.rl/venvs/trainer/bin/python", "/opt/rl/python")
        );
        assert!(changed.starts_with(HEADER), "{changed}");
        assert!(changed.ends_with("# the end\n"), "{changed}");
    }

    #[test]
    fn a_setting_is_read_as_the_file_says_it() {
        let home = tempfile::tempdir().unwrap();
        assert_eq!(read_setting(home.path(), None, "python").unwrap(), None);
        std::fs::write(
            home.path().join(SETTINGS_FILE),
            "python = \"/usr/bin/python3\" # mine\nmax_active_runs = 2\n\n[engine]\nkind = \"local\"\n",
        )
        .unwrap();
        let read = |table, key| read_setting(home.path(), table, key).unwrap();
        assert_eq!(read(None, "python").as_deref(), Some("/usr/bin/python3"));
        assert_eq!(read(None, "max_active_runs").as_deref(), Some("2"));
        assert_eq!(read(Some("engine"), "kind").as_deref(), Some("local"));
        assert_eq!(read(Some("engine"), "python"), None);
        assert_eq!(read(Some("slurm"), "partition"), None);
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
