//! First-run advice on this machine's engine: the settings of the selected environment that
//! make a run on the local engine (`engine.kind = "local"`, which samples and trains every
//! sequence on this machine) take hours, or skip every group, with the values to try. The
//! environments of the Atropos tree are set for a cluster (`batch_size` 1024, thousands of
//! tokens), and the two settings a first run usually lowers (`total_steps`, `max_token_length`)
//! leave the batch as it is.

use std::path::Path;

use rl_config::CurrentConfig;
use rl_settings::{Settings, Value};
use serde::Serialize;

/// One setting to change before a first run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FirstRunAdvice {
    pub field: String,
    /// The value a run would use now.
    pub value: i64,
    /// The value to try.
    pub try_value: i64,
    pub why: String,
    /// Where to set it: `rl config set` (`rl_edit_config`), or the operator's `[locked.env]`
    /// when the operator locked it.
    pub how: String,
}

/// Sequences a step at most before a step on the local engine is long: the shape the fixture
/// demo trains with (8 groups of 8).
const LOCAL_BATCH: i64 = 64;
/// Groups a step to try.
const GROUPS_TO_TRY: i64 = 4;
/// Steps of a first run.
const LOCAL_STEPS: i64 = 50;
const STEPS_TO_TRY: i64 = 10;
/// Tokens a sequence may run to on the local engine; also the least an environment whose
/// prompts ask for a `<think>` block needs so that most groups are not skipped.
const LOCAL_TOKENS: i64 = 1024;

/// The advice for `current`, the selected environment's configuration; none unless the run
/// trains on the local engine.
pub(crate) fn advise(settings: &Settings, current: &CurrentConfig) -> Vec<FirstRunAdvice> {
    if !settings.engine.is_local() {
        return Vec::new();
    }
    let int = |field: &str| match current.value_of(field) {
        Some(Value::Int(value)) => Some(*value),
        _ => None,
    };
    let locked = |field: &str| {
        current
            .fields
            .iter()
            .any(|f| f.spec.name == field && f.locked)
    };
    let how = |field: &str, value: i64| {
        if locked(field) {
            format!("set {field} = {value} under [locked.env] in the operator's config.toml")
        } else {
            format!("rl config set {field} {value} (agents: rl_edit_config)")
        }
    };
    let mut advice = Vec::new();
    let group_size = int("group_size").filter(|size| *size > 0);
    if let (Some(batch), Some(group)) = (int("batch_size"), group_size)
        && batch > LOCAL_BATCH
    {
        let try_value = (LOCAL_BATCH.min(GROUPS_TO_TRY * group) / group).max(1) * group;
        advice.push(FirstRunAdvice {
            field: "batch_size".to_owned(),
            value: batch,
            try_value,
            why: format!(
                "{batch} sequences a step ({} groups of {group}), each sampled and trained by \
                 the local engine on this machine: a first run can take hours; {try_value} is {} \
                 groups a step",
                batch / group,
                try_value / group
            ),
            how: how("batch_size", try_value),
        });
    }
    if let Some(steps) = int("total_steps")
        && steps > LOCAL_STEPS
    {
        advice.push(FirstRunAdvice {
            field: "total_steps".to_owned(),
            value: steps,
            try_value: STEPS_TO_TRY,
            why: format!(
                "{steps} steps on the local engine: a first run that shows whether the reward \
                 moves needs {STEPS_TO_TRY}"
            ),
            how: how("total_steps", STEPS_TO_TRY),
        });
    }
    if let Some(tokens) = int("max_token_length") {
        let thinks = asks_for_thinking(
            &current
                .environment
                .environments_dir
                .join(&current.environment.file),
        );
        if tokens > LOCAL_TOKENS {
            advice.push(FirstRunAdvice {
                field: "max_token_length".to_owned(),
                value: tokens,
                try_value: LOCAL_TOKENS,
                why: format!(
                    "each completion may run to {tokens} tokens, sampled and trained on this \
                     machine"
                ),
                how: how("max_token_length", LOCAL_TOKENS),
            });
        } else if thinks && tokens < LOCAL_TOKENS {
            // atroposlib skips a group reaching the limit; rl's verifiers runner cuts it.
            let why = if current.environment.kind.has_own_python() {
                format!(
                    "its prompts ask for a <think> block (its source says so), and rl cuts a \
                     completion at max_token_length: at {tokens} tokens few reasoning \
                     completions reach their answer, so most rewards are scored on cut-off \
                     reasoning"
                )
            } else {
                format!(
                    "its prompts ask for a <think> block (its source says so), and atroposlib \
                     skips a group when any of its sequences (prompt and completion) reaches \
                     max_token_length: at {tokens} tokens few reasoning completions end in \
                     time, so most groups, or all, are skipped (env.log: \"Token length is too \
                     long in a group, skipping...\")"
                )
            };
            advice.push(FirstRunAdvice {
                field: "max_token_length".to_owned(),
                value: tokens,
                try_value: LOCAL_TOKENS,
                why,
                how: how("max_token_length", LOCAL_TOKENS),
            });
        }
    }
    advice
}

/// The environment's file mentions `<think>`: its prompts ask for a reasoning block (or it
/// prefills one), which runs long.
fn asks_for_thinking(file: &Path) -> bool {
    rl_discovery::read_python_source(file).is_ok_and(|source| source.contains("<think>"))
}
