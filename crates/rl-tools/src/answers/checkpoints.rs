//! `rl_list_checkpoints` and `rl checkpoints export`: what a run saved, which of it a resume
//! needs and which did best, and an exported adapter.

use std::path::PathBuf;

use serde::Serialize;

/// `rl_list_checkpoints`: one entry per run asked for.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointList {
    pub runs: Vec<RunCheckpoints>,
    pub count: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunCheckpoints {
    pub run_id: String,
    pub environment: String,
    /// The run's state: starting, running, stopping, stopped, completed, failed or lost.
    pub status: &'static str,
    pub checkpoints: Vec<CheckpointEntry>,
    /// The step of the best checkpoint: of those with a saved state not pruned (what a
    /// comparison or a resume can load), the one with the top `best_by` score; the one
    /// `run:ID@best` and `rl compare --step best` take. `null` when none has both.
    pub best_step: Option<i64>,
    /// `eval/mean_score` when the run was evaluated on held-out prompts during training
    /// (`eval_every`), else `reward/mean` at the checkpoint's step (the training batch's).
    pub best_by: &'static str,
    /// Where `rl_resume_training` would continue from, when the run can be resumed.
    pub resume_step: Option<u64>,
    /// Lines of `checkpoints.jsonl` that could not be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

// Each flag is a JSON key of the answer agents read, not a state machine in disguise.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointEntry {
    pub step: Option<i64>,
    /// `step_<n>` or `final`, as the trainer named it.
    pub name: Option<String>,
    /// What sampling loads (`tinker://…`).
    pub sampler_path: String,
    /// What resuming loads: weights and optimizer state (`null`: none was saved).
    pub state_path: Option<String>,
    /// When it was saved (RFC 3339).
    pub time: Option<String>,
    /// Bytes of the sampler weights and state: on disk on the local engine, as the hosted
    /// Tinker reports them when one run is listed; `null` when unknown.
    pub size_bytes: Option<u64>,
    /// When the hosted Tinker deletes it (the earlier of its weights' and state's expiry), as
    /// it reports it when one run is listed; `null` when unknown or never.
    pub expires_at: Option<String>,
    /// It is the run's `best_step`.
    pub best: bool,
    /// A resume of this run would load this checkpoint's state.
    pub resume_point: bool,
    /// Its files were deleted by `rl checkpoints prune`; its record stays.
    pub pruned: bool,
    /// Its saved state's files are gone from the run's engine folder though nothing pruned
    /// them (a resume passes over it).
    pub state_missing: bool,
}

/// `rl checkpoints prune`: what the operator's policy kept and deleted of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Pruned {
    pub run_id: String,
    /// `[checkpoints] keep_last` (0: every checkpoint is kept).
    pub keep_last: u32,
    /// Steps kept: the last `keep_last`, the best, the final weights, the resume point.
    pub kept: Vec<i64>,
    /// Steps whose files were deleted now.
    pub removed: Vec<i64>,
    pub freed_bytes: u64,
    /// Steps not on this machine (the hosted Tinker's), left as they are.
    pub not_local: Vec<i64>,
    pub message: String,
}

/// `rl checkpoints export`: a PEFT LoRA adapter folder.
#[derive(Debug, Clone, Serialize)]
pub struct Exported {
    pub run_id: String,
    pub step: i64,
    pub sampler_path: String,
    pub dir: PathBuf,
    pub files: Vec<PathBuf>,
    pub base_model: Option<String>,
    /// Python that loads it with transformers and PEFT.
    pub load_with: String,
}

/// `rl checkpoints keep`: a hosted checkpoint's new expiry.
#[derive(Debug, Clone, Serialize)]
pub struct Kept {
    pub run_id: String,
    pub step: i64,
    /// Its sampler weights and, when the step saved one, its state.
    pub paths: Vec<String>,
    /// Seconds from now until it expires; `null`: it no longer expires.
    pub ttl_seconds: Option<u64>,
    pub message: String,
}

/// What `--merged` wrote.
#[derive(Debug, Clone, Serialize)]
pub struct MergedExport {
    pub run_id: String,
    pub step: i64,
    pub dir: PathBuf,
    pub files: Vec<String>,
    /// The folder whose weights the adapter was folded into.
    pub base_dir: PathBuf,
    /// Python that loads it with transformers.
    pub load_with: String,
}

/// `rl_export_checkpoint`: a trained model handed over as a folder of the exports folder.
#[derive(Debug, Clone, Serialize)]
pub struct Handover {
    pub run_id: String,
    pub step: i64,
    /// What made the step the best, when `best` was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_by: Option<&'static str>,
    /// A whole model folder (true) or a PEFT adapter (false).
    pub merged: bool,
    /// The absolute folder to hand over.
    pub dir: PathBuf,
    /// The files in it, by name.
    pub files: Vec<String>,
    /// The base model a PEFT adapter loads over (a merged folder needs none).
    pub base_model: Option<String>,
    /// Python that loads it.
    pub load_with: String,
    /// A command that serves it as an OpenAI-compatible endpoint.
    pub serve_with: String,
    pub message: String,
}
