//! A pre-flight test's folder, and the one place the names of what is in it are spelled: every
//! other module (and crate) asks `PreflightFolder` for a path. A test's folder is
//! `preflight/<test_id>/` in the state directory, or `runs/<run_id>/evaluations/<test_id>/` for
//! a run's evaluations: the layout inside is the same wherever the folder is.

use std::path::{Path, PathBuf};

/// One test's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreflightFolder {
    dir: PathBuf,
}

/// Where one model's files are in its test's folder, named after its place in the list and its
/// id (`01-qwen_qwen3-8b.log`): the runner writes them and the store reads them back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFiles {
    /// `01-qwen_qwen3-8b`: what every file of the model is named after (and the mark its
    /// processes carry).
    pub stem: String,
    /// Everything it printed, keys redacted.
    pub log_path: PathBuf,
    /// atroposlib's groups (`--env.data_path_to_save_groups`).
    pub output_path: PathBuf,
    /// Its process group, recorded as soon as it exists.
    pub group_path: PathBuf,
    /// rl's environment runner's counts of the groups made.
    pub groups_path: PathBuf,
    /// What rl's environment runner drew, when asked the held-out items.
    pub items_path: PathBuf,
}

impl PreflightFolder {
    /// What is known of the test from its start, with the process running it.
    pub const PLAN: &str = "plan.json";
    /// The figures and verdict, written at its end.
    pub const REPORT: &str = "report.json";
    /// A stop asked by another process (`rl preflight stop`).
    pub const STOP: &str = "stop.json";
    /// What was found and ended once the process running the test was gone.
    pub const INTERRUPTED: &str = "interrupted.json";
    /// The long call a test answers, written by rl-tools (`long_calls.rs`): named here so a
    /// test's folder has one list of names.
    pub const CALL: &str = "call.json";
    /// The copy of a run's engine folder the test's model server works on. The server treats
    /// the test's folder as a run's (`rl_process::copy_engine` puts the copy there), so the
    /// name is the run folder's.
    pub const ENGINE_COPY: &str = rl_settings::RunFolder::ENGINE;
    /// The model server's name among the test's processes: its files' stem and its mark.
    pub const SERVER: &str = "server";
    /// `<stem>.group.json`: one process group of the test (a model's, the server's).
    const GROUP_SUFFIX: &str = ".group.json";

    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn plan(&self) -> PathBuf {
        self.dir.join(Self::PLAN)
    }

    pub fn report(&self) -> PathBuf {
        self.dir.join(Self::REPORT)
    }

    pub fn stop(&self) -> PathBuf {
        self.dir.join(Self::STOP)
    }

    pub fn interrupted(&self) -> PathBuf {
        self.dir.join(Self::INTERRUPTED)
    }

    /// The long call the test answers (rl-tools writes and reads it; rl-preflight never does).
    pub fn call(&self) -> PathBuf {
        self.dir.join(Self::CALL)
    }

    pub fn engine_copy(&self) -> PathBuf {
        self.dir.join(Self::ENGINE_COPY)
    }

    /// The files of the model at `index` in the test's list.
    pub fn model(&self, index: usize, model: &str) -> ModelFiles {
        let stem = file_stem(index, model);
        let output_path = self.dir.join(format!("{stem}.jsonl"));
        ModelFiles {
            log_path: self.log(&stem),
            items_path: Self::items_beside(&output_path),
            output_path,
            groups_path: self.dir.join(format!("{stem}.groups.json")),
            group_path: self.group_record(&stem),
            stem,
        }
    }

    /// The model server's log (`server.log`).
    pub fn server_log(&self) -> PathBuf {
        self.log(Self::SERVER)
    }

    /// The model server's process group (`server.group.json`).
    pub fn server_group(&self) -> PathBuf {
        self.group_record(Self::SERVER)
    }

    /// What rl's environment runner drew for a model whose groups are at `output_path`
    /// (`01-m.items.json`): a model's report keeps only its groups' path, this is found from it.
    pub fn items_beside(output_path: &Path) -> PathBuf {
        output_path.with_extension("items.json")
    }

    /// Every process group recorded in the folder (each model's, the server's), in no order.
    pub fn group_records(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|entry| {
                entry
                    .file_name()
                    .to_string_lossy()
                    .ends_with(Self::GROUP_SUFFIX)
            })
            .map(|entry| entry.path())
            .collect()
    }

    /// Removes the copy of a run's engine folder the test's server worked on (its states are
    /// links: a copy left behind would keep them on disk after the run's own are pruned).
    pub fn remove_engine_copy(&self) {
        let _ = std::fs::remove_dir_all(self.engine_copy());
    }

    fn log(&self, stem: &str) -> PathBuf {
        self.dir.join(format!("{stem}.log"))
    }

    fn group_record(&self, stem: &str) -> PathBuf {
        self.dir.join(format!("{stem}{}", Self::GROUP_SUFFIX))
    }
}

/// File names from a model id: `qwen/qwen3-8b` → `01-qwen_qwen3-8b`. The index keeps two ids
/// that flatten alike apart.
pub fn file_stem(index: usize, model: &str) -> String {
    let flat: String = model
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    format!("{:02}-{flat}", index + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stems_are_flat_and_numbered() {
        assert_eq!(file_stem(0, "qwen/qwen3-8b"), "01-qwen_qwen3-8b");
        assert_eq!(file_stem(11, "a b:c"), "12-a_b_c");
        assert_eq!(file_stem(0, "../../etc"), "01-.._.._etc");
    }

    /// The names other processes and earlier tests rely on: a change here strands every test
    /// already kept.
    #[test]
    fn every_name_in_a_test_folder() {
        let folder = PreflightFolder::at("/t");
        let files = folder.model(1, "a/b");
        assert_eq!(files.stem, "02-a_b");
        assert_eq!(files.log_path, Path::new("/t/02-a_b.log"));
        assert_eq!(files.output_path, Path::new("/t/02-a_b.jsonl"));
        assert_eq!(files.group_path, Path::new("/t/02-a_b.group.json"));
        assert_eq!(files.groups_path, Path::new("/t/02-a_b.groups.json"));
        assert_eq!(files.items_path, Path::new("/t/02-a_b.items.json"));
        assert_eq!(folder.plan(), Path::new("/t/plan.json"));
        assert_eq!(folder.report(), Path::new("/t/report.json"));
        assert_eq!(folder.stop(), Path::new("/t/stop.json"));
        assert_eq!(folder.interrupted(), Path::new("/t/interrupted.json"));
        assert_eq!(folder.call(), Path::new("/t/call.json"));
        assert_eq!(folder.engine_copy(), Path::new("/t/engine"));
        assert_eq!(folder.server_log(), Path::new("/t/server.log"));
        assert_eq!(folder.server_group(), Path::new("/t/server.group.json"));
    }

    #[test]
    fn group_records_are_the_group_files_only() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "01-m.group.json",
            "server.group.json",
            "01-m.groups.json",
            "01-m.log",
        ] {
            std::fs::write(dir.path().join(name), "{}").unwrap();
        }
        let mut found = PreflightFolder::at(dir.path()).group_records();
        found.sort();
        assert_eq!(
            found,
            [
                dir.path().join("01-m.group.json"),
                dir.path().join("server.group.json")
            ]
        );
    }
}
