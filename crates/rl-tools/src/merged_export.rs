//! `rl checkpoints export RUN STEP DIR --merged`: the checkpoint's LoRA adapter folded into its
//! base model's weights, a Hugging Face model folder with a model card naming the run, its
//! environment, the step and its scores. The adapter is exported as for a plain export (from
//! the run's engine folder, or from the Tinker service for a hosted run); the folding is
//! `rl_trainer.merge`, in the operator's Python, on the base model's own folder: the local
//! engine's base model, or the folder `--base-dir` names (a hosted run's base is a name).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::answers::MergedExport;
use crate::{Tools, ToolsError};
use rl_metrics::{EVAL_MEAN_SCORE, EVAL_PASS_AT_N, REWARD_MEAN, read_metrics_file};
use rl_settings::{RunFolder, RunId, run_dir};

const MERGE_MODULE: &str = "rl_trainer.merge";
/// The end of the merge's error output quoted in a refusal.
const QUOTED_LINES: usize = 8;

impl Tools {
    /// Writes run `id`'s checkpoint at `step`, merged into its base weights, as the new folder
    /// `dir`; `base_dir` is the base model's folder (default: the run's base model, when that
    /// is a folder on this machine).
    pub fn export_merged(
        &self,
        id: &RunId,
        step: i64,
        dir: &Path,
        base_dir: Option<&Path>,
    ) -> Result<MergedExport, ToolsError> {
        if std::fs::symlink_metadata(dir).is_ok() {
            return Err(ToolsError::invalid(
                "folder",
                format!(
                    "{} exists: a merged model is written as a new folder, never over one",
                    dir.display()
                ),
            ));
        }
        let staging =
            run_dir(self.home(), id).join(format!("merge-adapter-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        let result = self.merge_through(id, step, dir, base_dir, &staging);
        let _ = std::fs::remove_dir_all(&staging);
        result
    }

    fn merge_through(
        &self,
        id: &RunId,
        step: i64,
        dir: &Path,
        base_dir: Option<&Path>,
        staging: &Path,
    ) -> Result<MergedExport, ToolsError> {
        let exported = self.export_checkpoint(id, step, &staging.join("adapter"))?;
        let base_dir = match base_dir {
            Some(given) => given.to_owned(),
            None => exported
                .base_model
                .as_deref()
                .map(PathBuf::from)
                .filter(|path| path.is_dir())
                .ok_or_else(|| {
                    ToolsError::invalid(
                        "base_dir",
                        format!(
                            "the run's base model ({}) is not a folder on this machine: name the \
                             base model's Hugging Face folder with --base-dir",
                            exported.base_model.as_deref().unwrap_or("not recorded")
                        ),
                    )
                })?,
        };
        if !base_dir.join("config.json").is_file() {
            return Err(ToolsError::invalid(
                "base_dir",
                format!(
                    "{} has no config.json: it is not a Hugging Face model folder",
                    base_dir.display()
                ),
            ));
        }
        let card = staging.join("README.md");
        rl_settings::write_atomically(&card, self.model_card(id, step, &base_dir).as_bytes())?;
        let settings = self.settings()?;
        let programs = rl_python::install(self.home()).map_err(|error| {
            ToolsError::Internal(format!("cannot write rl's Python programs: {error}"))
        })?;
        let path_text = |path: &Path| path.display().to_string();
        let launch = rl_python::PythonLauncher::new(&programs, &settings.child_environment).module(
            &settings.python,
            MERGE_MODULE,
            vec![
                "--base".to_owned(),
                path_text(&base_dir),
                "--adapter".to_owned(),
                path_text(&staging.join("adapter")),
                "--out".to_owned(),
                path_text(dir),
                "--card".to_owned(),
                path_text(&card),
            ],
            rl_python::Imports::WithOperators,
        );
        let mut command = std::process::Command::new(&launch.program);
        command
            .args(&launch.args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        rl_settings::withhold(&mut command, &[]);
        let output = command.output().map_err(|source| ToolsError::Io {
            action: "cannot start",
            path: launch.program.clone(),
            source,
        })?;
        if !output.status.success() {
            let said = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = said.lines().rev().take(QUOTED_LINES).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(ToolsError::Internal(format!(
                "the merge failed ({}): {}",
                output.status,
                tail.join("\n")
            )));
        }
        let answer: serde_json::Value = serde_json::from_slice(&output.stdout)
            .map_err(|error| ToolsError::Internal(format!("the merge's answer: {error}")))?;
        let files = answer["files"]
            .as_array()
            .map(|files| {
                files
                    .iter()
                    .filter_map(|file| file.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        Ok(MergedExport {
            run_id: id.to_string(),
            step,
            dir: dir.to_owned(),
            files,
            base_dir,
            load_with: format!(
                "from transformers import AutoModelForCausalLM, AutoTokenizer\n\
                 model = AutoModelForCausalLM.from_pretrained({:?})\n\
                 tokenizer = AutoTokenizer.from_pretrained({:?})",
                path_text(dir),
                path_text(dir)
            ),
        })
    }

    /// The merged folder's README.md: what it is, where it comes from, what it scored.
    fn model_card(&self, id: &RunId, step: i64, base_dir: &Path) -> String {
        let run = self.run_status(id, i64::MAX).map(|status| status.run).ok();
        let environment = run
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), |run| run.environment.clone());
        let rows = read_metrics_file(&RunFolder::at(run_dir(self.home(), id)).metrics())
            .ok()
            .and_then(|read| read.trainer)
            .map(|trainer| trainer.history)
            .unwrap_or_default();
        let at_step = rows.iter().rev().find(|row| row.step == step);
        let figure = |key: &str| {
            at_step
                .and_then(|row| row.number(key))
                .map_or_else(|| "not logged".to_owned(), |value| format!("{value:.4}"))
        };
        format!(
            "---\nlibrary_name: transformers\ntags:\n- rl\n- lora-merged\n---\n\n\
             # {id} at step {step}\n\n\
             A LoRA checkpoint trained by `rl` (run `{id}`, environment `{environment}`), merged \
             into its base model's weights (`{}`).\n\n\
             | at step {step} | |\n|---|---|\n\
             | `reward/mean` | {} |\n| `eval/mean_score` (held out) | {} |\n\
             | `eval/pass_at_n` (held out) | {} |\n",
            base_dir.display(),
            figure(REWARD_MEAN),
            figure(EVAL_MEAN_SCORE),
            figure(EVAL_PASS_AT_N),
        )
    }
}
