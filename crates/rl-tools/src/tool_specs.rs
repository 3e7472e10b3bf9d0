//! The `rl_*` tools as agents see them before calling: each tool's name, description and the
//! JSON Schema of its argument object. The registry calls them; error answers name them.

use serde_json::json;

use rl_preflight::{DEFAULT_GROUP_SIZE, DEFAULT_STEPS, MAX_GROUP_SIZE, MAX_MODELS, MAX_STEPS};

use crate::checkpoint_test_size::{DEFAULT_COMPARE_GROUP_SIZE, DEFAULT_COMPARE_PROMPTS};

mod handover;
mod sweeps;

pub(crate) use handover::DEFAULT_WAIT_SECONDS;

/// One tool as agents see it.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// JSON Schema of the argument object.
    pub parameters: serde_json::Value,
}

/// The tools by name; the spec and the call of each are exhaustive matches, so a tool cannot
/// be added without both. `ALL` must list it too, or no face can reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolName {
    ListEnvironments,
    InstallEnvironment,
    SelectEnvironment,
    GetCurrentConfig,
    EditConfig,
    StartTraining,
    CheckStatus,
    WaitTraining,
    StopTraining,
    ResumeTraining,
    ForkTraining,
    StartSweep,
    CheckSweep,
    StopSweep,
    GetResults,
    ListRuns,
    ListCheckpoints,
    TestInference,
    CompareTraining,
    StopTest,
    ExportCheckpoint,
    ServeCheckpoint,
    ListServed,
    StopServing,
    HealthCheck,
}

impl ToolName {
    /// In the order an agent meets them.
    const ALL: [Self; 25] = [
        Self::ListEnvironments,
        Self::InstallEnvironment,
        Self::SelectEnvironment,
        Self::GetCurrentConfig,
        Self::EditConfig,
        Self::StartTraining,
        Self::CheckStatus,
        Self::WaitTraining,
        Self::StopTraining,
        Self::ResumeTraining,
        Self::ForkTraining,
        Self::StartSweep,
        Self::CheckSweep,
        Self::StopSweep,
        Self::GetResults,
        Self::ListRuns,
        Self::ListCheckpoints,
        Self::TestInference,
        Self::CompareTraining,
        Self::StopTest,
        Self::ExportCheckpoint,
        Self::ServeCheckpoint,
        Self::ListServed,
        Self::StopServing,
        Self::HealthCheck,
    ];

    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::ListEnvironments => "rl_list_environments",
            Self::InstallEnvironment => "rl_install_environment",
            Self::SelectEnvironment => "rl_select_environment",
            Self::GetCurrentConfig => "rl_get_current_config",
            Self::EditConfig => "rl_edit_config",
            Self::StartTraining => "rl_start_training",
            Self::CheckStatus => "rl_check_status",
            Self::WaitTraining => "rl_wait_training",
            Self::StopTraining => "rl_stop_training",
            Self::ResumeTraining => "rl_resume_training",
            Self::ForkTraining => "rl_fork_training",
            Self::StartSweep => "rl_start_sweep",
            Self::CheckSweep => "rl_check_sweep",
            Self::StopSweep => "rl_stop_sweep",
            Self::GetResults => "rl_get_results",
            Self::ListRuns => "rl_list_runs",
            Self::ListCheckpoints => "rl_list_checkpoints",
            Self::TestInference => "rl_test_inference",
            Self::CompareTraining => "rl_compare_training",
            Self::StopTest => "rl_stop_test",
            Self::ExportCheckpoint => "rl_export_checkpoint",
            Self::ServeCheckpoint => "rl_serve_checkpoint",
            Self::ListServed => "rl_list_served",
            Self::StopServing => "rl_stop_serving",
            Self::HealthCheck => "rl_health_check",
        }
    }

    pub(crate) fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }
}

/// Every tool's name, in the order an agent meets them.
pub const TOOL_NAMES: [&str; ToolName::ALL.len()] = {
    let mut names = [""; ToolName::ALL.len()];
    let mut index = 0;
    while index < names.len() {
        names[index] = ToolName::ALL[index].name();
        index += 1;
    }
    names
};

fn no_parameters() -> serde_json::Value {
    json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
}

/// A run's own caps, each optional (`Caps`): the run ends `capped` before a step that would
/// pass one.
fn caps_parameters() -> serde_json::Value {
    json!({
        "max_cost": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "End the run before a step that would bring its cost past this, in the operator's currency (needs a price in the operator's [prices])"
        },
        "max_tokens": {
            "type": "integer",
            "minimum": 1,
            "description": "End the run before a step that would bring its prompt, sampled and trained tokens together past this"
        },
        "max_hours": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "End the run before a step that would end more than this many hours after its trainer started"
        }
    })
}

fn run_id_parameter(what: &str) -> serde_json::Value {
    json!({"type": "string", "description": what, "pattern": "^[0-9a-f]{8}$"})
}

/// Every tool, in the order an agent meets them.
pub fn specs() -> Vec<ToolSpec> {
    ToolName::ALL.into_iter().map(ToolName::spec).collect()
}

/// The tool named `name`, if there is one.
pub fn spec(name: &str) -> Option<ToolSpec> {
    ToolName::named(name).map(ToolName::spec)
}

impl ToolName {
    fn spec(self) -> ToolSpec {
        match self {
            Self::ListEnvironments => ToolSpec {
                name: self.name(),
                description: "List the RL environments found in the environments folder, read \
                    without running them: Atropos environments (classes derived from \
                    atroposlib's BaseEnv) and verifiers environments (v1 tasksets, v0 modules \
                    with load_environment). Use it first, to pick an environment. Returns `environments` (each with `name` to pass to \
                    rl_select_environment, `class_name`, `file_path`, `description`, `config_class`, \
                    `runnable`, `kind`, `python`: the Python it runs in, null with \
                    `install_first` when it has none yet), `count`, `tips`, and the files that could not be read; \
                    `unlisted_in_subfolders` counts those only `recursive` lists (selecting one by \
                    name works either way). Takes a second or two (files are parsed, not run). \
                    Next: rl_select_environment (rl_install_environment first when a run would \
                    be refused for what its Python lacks).",
                parameters: json!({
                    "type": "object",
                    "properties": {"recursive": {"type": "boolean", "description": "Also list the environments in the folder's sub-folders (default false: its top level, as the original tool did)"}},
                    "required": [],
                    "additionalProperties": false
                }),
            },
            Self::SelectEnvironment => ToolSpec {
                name: self.name(),
                description: "Select the environment to configure and train; the choice is saved and \
                    replaces the previous selection and its edits. Returns the environment's \
                    `file_path` (read it to see how it loads data and scores answers), its config \
                    class, its number of fields, the locked fields and the WandB run name it will \
                    use. An unknown name is an error listing the names that exist. Takes a second or \
                    two. Next: rl_get_current_config.",
                parameters: json!({
                    "type": "object",
                    "properties": {"name": {"type": "string", "description": "An environment's name from rl_list_environments (or its key, `name@file.py`, where names repeat)"}},
                    "required": ["name"],
                    "additionalProperties": false
                }),
            },
            Self::GetCurrentConfig => ToolSpec {
                name: self.name(),
                description: "Show the next run's whole configuration: every field of the selected \
                    environment's configuration and every trainer setting, with the value a run \
                    would use now and where it comes from. Returns `configurable_fields` (name, \
                    type, default, current_value, `origin`, description, allowed values), \
                    `locked_fields` (set by the operator, with `locked_value`) and \
                    `trainer_settings` (name, current_value, `origin`: locked, edited, \
                    trainer_default or engine_default, `editable`). Takes a second or two. Next: rl_edit_config for \
                    what to change, then rl_test_inference.",
                parameters: no_parameters(),
            },
            Self::EditConfig => ToolSpec {
                name: self.name(),
                description: "Set one configuration field of the selected environment for the next \
                    run. The value is checked against the field's type, range and allowed values \
                    (\"16\" is read as 16 for an integer field); locked fields are refused. Also \
                    accepts `wandb_project` and the trainer keys a run chooses (`learning_rate`, \
                    `loss`, `clip_low`, `clip_high`, `advantage_norm`, `truncated`, ...). Returns the new and previous value and the whole \
                    configuration; a refused edit changes nothing and says what is allowed. Takes a \
                    second or two. Next: more edits, rl_test_inference, or rl_start_training.",
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "field": {"type": "string", "description": "A field name from rl_get_current_config"},
                        "value": {"description": "The new value: a number, string, boolean, list or null, as the field's type allows"}
                    },
                    "required": ["field", "value"],
                    "additionalProperties": false
                }),
            },
            Self::StartTraining => ToolSpec {
                name: self.name(),
                description: "Start a training run of the selected environment with its current \
                    configuration: the run API, rl's Tinker trainer on the engine the operator \
                    configured (the local engine needs no key; the hosted Tinker service needs \
                    TINKER_API_KEY) and the environment, on free local ports. Returns at once \
                    with `run_id`, `status` (starting), the run's config file, WandB names and \
                    log paths; the run goes on in the background and survives this call. Optional caps end the run `capped` (its state saved; rl_resume_training \
                    continues it) before a step that would pass them: `max_cost` (needs a price in \
                    the operator's [prices]), `max_tokens`, `max_hours`; the operator's own caps \
                    ([caps]) apply too and may not be raised. The answer shows the run's `caps` and \
                    `prices`. Answers in seconds; the run takes minutes (a small model on the local \
                    engine) to hours: next, rl_wait_training to follow it to its end.",
                parameters: json!({
                    "type": "object",
                    "properties": caps_parameters(),
                    "required": [],
                    "additionalProperties": false
                }),
            },
            Self::CheckStatus => ToolSpec {
                name: self.name(),
                description: "A run's state and latest training numbers. Returns `status` (starting, \
                    running, stopping, stopped, completed, capped (ended before a step that \
                    would pass a cap: rl_resume_training continues it), failed, lost), each \
                    process's state, log paths, `metrics` (step, reward_mean, loss, percent_correct, \
                    eval_percent_correct, ... each null until logged), `accounting` (tokens, \
                    throughput, each part of a step's share of the time, the bottleneck, cost so \
                    far and at completion when priced), a health digest with warning signs (a \
                    `stalled` flag names the `component` busy or waiting: environment, api, \
                    engine, evaluation, trainer), and the run's events. Agents may check one run \
                    once per interval set by \
                    the operator (30 minutes unless changed) while it goes on; an earlier call \
                    answers `rate_limited` with the time left; a run that has ended answers \
                    without limit. Takes seconds. Next: rl_wait_training to follow it without \
                    polling, rl_stop_training if it looks wrong, rl_get_results once it has \
                    ended.",
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "run_id": run_id_parameter("The run id from rl_start_training or rl_list_runs"),
                        "since": {"type": "integer", "minimum": 0, "default": 0, "description": "Only events after this cursor (`next_since` of an earlier answer)"}
                    },
                    "required": ["run_id"],
                    "additionalProperties": false
                }),
            },
            Self::StopTraining => ToolSpec {
                name: self.name(),
                description: "Stop a run: the environment, the trainer and the API, each with all its \
                    child processes. Use it when metrics look wrong or flat, or to try other \
                    settings. Returns `message`, the run's `status` afterwards and whether anything \
                    was stopped (a run that has already ended is left as it is). Takes up to a minute \
                    (each process gets a grace period). Next: rl_get_results, or \
                    rl_resume_training.",
                parameters: json!({
                    "type": "object",
                    "properties": {"run_id": run_id_parameter("The run to stop")},
                    "required": ["run_id"],
                    "additionalProperties": false
                }),
            },
            Self::ResumeTraining => ToolSpec {
                name: self.name(),
                description: "Continue a stopped, failed, lost or capped run from its last saved training \
                    state (weights and optimizer), as a new run: same config and WandB group, \
                    steps, metrics and checkpoints numbered on from the parent's. With `steps` \
                    (N more steps), an extension: its total_steps is the parent's plus N, and a \
                    completed run continues from its final state. Returns the new run as \
                    rl_start_training does, with `resumed_from` (the parent, the step it \
                    continues after, `kind`: resume or extension, and `changes`). Refused, with \
                    the reason, when the run is still going, completed (without `steps`), saved \
                    no state, or its environment file changed since (pass `allow_changes` to \
                    continue anyway). The new run has the operator's prices as they are now and \
                    the caps given here (with the operator's): a capped parent's caps are not \
                    carried over. Answers in seconds: next, rl_wait_training to follow the new \
                    run.",
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "run_id": run_id_parameter("The run to continue"),
                        "allow_changes": {
                            "type": "boolean",
                            "default": false,
                            "description": "Resume even though the environment's file changed since the run started"
                        },
                        "steps": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": crate::limits::MAX_EXTRA_STEPS,
                            "description": "Train this many steps more than the run's total_steps (an extension; needed for a completed run)"
                        },
                        "max_cost": caps_parameters()["max_cost"],
                        "max_tokens": caps_parameters()["max_tokens"],
                        "max_hours": caps_parameters()["max_hours"]
                    },
                    "required": ["run_id"],
                    "additionalProperties": false
                }),
            },
            Self::ForkTraining => ToolSpec {
                name: self.name(),
                description: "Start a new run from a run's training state saved at `step` (weights \
                    and optimizer), with `settings` changed: a branch to try another learning \
                    rate or environment setting from a point the run reached. The parent may be \
                    going, ended or completed; it is left as it is. `settings` maps a field to \
                    its value: the fields of the run's environment (checked as rl_edit_config \
                    checks them; the operator's locked ones refused) and the trainer keys a run \
                    chooses (learning_rate, max_token_trainer_length, save_every, keep_rollouts, \
                    eval_every, eval_prompts, eval_group_size; the algorithm: loss, clip_low, \
                    clip_high, dro_beta, advantage_norm, truncated, overlong_band, kl_coef, \
                    log_kl_base, max_steps_off_policy); the base model and lora_rank are \
                    fixed by the saved state and refused. Its steps, metrics and checkpoints \
                    continue from step+1, in the parent's WandB group under its own name. \
                    Returns the new run as rl_start_training does, with `resumed_from` (the \
                    parent, the step, `kind` fork, `changes`). Refused, with the reason and \
                    nothing started, for a step without a saved state (the answer lists the \
                    steps that have one: rl_list_checkpoints shows them too), a setting that \
                    cannot change, or an environment file changed since (pass `allow_changes`). \
                    Caps as rl_start_training's. Answers in seconds; next, rl_wait_training to \
                    follow the new run.",
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "run_id": run_id_parameter("The run to fork"),
                        "step": {
                            "type": "integer",
                            "minimum": 0,
                            "description": "The step whose saved training state the new run continues from (its first step is the next)"
                        },
                        "settings": {
                            "type": "object",
                            "maxProperties": crate::limits::MAX_FORK_SETTINGS,
                            "additionalProperties": {"type": ["string", "number", "boolean"]},
                            "description": "Field → value the new run changes, e.g. {\"learning_rate\": 1e-5}; a string is read as the field's type"
                        },
                        "allow_changes": {
                            "type": "boolean",
                            "default": false,
                            "description": "Fork even though the environment's file changed since the run started"
                        },
                        "max_cost": caps_parameters()["max_cost"],
                        "max_tokens": caps_parameters()["max_tokens"],
                        "max_hours": caps_parameters()["max_hours"]
                    },
                    "required": ["run_id", "step"],
                    "additionalProperties": false
                }),
            },
            Self::InstallEnvironment => handover::install_environment(self.name()),
            Self::WaitTraining => handover::wait_training(self.name()),
            Self::StopTest => handover::stop_test(self.name()),
            Self::ExportCheckpoint => handover::export_checkpoint(self.name()),
            Self::StartSweep => sweeps::start_sweep(self.name(), &caps_parameters()),
            Self::CheckSweep => sweeps::check_sweep(self.name()),
            Self::StopSweep => sweeps::stop_sweep(self.name()),
            Self::GetResults => ToolSpec {
                name: self.name(),
                description: "A run's results so far or final: `metrics` (latest numbers), \
                    `final_metrics` (the trainer's last value of every logged key), `history` \
                    (every step), `final_weights` (the tinker:// path, once the trainer reports \
                    it), checkpoints, a health digest and WandB links. Read from the run's folder \
                    first, WandB's API only when needed. Takes seconds (longer when WandB must be \
                    asked). Next: rl_compare_training to see whether training helped, \
                    rl_export_checkpoint to hand the model over.",
                parameters: json!({
                    "type": "object",
                    "properties": {"run_id": run_id_parameter("The run to read")},
                    "required": ["run_id"],
                    "additionalProperties": false
                }),
            },
            Self::ListRuns => ToolSpec {
                name: self.name(),
                description: "List every training run this machine knows, newest first, running or \
                    ended, with `run_id`, `environment`, `status` and the WandB run name. Returns \
                    `runs` and `count`. Takes a second. Next: rl_check_status or rl_get_results of \
                    one.",
                parameters: no_parameters(),
            },
            Self::ListCheckpoints => ToolSpec {
                name: self.name(),
                description: "List what a run saved (or every run, without `run_id`): each \
                    checkpoint's `step`, `name`, `sampler_path` (what sampling loads), \
                    `state_path` (what resuming loads), `time`, `size_bytes` on the local engine, \
                    `expires_at` where known, whether it is the `best` (of the checkpoints with a \
                    saved state not pruned, the top `best_by`: the held-out `eval/mean_score` \
                    when the run evaluated during training, else `reward/mean` at its step; the \
                    one run:ID@best and rl_compare_training's step best take) and whether it is \
                    the `resume_point` rl_resume_training would load. Returns `runs` (each with \
                    `best_step` and `resume_step`) and `count`. Takes a second. Next: \
                    rl_compare_training with a step, or rl_resume_training.",
                parameters: json!({
                    "type": "object",
                    "properties": {"run_id": run_id_parameter("Only this run's checkpoints")},
                    "required": [],
                    "additionalProperties": false
                }),
            },
            Self::TestInference => ToolSpec {
                name: self.name(),
                description: "Pre-flight the selected environment before training: run it (an \
                    Atropos environment in atroposlib's process mode, a verifiers one through \
                    its own rollouts) against several models (num_steps groups of \
                    group_size completions each, models at once) on the operator's inference \
                    endpoint (OpenRouter unless configured; needs its key). The test takes \
                    minutes, so this call answers within seconds with `test_id`, `status` \
                    (running), `estimated_seconds` and `poll_after_seconds`; the test goes on by \
                    itself, whatever happens to this session, and the same request while it runs \
                    answers the same `test_id` (`started` false). Next: call rl_test_inference \
                    with {\"test_id\": ID} every poll_after_seconds: while it runs it answers \
                    its progress (models and groups done); once it has ended, per model the \
                    accuracy, steps with a correct answer, zero-variance groups and errors with \
                    their log, and a `summary` with a verdict (ready, too easy, too hard, no \
                    signal, broken) explaining whether training can learn from it. `wait`: true \
                    blocks until then instead; rl_stop_test stops it.",
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "num_steps": {"type": "integer", "minimum": 1, "maximum": MAX_STEPS, "default": DEFAULT_STEPS, "description": "Groups per model"},
                        "group_size": {"type": "integer", "minimum": 1, "maximum": MAX_GROUP_SIZE, "default": DEFAULT_GROUP_SIZE, "description": "Completions per group, as in training"},
                        "models": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_MODELS, "description": "Model ids as the endpoint names them (default: the operator's list, else qwen/qwen3-8b, z-ai/glm-4.7-flash, minimax/minimax-m2.7); or a run's checkpoints: run:RUN_ID (its last saved state), run:RUN_ID@STEP, run:RUN_ID@best, run:RUN_ID@base (its base model); a finished local-engine run's are served by rl, a hosted run's by Tinker's OpenAI-compatible endpoint (TINKER_API_KEY); or base alone: the base model the next run trains, before any run (on the local engine through an engine rl starts for the test and stops after; on a Tinker service at its OpenAI-compatible endpoint)"},
                        "base_url": {"type": "string", "maxLength": 2000, "pattern": "^https?://", "description": "Another OpenAI-compatible endpoint to test `models` on (a server of your own, or one rl_serve_checkpoint started): asked with no key, whatever the operator configured; default: the operator's endpoint, with its key"},
                        "wait": {"type": "boolean", "description": "Block until the test has ended and answer in full (for a client that waits minutes); default false over MCP, true over HTTP and `rl tool call`"},
                        "test_id": {"type": "string", "pattern": "^[0-9a-f]{8}$", "description": "Follow a test started earlier: its progress while it runs, its full answer once it has ended (give it alone)"}
                    },
                    "required": [],
                    "additionalProperties": false
                }),
            },
            Self::CompareTraining => ToolSpec {
                name: self.name(),
                description: "Did training help? Run the pre-flight of a run's environment (as \
                    the run recorded it, whatever is selected now) against its base model and a \
                    trained checkpoint, both sampled through the run's engine (a finished \
                    local-engine run's, started again; a hosted run's at Tinker's endpoint), on \
                    the same prompts: the items the run kept out of training, each once. The \
                    test takes minutes, so this call answers within seconds with `test_id`, \
                    `status` (running), `estimated_seconds` and `poll_after_seconds`; the test \
                    goes on by itself, and the same request while it runs answers the same \
                    `test_id`. Next: call rl_compare_training with {\"test_id\": ID} every \
                    poll_after_seconds: while it runs it answers its progress; once it has \
                    ended, `prompt_source` and `kept_out_of_training` (a gain on trained prompts \
                    may be memory, not skill), each model's `mean_score`, `percent_correct`, \
                    `pass_at_1`, `pass_at_n` and `best_of_n` (`n`: the completions per prompt) \
                    with 95% confidence intervals (`low`, `high`; null when too few prompts bound \
                    them), the `measure` the verdict rests on (`mean_score` unless asked), its \
                    `difference` (trained minus base), a `verdict` (better, no detectable \
                    difference, worse), an `explanation` saying how many prompts and completions \
                    it rests on, the `step` compared and, for step best, `best_by`; a failed side carries its `error` and its log's last lines. \
                    `wait`: true blocks until then instead; rl_stop_test stops it.",
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "run_id": run_id_parameter("The run whose checkpoint is compared (not needed with test_id)"),
                        "step": {"type": "string", "pattern": "^([0-9]+|best)$", "description": "The trained checkpoint: a step with a saved state, or best (the one rl_list_checkpoints marks best; default: the last saved state)"},
                        "num_steps": {"type": "integer", "minimum": 1, "maximum": MAX_STEPS, "default": DEFAULT_COMPARE_PROMPTS, "description": "Prompts (groups) per model"},
                        "group_size": {"type": "integer", "minimum": 1, "maximum": MAX_GROUP_SIZE, "default": DEFAULT_COMPARE_GROUP_SIZE, "description": "Completions per prompt"},
                        "measure": {"type": "string", "enum": rl_preflight::Measure::names(), "default": "mean_score", "description": "What the verdict rests on: the mean score, pass@1 (the chance one completion is correct), pass@n (that one of the group's n is) or best_of_n (the expected best score of n); every one is reported either way"},
                        "wait": {"type": "boolean", "description": "Block until the test has ended and answer in full (for a client that waits minutes); default false over MCP, true over HTTP and `rl tool call`"},
                        "test_id": {"type": "string", "pattern": "^[0-9a-f]{8}$", "description": "Follow a test started earlier: its progress while it runs, its full answer once it has ended (give it alone)"}
                    },
                    "required": [],
                    "additionalProperties": false
                }),
            },
            Self::ServeCheckpoint => ToolSpec {
                name: self.name(),
                description: "Serve a finished run's checkpoint as an OpenAI-compatible endpoint \
                    on this machine's loopback (`/v1/models`, `/v1/chat/completions` with \
                    streaming, n, temperature, max_tokens, stop and logprobs, \
                    `/v1/completions`), to point an agent or an eval harness at. A local-engine \
                    run's is served by rl from a process of its own, started again on the run's \
                    engine: this call answers within seconds with `serve_id`, `state` \
                    (`starting`; loading takes tens of seconds on a CPU), `base_url`, the \
                    `models` a request names (`run:ID@STEP`, and `run:ID@base` with `with_base`) \
                    and `poll_after_seconds`; call rl_list_served until its state is `ready`. \
                    Any API key is accepted. It serves until rl_stop_serving. A hosted run's \
                    checkpoints are served by Tinker itself: the answer is its `base_url`, each \
                    model's sampler path and the `key_variable` to send (never the key).",
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "run_id": run_id_parameter("The run whose checkpoint is served"),
                        "step": {"type": "string", "pattern": "^([0-9]+|best|base)$", "description": "A step with a saved state, best (the one rl_list_checkpoints marks), or base (the base model alone); default: the last saved state"},
                        "with_base": {"type": "boolean", "description": "Also serve the base model, as run:ID@base, from the same server (default false)"},
                        "port": {"type": "integer", "minimum": 1024, "maximum": 65535, "description": "The loopback port (default: a free one)"}
                    },
                    "required": ["run_id"],
                    "additionalProperties": false
                }),
            },
            Self::ListServed => ToolSpec {
                name: self.name(),
                description: "List the checkpoints served now (rl_serve_checkpoint): each \
                    server's `serve_id`, `state` (`starting` or `ready`), `base_url`, `models`, \
                    `run_id`, `started_at`. Returns `served` and `count`. Takes a second. Next: \
                    point a client at a ready one, or rl_stop_serving.",
                parameters: no_parameters(),
            },
            Self::StopServing => ToolSpec {
                name: self.name(),
                description: "Stop a served checkpoint (rl_list_served lists their ids): its \
                    server and engine end, its port closes. Returns `serve_id`, `models` and \
                    `ended_by` (`owner`, or `forced` when its rl process did not answer). \
                    Takes up to 20 s.",
                parameters: json!({
                    "type": "object",
                    "properties": {"serve_id": {"type": "string", "pattern": "^[0-9a-f]{8}$", "description": "The server to stop"}},
                    "required": ["serve_id"],
                    "additionalProperties": false
                }),
            },
            Self::HealthCheck => ToolSpec {
                name: self.name(),
                description: "Check what training needs on this machine: the operator's settings \
                    readable, Python 3.11 or newer, atroposlib importable (and its version), the \
                    environments folder and its environments, the keys the configured engine and \
                    endpoints need present (never their values), a writable state directory. \
                    Returns `healthy` and each check with what was found and the fix when it is \
                    missing. Takes a few seconds. Next: fix what it names, then \
                    rl_list_environments.",
                parameters: no_parameters(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_leads_back_to_its_tool() {
        for tool in ToolName::ALL {
            assert_eq!(ToolName::named(tool.name()), Some(tool));
        }
        let distinct: std::collections::BTreeSet<_> = TOOL_NAMES.iter().collect();
        assert_eq!(distinct.len(), TOOL_NAMES.len());
        assert_eq!(ToolName::named("rl_no_such_tool"), None);
    }
}
