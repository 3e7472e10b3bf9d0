//! The tools of an agent's whole job beyond the original ones, as agents see them:
//! `rl_install_environment`, `rl_wait_training` (the way on from `rl_check_status`'s limit),
//! `rl_export_checkpoint` and `rl_stop_test`.

use serde_json::json;

use super::{ToolSpec, run_id_parameter};
use crate::limits::{MAX_WAIT_SECONDS, MIN_WAIT_SECONDS};

/// What `rl_wait_training` waits for when not told.
pub(crate) const DEFAULT_WAIT_SECONDS: f64 = 50.0;

pub(super) fn install_environment(name: &'static str) -> ToolSpec {
    ToolSpec {
        name,
        description: "Install what an environment needs before it can run, as `rl setup --env \
            NAME` does: an Atropos environment's imports into the run's Python (its \
            requirements.txt as pinned there, else its missing imports by name), a verifiers \
            environment's own Python (rl's pinned verifiers, then its package folder), or, \
            given `name==version`, a published package of the registry. What agents may \
            install is the operator's to say (`[agents] install` in config.toml: `folder`, \
            the default, allows the environments of the operator's folder; `published` also \
            packages of the registry; `none` nothing): a refusal names the setting. Two \
            installs of one environment wait for each other; installing what is there \
            installs nothing. Returns `environment`, `python`, `installed` (name==version), \
            `nothing_to_do`, `record` and `message`. Takes seconds to minutes (a progress \
            notification at each step when the client asked for them). Next: \
            rl_select_environment.",
        parameters: json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 200, "description": "An environment's name from rl_list_environments, or a published package as name==version"}
            },
            "required": ["name"],
            "additionalProperties": false
        }),
    }
}

pub(super) fn wait_training(name: &'static str) -> ToolSpec {
    ToolSpec {
        name,
        description: "Follow a run without polling: block until it logs a new step (`until`: \
            step, the default), changes state (change) or ends (finished), or until \
            `timeout_seconds` pass, then answer what rl_check_status answers (status, \
            metrics, accounting, health, events after `since`) with `waited` (`until`, \
            `reached`, `timed_out`, `seconds`). Not limited by rl_check_status's interval: \
            the wait paces itself. Sends a progress notification at each step when the \
            client asked for them. Keep `timeout_seconds` below the client's own request \
            timeout (60 s for many clients); a run that has ended answers at once. Next: \
            rl_wait_training again (with `since` = `next_since`) until `status` is an end, \
            then rl_get_results.",
        parameters: json!({
            "type": "object",
            "properties": {
                "run_id": run_id_parameter("The run to follow"),
                "until": {
                    "type": "string",
                    "enum": ["step", "change", "finished"],
                    "default": "step",
                    "description": "What ends the wait before its timeout: a new step logged (or any change of state), a change of state, or the run's end"
                },
                "timeout_seconds": {
                    "type": "number",
                    "minimum": MIN_WAIT_SECONDS,
                    "maximum": MAX_WAIT_SECONDS,
                    "default": DEFAULT_WAIT_SECONDS,
                    "description": "The longest this call blocks"
                },
                "since": {"type": "integer", "minimum": 0, "default": 0, "description": "Only events after this cursor (`next_since` of an earlier answer)"}
            },
            "required": ["run_id"],
            "additionalProperties": false
        }),
    }
}

pub(super) fn export_checkpoint(name: &'static str) -> ToolSpec {
    ToolSpec {
        name,
        description: "Hand a trained model over: write a finished run's checkpoint into a new \
            folder under the operator's exports folder (`<state dir>/exports`), as a PEFT \
            LoRA adapter (`adapter_model.safetensors`, `adapter_config.json`), or with \
            `merged` folded into its base model's weights as a Hugging Face model folder \
            (config, safetensors, tokenizer, a model card naming the run and its scores) \
            that transformers loads alone. Never writes over a folder. Returns `dir` (the \
            absolute folder to hand over), `files`, `base_model`, `load_with` (Python that \
            loads it) and `serve_with` (a command that serves it as an OpenAI-compatible \
            endpoint). A hosted run's adapter is downloaded from the Tinker service; a \
            merge needs the base model's folder on this machine (the local engine's is). \
            Takes seconds for an adapter; a merge reads and writes the whole model (minutes \
            for billions of parameters). Next: give `dir` to whoever asked for the model, \
            or rl_serve_checkpoint to try it here.",
        parameters: json!({
            "type": "object",
            "properties": {
                "run_id": run_id_parameter("The run whose checkpoint is exported"),
                "step": {"type": "string", "pattern": "^([0-9]+|best)$", "description": "A step with a saved state, or best (the one rl_list_checkpoints marks); default: the last saved state"},
                "merged": {"type": "boolean", "default": false, "description": "Fold the adapter into the base weights: a whole model folder instead of an adapter"},
                "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$", "description": "The new folder's name under the exports folder (default: RUN_ID-step-N, with -merged)"}
            },
            "required": ["run_id"],
            "additionalProperties": false
        }),
    }
}

pub(super) fn stop_test(name: &'static str) -> ToolSpec {
    ToolSpec {
        name,
        description: "Stop a running pre-flight or comparison (a test_id from rl_test_inference \
            or rl_compare_training), whichever process runs it: its models' processes end \
            and what it finished is kept. Returns `test_id`, `stopped` (false for a test that \
            had already ended), its `status` afterwards and a `message`. Takes up to a \
            minute (each model's processes get a grace period). Next: the test's tool with \
            {\"test_id\": ID} reads what it finished.",
        parameters: json!({
            "type": "object",
            "properties": {"test_id": {"type": "string", "pattern": "^[0-9a-f]{8}$", "description": "The test to stop"}},
            "required": ["test_id"],
            "additionalProperties": false
        }),
    }
}
