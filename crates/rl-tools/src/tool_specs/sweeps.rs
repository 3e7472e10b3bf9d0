//! The sweep tools as agents see them.

use serde_json::json;

use super::ToolSpec;
use crate::limits::{MAX_SWEEP_POINTS, MAX_SWEEP_SETTINGS, MAX_SWEEP_VALUES};

fn sweep_id_parameter(what: &str) -> serde_json::Value {
    json!({"type": "string", "description": what, "pattern": "^sw-[0-9a-f]{8}$"})
}

pub(super) fn start_sweep(name: &'static str, caps: &serde_json::Value) -> ToolSpec {
    ToolSpec {
        name,
        description: "Train several settings of the selected environment at once: every \
            combination of the values given (a grid), each an ordinary run grouped under a \
            sweep id, at most `max_parallel` going at once (within the operator's \
            max_active_runs), the rest queued and started as places free up (the queue \
            survives rl exiting). `settings` maps a field to its values: the environment's \
            fields (checked as rl_edit_config checks them) and the trainer keys a run chooses \
            (learning_rate, lora_rank, max_token_trainer_length, save_every, keep_rollouts, \
            eval_every, eval_prompts, eval_group_size; the algorithm: loss, clip_low, clip_high, \
            dro_beta, advantage_norm, truncated, overlong_band, kl_coef, log_kl_base, \
            max_steps_off_policy). Every point \
            is checked before anything \
            starts: a locked field, an unknown one or a bad value is refused with the reason \
            and nothing starts. Returns `sweep_id`, `message` and the sweep's table. Answers in \
            seconds; the runs take hours: next, rl_check_sweep now and then.",
        parameters: json!({
            "type": "object",
            "properties": {
                "settings": {
                    "type": "object",
                    "minProperties": 1,
                    "maxProperties": MAX_SWEEP_SETTINGS,
                    "additionalProperties": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_SWEEP_VALUES,
                        "items": {"type": ["string", "number", "boolean"]}
                    },
                    "description": format!("Field → the values it takes, e.g. {{\"learning_rate\": [1e-4, 3e-4], \"group_size\": [8, 16]}}; at most {MAX_SWEEP_POINTS} combinations")
                },
                "max_parallel": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Runs going at once (the operator's max_active_runs when absent)"
                },
                "metric": {
                    "type": "string",
                    "description": "What ranks the runs: reward (the default: the last step's mean reward), held_out (the latest held-out score, with eval_every), or a metric the trainer logs"
                },
                "lower_is_better": {
                    "type": "boolean",
                    "description": "Rank the lowest value first (the default only for a metric ending in loss)"
                },
                "max_cost": caps["max_cost"],
                "max_tokens": caps["max_tokens"],
                "max_hours": caps["max_hours"]
            },
            "required": ["settings"],
            "additionalProperties": false
        }),
    }
}

pub(super) fn check_sweep(name: &'static str) -> ToolSpec {
    ToolSpec {
        name,
        description: "A sweep's table: one row per run (its settings, state, step, last \
            reward, held-out score with its 95% interval where evaluated, tokens and cost where \
            known), ranked by the sweep's metric, the best marked (`best_run_id`); with the \
            sweep's `state` (running, stopped, done) and how many runs wait. Agents may check \
            one sweep once per interval set by the operator, as rl_check_status; an earlier \
            call answers `rate_limited` with the time left. Takes seconds. Next: \
            rl_check_status or rl_get_results of a run, rl_fork_training from the best, or \
            rl_stop_sweep.",
        parameters: json!({
            "type": "object",
            "properties": {"sweep_id": sweep_id_parameter("The sweep id from rl_start_sweep")},
            "required": ["sweep_id"],
            "additionalProperties": false
        }),
    }
}

pub(super) fn stop_sweep(name: &'static str) -> ToolSpec {
    ToolSpec {
        name,
        description: "Stop a sweep: its queued runs dropped, its going runs stopped (each as \
            rl_stop_training does). Returns `message`, the runs stopped and the sweep's table. \
            Takes up to a minute. Next: rl_check_sweep for the ranking of what ran.",
        parameters: json!({
            "type": "object",
            "properties": {"sweep_id": sweep_id_parameter("The sweep to stop")},
            "required": ["sweep_id"],
            "additionalProperties": false
        }),
    }
}
