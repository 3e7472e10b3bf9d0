//! `rl_export_checkpoint`: a finished run's checkpoint handed over as a new folder of the
//! operator's exports folder, a PEFT adapter or the merged model, with how to load and serve
//! it. Agents name a folder, never a path: what they write stays under the state directory.

use std::path::{Path, PathBuf};

use rl_settings::RunId;

use crate::answers::Handover;
use crate::checkpoint_models::At;
use crate::{Tools, ToolsError};

/// Under the state directory: the folders handed over.
pub(crate) const EXPORTS_DIR: &str = "exports";
/// Under the state directory: one lock per export folder's name.
const EXPORT_LOCKS_DIR: &str = "export-locks";

impl Tools {
    /// The folder holding every export made through the tools.
    pub fn exports_dir(&self) -> PathBuf {
        self.home().join(EXPORTS_DIR)
    }

    /// Writes run `id`'s checkpoint at `step` (a step, `best`, or the last saved state) as the
    /// new folder `name` of the exports folder (default `ID-step-N`, `-merged` when merged).
    pub fn hand_over(
        &self,
        id: &RunId,
        step: Option<&str>,
        merged: bool,
        name: Option<&str>,
    ) -> Result<Handover, ToolsError> {
        let at = match step.map(At::named).transpose() {
            Ok(Some(At::Base)) => Err(
                "base is the model the run started from, not a checkpoint of it: export a step \
                 or best"
                    .to_owned(),
            ),
            Ok(at) => Ok(at.unwrap_or(At::Last)),
            Err(reason) => Err(reason),
        }
        .map_err(|reason| ToolsError::invalid("step", reason))?;
        let run = self.run_status(id, i64::MAX)?.run;
        let (step, best_by) = self.chosen_step(&run, &at)?;
        let name = match name {
            Some(name) => checked_name(name)?.to_owned(),
            None if merged => format!("{id}-step-{step}-merged"),
            None => format!("{id}-step-{step}"),
        };
        let made = |dir: PathBuf| {
            std::fs::create_dir_all(&dir)
                .map(|()| dir.clone())
                .map_err(|source| ToolsError::Io {
                    action: "cannot create",
                    path: dir,
                    source,
                })
        };
        let exports = made(self.exports_dir())?;
        // Two exports to one name at once: the second waits for the first, then finds its
        // folder there and is refused, rather than both writing into one folder. The lock
        // lives outside the exports folder, which holds only what is handed over.
        let locks = made(self.home().join(EXPORT_LOCKS_DIR))?;
        let _held = rl_settings::lock_exclusive(&locks.join(format!("{name}.lock")))?;
        let dir = exports.join(&name);
        if std::fs::symlink_metadata(&dir).is_ok() {
            return Err(ToolsError::invalid(
                "name",
                format!(
                    "{} exists: an export is a new folder, never written over one; give another \
                     name",
                    dir.display()
                ),
            ));
        }
        if merged {
            let export = self.export_merged(id, step, &dir, None)?;
            let served_name = format!("{id}-step-{step}");
            Ok(Handover {
                run_id: export.run_id,
                step,
                best_by,
                merged: true,
                serve_with: format!(
                    "vllm serve {} --served-model-name {served_name}",
                    shell_word(&export.dir)
                ),
                message: format!(
                    "Run {id}'s checkpoint at step {step}, merged into its base weights ({}), is \
                     the model folder {}: hand that folder over.",
                    export.base_dir.display(),
                    export.dir.display()
                ),
                dir: export.dir,
                files: export.files,
                base_model: None,
                load_with: export.load_with,
            })
        } else {
            let export = self.export_checkpoint(id, step, &dir)?;
            let files = export
                .files
                .iter()
                .filter_map(|file| file.file_name())
                .map(|file| file.to_string_lossy().into_owned())
                .collect();
            let base = export
                .base_model
                .clone()
                .unwrap_or_else(|| "BASE_MODEL".to_owned());
            Ok(Handover {
                run_id: export.run_id,
                step,
                best_by,
                merged: false,
                serve_with: format!(
                    "vllm serve {} --enable-lora --lora-modules {id}-step-{step}={}",
                    shell_word(Path::new(&base)),
                    shell_word(&export.dir)
                ),
                message: format!(
                    "Run {id}'s checkpoint at step {step} is the LoRA adapter folder {} (over \
                     the base model {base}): hand that folder over, with the base model's name.",
                    export.dir.display()
                ),
                dir: export.dir,
                files,
                base_model: export.base_model,
                load_with: export.load_with,
            })
        }
    }
}

/// A folder name an agent gives: one plain component, so the export stays in the exports
/// folder (the schema's pattern, checked again for callers that skip the schema).
fn checked_name(name: &str) -> Result<&str, ToolsError> {
    let plain = !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    if plain {
        Ok(name)
    } else {
        Err(ToolsError::invalid(
            "name",
            format!(
                "{} is not a folder name: letters, digits, '.', '_' and '-', starting with a \
                 letter or digit, at most 100",
                rl_settings::quoted(name)
            ),
        ))
    }
}

/// `path` as one word of a POSIX shell command.
fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | ':' | '@'))
    {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_name_is_a_folder_of_the_exports_folder() {
        for good in ["model", "a1b2c3d4-step-3", "v1.2_final"] {
            assert_eq!(checked_name(good).ok(), Some(good));
        }
        let long = "a".repeat(101);
        for bad in [
            "",
            "../up",
            "a/b",
            ".hidden",
            "-flag",
            "spa ce",
            long.as_str(),
            "é",
        ] {
            assert!(checked_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_path_with_a_quote_stays_one_shell_word() {
        assert_eq!(shell_word(Path::new("/tmp/a-b/c.d")), "/tmp/a-b/c.d");
        assert_eq!(
            shell_word(Path::new("/tmp/it's here")),
            r"'/tmp/it'\''s here'"
        );
    }
}
