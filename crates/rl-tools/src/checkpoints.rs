//! A run's checkpoints: listed with their sizes, the best and the one a resume loads
//! (`rl_list_checkpoints`), and exported as a PEFT LoRA adapter folder (`rl checkpoints export`).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use rl_metrics::{archive_bytes, engine_archive};
use rl_process::RunRecord;
use rl_settings::{RunConfig, RunId, run_dir};

use crate::answers::{CheckpointEntry, CheckpointList, Exported, Pruned, RunCheckpoints};
use crate::hosted::TrainedOn;
use crate::saved_states::{Saved, is_comparable, read_pruned, write_pruned};
use crate::{Tools, ToolsError};

/// What a PEFT adapter folder holds, as the local engine's sampler archives hold it.
const ADAPTER_FILES: [&str; 2] = ["adapter_config.json", "adapter_model.safetensors"];
/// An adapter file larger than this is not a LoRA adapter rl saved.
const MAX_ADAPTER_BYTES: u64 = 8 << 30;

impl Tools {
    /// The checkpoints of one run, or of every run (newest first).
    pub fn list_checkpoints(&self, id: Option<&RunId>) -> Result<CheckpointList, ToolsError> {
        let runs = match id {
            Some(id) => vec![self.run_status(id, i64::MAX)?.run],
            None => self.runs()?.list()?,
        };
        // The service is asked of one run only: a listing of every run stays local and quick.
        let ask_service = id.is_some();
        let runs: Vec<RunCheckpoints> = runs
            .iter()
            .map(|run| self.run_checkpoints(run, ask_service))
            .collect::<Result<_, _>>()?;
        Ok(CheckpointList {
            count: runs.len(),
            runs,
        })
    }

    fn run_checkpoints(
        &self,
        run: &RunRecord,
        ask_service: bool,
    ) -> Result<RunCheckpoints, ToolsError> {
        let Saved {
            dir,
            mut record,
            best_step,
            scores,
            resume,
            pruned,
        } = self.saved(run)?;
        // A hosted run's sizes and expiries are the service's to tell; only the service its
        // launch record names is asked (with its key), and a record that cannot tell asks none.
        let hosted = if ask_service {
            match self.trained_on(run) {
                Ok(TrainedOn::Service(service)) => self
                    .hosted_listing(&service, &record)
                    .unwrap_or_else(|error| {
                        record.warnings.push(format!(
                            "the Tinker service did not tell sizes and expiries: {error}"
                        ));
                        BTreeMap::new()
                    }),
                Ok(TrainedOn::LocalEngine) => BTreeMap::new(),
                Err(error) => {
                    record
                        .warnings
                        .push(format!("sizes and expiries unknown: {error}"));
                    BTreeMap::new()
                }
            }
        } else {
            BTreeMap::new()
        };
        let checkpoints = record
            .checkpoints
            .iter()
            .map(|checkpoint| {
                let size = |path: Option<&String>| {
                    path.and_then(|path| engine_archive(&dir, path))
                        .and_then(|archive| archive_bytes(&archive))
                };
                let listed = |path: Option<&String>| path.and_then(|path| hosted.get(path));
                let (sampler_listed, state_listed) = (
                    listed(Some(&checkpoint.path)),
                    listed(checkpoint.state_path.as_ref()),
                );
                let sampler = size(Some(&checkpoint.path))
                    .or_else(|| sampler_listed.and_then(|listed| listed.size_bytes));
                let state = size(checkpoint.state_path.as_ref())
                    .or_else(|| state_listed.and_then(|listed| listed.size_bytes));
                // Usable while both live: the earlier expiry of the two.
                let expires_at = [sampler_listed, state_listed]
                    .into_iter()
                    .flatten()
                    .filter_map(|listed| listed.expires_at.as_ref())
                    .min_by_key(|at| at.parse::<jiff::Timestamp>().ok())
                    .cloned();
                CheckpointEntry {
                    step: checkpoint.step,
                    name: checkpoint.name.clone(),
                    sampler_path: checkpoint.path.clone(),
                    state_path: checkpoint.state_path.clone(),
                    time: checkpoint.time.clone(),
                    size_bytes: sampler.map(|bytes| bytes + state.unwrap_or(0)),
                    expires_at,
                    best: best_step.is_some()
                        && checkpoint.step == best_step
                        && is_comparable(checkpoint, &pruned),
                    resume_point: resume.as_ref().is_some_and(|point| {
                        checkpoint.state_path.as_deref() == Some(point.state_path.as_str())
                    }),
                    pruned: checkpoint.step.is_some_and(|step| pruned.contains(&step)),
                    state_missing: !checkpoint.step.is_some_and(|step| pruned.contains(&step))
                        && checkpoint.state_path.as_deref().is_some_and(|state| {
                            crate::resume_point::state_is_missing(&dir, state)
                        }),
                }
            })
            .collect();
        Ok(RunCheckpoints {
            run_id: run.id.clone(),
            environment: run.environment.clone(),
            status: run.state.name(),
            checkpoints,
            best_step,
            best_by: scores.by,
            resume_step: resume.map(|point| point.step),
            warnings: record.warnings,
        })
    }

    /// Deletes the files of an ended run's checkpoints that the operator's policy does not
    /// keep (`[checkpoints] keep_last`): never the last ones, the best, the final weights or
    /// the state a resume loads.
    pub fn prune_checkpoints(&self, id: &RunId) -> Result<Pruned, ToolsError> {
        let run = self.run_status(id, i64::MAX)?.run;
        if !run.state.is_finished() {
            return Err(ToolsError::invalid(
                "run",
                format!(
                    "run {id} is {}: its trainer and engine use its checkpoints; prune it once \
                     it has ended",
                    run.state.label()
                ),
            ));
        }
        let keep_last = self.settings()?.checkpoints.keep_last;
        let saved = self.saved(&run)?;
        let mut steps: Vec<i64> = saved
            .record
            .checkpoints
            .iter()
            .filter_map(|checkpoint| checkpoint.step)
            .collect();
        steps.sort_unstable();
        steps.dedup();
        let mut kept: Vec<i64> = if keep_last == 0 {
            steps.clone()
        } else {
            steps
                .iter()
                .rev()
                .take(usize::try_from(keep_last).unwrap_or(usize::MAX))
                .copied()
                .collect()
        };
        kept.extend(saved.best_step);
        kept.extend(
            saved
                .resume
                .as_ref()
                .and_then(|point| i64::try_from(point.step).ok()),
        );
        kept.extend(
            saved
                .record
                .checkpoints
                .iter()
                .filter(|checkpoint| checkpoint.name.as_deref() == Some("final"))
                .filter_map(|checkpoint| checkpoint.step),
        );
        kept.sort_unstable();
        kept.dedup();
        let (mut removed, mut not_local, mut freed_bytes) = (Vec::new(), Vec::new(), 0);
        for checkpoint in &saved.record.checkpoints {
            let Some(step) = checkpoint.step else {
                continue;
            };
            if kept.contains(&step) || saved.pruned.contains(&step) {
                continue;
            }
            let archives: Vec<PathBuf> = [Some(&checkpoint.path), checkpoint.state_path.as_ref()]
                .into_iter()
                .flatten()
                .filter_map(|path| engine_archive(&saved.dir, path))
                .collect();
            if archives.is_empty() {
                not_local.push(step);
                continue;
            }
            for archive in archives {
                freed_bytes += archive_bytes(&archive).unwrap_or(0);
                remove_archive(&archive)?;
            }
            removed.push(step);
        }
        let mut pruned = saved.pruned.clone();
        pruned.extend(&removed);
        pruned.sort_unstable();
        pruned.dedup();
        write_pruned(&saved.dir, &pruned)?;
        let message = match (keep_last, removed.len()) {
            (0, _) => "[checkpoints] keep_last is 0: every checkpoint is kept".to_owned(),
            (_, 0) => "nothing to prune".to_owned(),
            (_, count) => format!("deleted the files of {count} checkpoints, {freed_bytes} bytes"),
        };
        Ok(Pruned {
            run_id: id.to_string(),
            keep_last,
            kept,
            removed,
            freed_bytes,
            not_local,
            message,
        })
    }

    /// Writes the LoRA adapter of run `id`'s checkpoint at `step` into `dir` (created; never
    /// overwriting), as PEFT loads it.
    pub fn export_checkpoint(
        &self,
        id: &RunId,
        step: i64,
        dir: &Path,
    ) -> Result<Exported, ToolsError> {
        check_export_folder(dir)?;
        let run = self.run_status(id, i64::MAX)?.run;
        let run_dir = run_dir(self.home(), id);
        let checkpoint = self.checkpoint_at(&run, step)?;
        if read_pruned(&run_dir).contains(&step) {
            return Err(ToolsError::invalid(
                "step",
                format!("the files of run {id}'s checkpoint at step {step} were pruned"),
            ));
        }
        let local = engine_archive(&run_dir, &checkpoint.path).filter(|archive| archive.is_file());
        let files = match local {
            Some(archive) => extract_adapter(&archive, dir)?,
            None => match self.trained_on(&run)? {
                TrainedOn::Service(service) => {
                    // A hosted run's checkpoint, exported by the service from its saved state
                    // and read like a local archive. The helper writes it whole (beside it,
                    // then renamed), over what a killed export may have left.
                    let state = checkpoint.state_path.as_deref().ok_or_else(|| {
                        ToolsError::invalid(
                            "step",
                            format!(
                                "run {id}'s checkpoint at step {step} has sampler weights only; \
                                 the Tinker service exports saved states (save_every), not \
                                 sampler weights"
                            ),
                        )
                    })?;
                    let download = run_dir.join(format!("export-step-{step}.tar"));
                    let files = self
                        .fetch_export(&service, state, &download)
                        .and_then(|()| extract_adapter(&download, dir));
                    let _ = std::fs::remove_file(&download);
                    files?
                }
                TrainedOn::LocalEngine => {
                    return Err(ToolsError::invalid(
                        "checkpoint",
                        format!(
                            "{} is not in the run's local engine folder (its archive is missing)",
                            checkpoint.path
                        ),
                    ));
                }
            },
        };
        let base_model = RunConfig::read(&run.config_path)
            .ok()
            .and_then(|config| config.trainer().ok()?.base_model);
        let load_with = format!(
            "from transformers import AutoModelForCausalLM\nfrom peft import PeftModel\n\
             model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained({:?}), {:?})",
            base_model.as_deref().unwrap_or("BASE_MODEL"),
            dir.display().to_string()
        );
        Ok(Exported {
            run_id: id.to_string(),
            step,
            sampler_path: checkpoint.path.clone(),
            dir: dir.to_owned(),
            files,
            base_model,
            load_with,
        })
    }
}

/// A saved archive removed: a file, or a state's folder.
fn remove_archive(path: &Path) -> Result<(), ToolsError> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    };
    removed.map_err(|source| ToolsError::Io {
        action: "remove",
        path: path.to_owned(),
        source,
    })
}

/// The adapter files of a sampler archive, written into `dir`: only those two names, only
/// regular files, never over an existing file.
/// Refuses an export's folder that is there but no folder (a file, a link to nothing): the
/// adapter's files go into a folder, and creating one over either fails obscurely.
fn check_export_folder(dir: &Path) -> Result<(), ToolsError> {
    match std::fs::symlink_metadata(dir) {
        Ok(_) if dir.is_dir() => Ok(()),
        Ok(metadata) => Err(ToolsError::invalid(
            "folder",
            format!(
                "{} is {}, not a folder: the export writes the adapter's two files into a \
                 folder (made when missing, never overwriting); name a new one",
                dir.display(),
                if metadata.file_type().is_symlink() {
                    "a link to nothing"
                } else {
                    "a file"
                }
            ),
        )),
        Err(_) => Ok(()),
    }
}

fn extract_adapter(archive: &Path, dir: &Path) -> Result<Vec<PathBuf>, ToolsError> {
    let io = |action: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| ToolsError::Io {
            action,
            path,
            source,
        }
    };
    let mut file = std::fs::File::open(archive).map_err(io("open", archive))?;
    // The local engine writes tar.gz; the hosted service serves a plain tar.
    let mut magic = [0_u8; 2];
    let gzip = file.read_exact(&mut magic).is_ok() && magic == [0x1f, 0x8b];
    std::io::Seek::rewind(&mut file).map_err(io("read", archive))?;
    let reader: Box<dyn std::io::Read> = if gzip {
        Box::new(flate2::read::GzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let mut entries = tar::Archive::new(reader);
    let mut found: std::collections::BTreeMap<String, Vec<u8>> = std::collections::BTreeMap::new();
    for entry in entries.entries().map_err(io("read", archive))? {
        let entry = entry.map_err(io("read", archive))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry.path().ok().and_then(|path| {
            path.file_name()
                .map(|name| name.to_string_lossy().into_owned())
        });
        let Some(name) = name.filter(|name| ADAPTER_FILES.contains(&name.as_str())) else {
            continue;
        };
        let mut bytes = Vec::new();
        entry
            .take(MAX_ADAPTER_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io("read", archive))?;
        if bytes.len() as u64 > MAX_ADAPTER_BYTES {
            return Err(ToolsError::invalid(
                "checkpoint",
                format!(
                    "{name} in {} is over {MAX_ADAPTER_BYTES} bytes",
                    archive.display()
                ),
            ));
        }
        found.insert(name, bytes);
    }
    for name in ADAPTER_FILES {
        if !found.contains_key(name) {
            return Err(ToolsError::invalid(
                "checkpoint",
                format!(
                    "{} holds no {name}: not a LoRA adapter archive",
                    archive.display()
                ),
            ));
        }
    }
    // Refused before anything is written, so a refusal leaves the folder as it was.
    for name in found.keys() {
        let path = dir.join(name);
        if std::fs::symlink_metadata(&path).is_ok() {
            return Err(ToolsError::Exists { path });
        }
    }
    std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    let mut written = Vec::new();
    for (name, bytes) in found {
        let path = dir.join(&name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|source| match source.kind() {
                std::io::ErrorKind::AlreadyExists => ToolsError::Exists { path: path.clone() },
                _ => ToolsError::Io {
                    action: "create",
                    path: path.clone(),
                    source,
                },
            })?;
        std::io::Write::write_all(&mut file, &bytes).map_err(io("write", &path))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_folder_that_is_a_file_or_a_dangling_link_is_refused_saying_so() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        let said = check_export_folder(&file).unwrap_err().to_string();
        assert!(said.contains("is a file, not a folder"), "{said}");
        let said = check_export_folder(&dangling).unwrap_err().to_string();
        assert!(said.contains("is a link to nothing"), "{said}");
        assert!(check_export_folder(dir.path()).is_ok());
        assert!(check_export_folder(&dir.path().join("new")).is_ok());
    }

    /// A gzipped tar of `entries`: (path, contents, a symbolic link to this target instead).
    fn archive(entries: &[(&str, &[u8], Option<&str>)]) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        let encoder =
            flate2::write::GzEncoder::new(file.reopen().unwrap(), flate2::Compression::fast());
        let mut builder = tar::Builder::new(encoder);
        for (path, contents, link) in entries {
            let mut header = tar::Header::new_gnu();
            match link {
                Some(target) => {
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_size(0);
                    header.set_link_name(target).unwrap();
                }
                None => header.set_size(contents.len() as u64),
            }
            header.set_mode(0o644);
            // Written raw: `append_data` refuses `..`, which a hostile archive may hold.
            let name = header.as_old_mut().name.as_mut();
            name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_cksum();
            builder.append(&header, *contents).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap();
        file
    }

    #[test]
    fn only_the_adapter_files_are_written_and_only_inside_the_folder() {
        let file = archive(&[
            ("../adapter_config.json", b"{}", None),
            ("nested/adapter_model.safetensors", b"weights", None),
            ("evil.sh", b"rm -rf", None),
            ("link", b"", Some("/etc/passwd")),
        ]);
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("adapter");
        let written = extract_adapter(file.path(), &dir).unwrap();
        assert_eq!(
            written,
            [
                dir.join("adapter_config.json"),
                dir.join("adapter_model.safetensors")
            ]
        );
        let mut names: Vec<String> = std::fs::read_dir(out.path().join("adapter"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["adapter_config.json", "adapter_model.safetensors"]);
        assert!(!out.path().join("adapter_config.json").exists());

        // Again into the same folder: refused, and nothing is rewritten.
        std::fs::write(dir.join("adapter_model.safetensors"), b"mine").unwrap();
        std::fs::remove_file(dir.join("adapter_config.json")).unwrap();
        let again = extract_adapter(file.path(), &dir).unwrap_err();
        assert!(matches!(again, ToolsError::Exists { .. }), "{again}");
        assert!(!dir.join("adapter_config.json").exists());
        assert_eq!(
            std::fs::read(dir.join("adapter_model.safetensors")).unwrap(),
            b"mine"
        );
    }

    #[test]
    fn an_archive_without_an_adapter_is_refused() {
        let file = archive(&[("adapter_config.json", b"{}", None)]);
        let dir = tempfile::tempdir().unwrap();
        let error = extract_adapter(file.path(), &dir.path().join("out")).unwrap_err();
        assert!(
            error.to_string().contains("no adapter_model.safetensors"),
            "{error}"
        );
        assert!(!dir.path().join("out").exists());
        let garbage = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(garbage.path(), b"not gzip at all").unwrap();
        assert!(extract_adapter(garbage.path(), &dir.path().join("out")).is_err());
    }
}
