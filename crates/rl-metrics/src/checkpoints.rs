//! `checkpoints.jsonl`, the record rl's trainer keeps in the run folder: one row per checkpoint,
//! appended once its save has returned (`{"step", "name", "sampler_path", "state_path", "time"}`).
//! When a run has this file, it alone says which checkpoints and final weights exist: a path
//! that was not saved is never reported.

use std::path::Path;

use rl_settings::RunFolder;
use serde::Deserialize;

use crate::error::MetricsError;
use crate::model::Checkpoint;

/// The name of the last step's checkpoint.
const FINAL: &str = "final";

#[derive(Debug, Deserialize)]
struct Row {
    step: Option<i64>,
    name: Option<String>,
    sampler_path: Option<String>,
    state_path: Option<String>,
    time: Option<String>,
}

/// What the file holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckpointRecord {
    pub checkpoints: Vec<Checkpoint>,
    /// The sampler weights of the `final` checkpoint, once saved.
    pub final_weights: Option<String>,
    /// Lines that could not be read (a line cut by a crash mid-write).
    pub warnings: Vec<String>,
}

/// `Ok(None)` when the run has no such file (its trainer keeps none).
pub fn read_checkpoints(path: &Path) -> Result<Option<CheckpointRecord>, MetricsError> {
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(MetricsError::Io {
                action: "read",
                path: path.to_owned(),
                source,
            });
        }
    };
    let mut record = CheckpointRecord::default();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row = match serde_json::from_str::<Row>(line) {
            Ok(row) => row,
            Err(error) => {
                record.warnings.push(format!(
                    "{} line {} is not a checkpoint ({error}); skipped",
                    RunFolder::CHECKPOINTS,
                    index + 1
                ));
                continue;
            }
        };
        let Some(sampler_path) = row.sampler_path.filter(|p| !p.is_empty()) else {
            record.warnings.push(format!(
                "{} line {} has no sampler_path; skipped",
                RunFolder::CHECKPOINTS,
                index + 1
            ));
            continue;
        };
        if row.name.as_deref() == Some(FINAL) {
            record.final_weights = Some(sampler_path.clone());
        }
        let checkpoint = Checkpoint {
            step: row.step,
            path: sampler_path,
            name: row.name,
            state_path: row.state_path.filter(|p| !p.is_empty()),
            time: row.time,
        };
        // A step saved twice is one checkpoint: a cap that ends a run before its next step
        // saves the state of a step that saved only its sampler weights, in a second row of
        // the same step and name (and a continuation carries both over).
        match record.checkpoints.iter_mut().find(|earlier| {
            earlier.step.is_some()
                && earlier.step == checkpoint.step
                && earlier.name == checkpoint.name
        }) {
            Some(earlier) => {
                earlier.state_path = checkpoint.state_path.or(earlier.state_path.take());
                earlier.path = checkpoint.path;
                earlier.time = checkpoint.time.or(earlier.time.take());
            }
            None => record.checkpoints.push(checkpoint),
        }
    }
    Ok(Some(record))
}

/// Where the local engine (skyrl-tx 0.3.0) keeps what a `tinker://` path names, in a run's
/// folder: sampler weights `tinker://<model>/<name>` as the archive
/// `engine/checkpoints/<model>/sampler_weights/<name>.tar.gz`, a state
/// `tinker://<model>/weights/<name>` as the folder `engine/checkpoints/<model>/<name>.tar.gz`.
/// `None` for another shape of path, or a name that could leave the folder.
pub fn engine_archive(run_dir: &Path, tinker_path: &str) -> Option<std::path::PathBuf> {
    let rest = tinker_path.strip_prefix("tinker://")?;
    let parts: Vec<&str> = rest.split('/').collect();
    let safe =
        |part: &&str| !part.is_empty() && **part != *".." && **part != *"." && !part.contains('\\');
    if !parts.iter().all(safe) {
        return None;
    }
    let checkpoints = RunFolder::at(run_dir).engine_checkpoints();
    match parts[..] {
        [model, "weights", name] => Some(checkpoints.join(model).join(format!("{name}.tar.gz"))),
        [model, name] => Some(
            checkpoints
                .join(model)
                .join("sampler_weights")
                .join(format!("{name}.tar.gz")),
        ),
        _ => None,
    }
}

/// The bytes a saved archive takes: a file's size, or a folder's files' sizes summed (links
/// not followed); `None` when it is not there.
pub fn archive_bytes(path: &Path) -> Option<u64> {
    let metadata = std::fs::symlink_metadata(path).ok()?;
    if metadata.is_file() {
        return Some(metadata.len());
    }
    if !metadata.is_dir() {
        return None;
    }
    Some(
        walkdir::WalkDir::new(path)
            .max_depth(8)
            .into_iter()
            .filter_map(Result::ok)
            .filter_map(|entry| entry.metadata().ok())
            .filter(std::fs::Metadata::is_file)
            .map(|metadata| metadata.len())
            .sum(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_paths_map_to_the_engine_folder_and_never_out_of_it() {
        let run = Path::new("/runs/r");
        assert_eq!(
            engine_archive(run, "tinker://m/step_2"),
            Some(run.join("engine/checkpoints/m/sampler_weights/step_2.tar.gz"))
        );
        assert_eq!(
            engine_archive(run, "tinker://m/weights/final"),
            Some(run.join("engine/checkpoints/m/final.tar.gz"))
        );
        for hostile in [
            "tinker://../etc",
            "tinker://m/../../x",
            "tinker://m/weights/..",
            "tinker:///x",
            "s3://m/x",
            "tinker://a/b/c/d",
        ] {
            assert_eq!(engine_archive(run, hostile), None, "{hostile}");
        }
    }

    fn read_text(text: &str) -> Option<CheckpointRecord> {
        let dir = tempfile::tempdir().unwrap();
        let path = RunFolder::at(dir.path()).checkpoints();
        std::fs::write(&path, text).unwrap();
        read_checkpoints(&path).unwrap()
    }

    #[test]
    fn rows_become_checkpoints_and_final_is_the_final_row() {
        let record = read_text(
            "{\"step\": 0, \"name\": \"step_0\", \"sampler_path\": \"tinker://m/sampler_weights/step_0\", \"state_path\": null, \"time\": \"2026-11-23T15:00:00Z\"}\n\
             {\"step\": 2, \"name\": \"final\", \"sampler_path\": \"tinker://m/sampler_weights/final\", \"state_path\": \"tinker://m/weights/final\", \"time\": \"2026-11-23T15:01:00Z\"}\n",
        )
        .unwrap();
        assert_eq!(record.checkpoints.len(), 2);
        assert_eq!(
            record.final_weights.as_deref(),
            Some("tinker://m/sampler_weights/final")
        );
        assert_eq!(
            record.checkpoints[1].state_path.as_deref(),
            Some("tinker://m/weights/final")
        );
        assert_eq!(record.checkpoints[0].state_path, None);
    }

    #[test]
    fn a_run_that_never_saved_final_has_no_final_weights() {
        let record = read_text(
            "{\"step\": 0, \"name\": \"step_0\", \"sampler_path\": \"tinker://m/sampler_weights/step_0\"}\n\
             {\"step\": 1, \"name\": \"step_1\", \"sampler_path\": \"tinker://m/sampler_weights/st",
        )
        .unwrap();
        assert_eq!(record.final_weights, None);
        assert_eq!(
            record.checkpoints.len(),
            1,
            "the cut line is not a checkpoint"
        );
        assert_eq!(record.warnings.len(), 1);
    }

    /// A cap before step 4 saves step 3's state after its sampler weights: one checkpoint of
    /// step 3 with both, listed once (before, step 3 was listed twice).
    #[test]
    fn a_step_saved_twice_is_one_checkpoint_with_its_state() {
        let record = read_text(concat!(
            "{\"step\": 2, \"name\": \"step_2\", \"sampler_path\": \"tinker://m/step_2\", \"state_path\": \"tinker://m/weights/step_2\"}\n",
            "{\"step\": 3, \"name\": \"step_3\", \"sampler_path\": \"tinker://m/step_3\", \"state_path\": null, \"time\": \"t1\"}\n",
            "{\"step\": 3, \"name\": \"step_3\", \"sampler_path\": \"tinker://m/step_3\", \"state_path\": \"tinker://m/weights/step_3\", \"time\": \"t2\"}\n",
            "{\"step\": 4, \"name\": \"step_4\", \"sampler_path\": \"tinker://m/step_4\", \"state_path\": null}\n",
        ))
        .unwrap();
        let steps: Vec<Option<i64>> = record.checkpoints.iter().map(|c| c.step).collect();
        assert_eq!(steps, [Some(2), Some(3), Some(4)]);
        let third = &record.checkpoints[1];
        assert_eq!(
            third.state_path.as_deref(),
            Some("tinker://m/weights/step_3")
        );
        assert_eq!(third.time.as_deref(), Some("t2"));
        // Distinct checkpoints of one step (an extension's parent's final and a later one
        // are different steps; rows without a step are never merged) stay apart.
        let unnumbered = read_text(concat!(
            "{\"name\": \"x\", \"sampler_path\": \"tinker://m/a\"}\n",
            "{\"name\": \"x\", \"sampler_path\": \"tinker://m/b\"}\n",
        ))
        .unwrap();
        assert_eq!(unnumbered.checkpoints.len(), 2);
    }

    #[test]
    fn no_file_is_no_record() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            read_checkpoints(&RunFolder::at(dir.path()).checkpoints()).unwrap(),
            None
        );
    }
}
