//! The groups an environment made, as `rl_env` counts them (`rl_env/groups.py`): written whole
//! to `env-groups.json` in a run's folder (a pre-flight model's next to its log), read here by
//! the supervisor, the status and the pre-flights. A run none of whose groups has scores that
//! differ cannot learn: GRPO's advantages are zero, and `serve` drops such groups.

use std::collections::BTreeMap;
use std::path::Path;

use rl_settings::RunFolder;
use serde::Deserialize;

/// The variable naming the file `rl_env` writes the counts to.
pub const GROUPS_FILE_VARIABLE: &str = "RL_GROUPS_FILE";
/// Larger than any counts file `rl_env` writes; a bigger one is not read.
const MAX_BYTES: u64 = 64 * 1024;

/// A run's counts with the bounds its launch plan was started with.
#[derive(Debug, Clone, PartialEq)]
pub struct RunGroups {
    pub groups: EnvGroups,
    /// `run.no_signal_warn_groups` when the run started (0: never warns).
    pub warn_groups: u64,
    /// `run.no_signal_fail_groups` when the run started (0: never fails).
    pub fail_groups: u64,
}

impl RunGroups {
    /// The counts of the run whose folder is `run_dir`, `None` before its first group.
    pub fn read(run_dir: &Path) -> Option<Self> {
        let groups = EnvGroups::read(&RunFolder::at(run_dir).env_groups())?;
        let timing = std::fs::read(RunFolder::at(run_dir).launch_plan())
            .ok()
            .and_then(|text| serde_json::from_slice::<crate::LaunchPlan>(&text).ok())
            .map(|plan| plan.timing)
            .unwrap_or_default();
        Some(Self {
            groups,
            warn_groups: timing.no_signal_warn_groups,
            fail_groups: timing.no_signal_fail_groups,
        })
    }

    /// Whether the run's warning bound is passed without a group with signal.
    pub fn no_signal(&self) -> bool {
        self.groups.without_signal_past(self.warn_groups)
    }
}

/// The handler rl's verifiers runner counts its errors under (`rl_verifiers.scored.ROLLOUT_ERRORS`):
/// a rollout that failed or left nothing to train on, a group that took too long, and a group
/// not sent for its size. An Atropos environment's are atroposlib's methods
/// (`collect_trajectories`, `handle_send_to_api`).
pub(crate) const ROLLOUT_HANDLER: &str = "rollout";

/// What an environment made so far: every attempt at a group (a call of an Atropos
/// environment's `collect_trajectories`, a group of rl's verifiers runner) ends in exactly one
/// of `made`, `too_long`, `invalid`, `none`, `unsampled` and `failed`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct EnvGroups {
    /// Scored groups the trainer can be sent.
    pub made: u64,
    /// Of those, groups whose scores differ: the only ones GRPO learns from.
    pub with_signal: u64,
    /// Of those, groups whose scores were all equal.
    pub alike: u64,
    /// The alike groups by the score they shared (`"0.0"`, `"nan"`, `"other"`).
    pub alike_scores: BTreeMap<String, u64>,
    /// Calls that returned no group after asking the model (the environment's own check of
    /// equal scores, or a failure it swallowed).
    pub none: u64,
    /// Calls that returned no group without asking the model.
    pub unsampled: u64,
    /// Of those, calls that had tokenized a prompt at least `token_limit` long.
    pub prompt_too_long: u64,
    /// The longest prompt (tokens) of the calls that asked nothing.
    pub longest_prompt: u64,
    /// Scored groups atroposlib drops: a sequence reached the token limit.
    pub too_long: u64,
    /// The longest sequence (tokens) of a scored group.
    pub longest_sequence: u64,
    /// The limit atroposlib drops groups at (the trainer's, else `max_token_length`).
    pub token_limit: Option<u64>,
    /// The environment's own `max_token_length`, which long prompts are skipped by.
    pub prompt_limit: Option<u64>,
    /// Results that are no scored group (rollouts left unscored, a malformed dict).
    pub invalid: u64,
    /// What the first of them was (`a list of 8 tuple`).
    pub invalid_first: Option<String>,
    /// Calls that raised (an Atropos environment), or groups that ended without one to send
    /// (rl's verifiers runner: no usable rollout, or not sent for their size).
    pub failed: u64,
    /// Errors by the handler that raised them (`collect_trajectories`, `handle_send_to_api`;
    /// [`ROLLOUT_HANDLER`]), with the first one's message.
    pub errors: BTreeMap<String, HandlerErrors>,
    /// Unix seconds of the last count: when the last attempt ended, however it ended.
    pub updated: Option<f64>,
    /// When the last group the trainer is sent was made (see [`Self::last_sent_at`]).
    pub last_sent: LastSent,
}

/// The file's `last_sent`: Unix seconds when the last group the trainer is sent was made.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum LastSent {
    /// A file written before rl recorded it.
    #[default]
    Unrecorded,
    /// `null`: none sent yet.
    Never,
    At(f64),
}

impl<'de> Deserialize<'de> for LastSent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Option::<f64>::deserialize(deserializer)?.map_or(Self::Never, Self::At))
    }
}

/// The exceptions one of the environment's handlers raised.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct HandlerErrors {
    pub count: u64,
    /// `AttributeError: 'tuple' object has no attribute 'get'`.
    pub first: Option<String>,
}

/// Why nothing reached the trainer: the largest of the run's causes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// The environment's code raised, or returned what is no scored group.
    Errors,
    /// Prompts skipped as longer than the token limit.
    PromptsTooLong,
    /// Groups dropped as reaching the token limit.
    GroupsTooLong,
    /// Calls that returned nothing, asked nothing, for no reason seen.
    Unsampled,
    /// Calls that asked the model and returned nothing.
    Nothing,
    /// Groups scored alike.
    Alike,
}

impl EnvGroups {
    /// The counts in `path`; `None` while there are none (no group yet, not through `rl_env`)
    /// or the file is unreadable.
    pub fn read(path: &Path) -> Option<Self> {
        let file = std::fs::File::open(path).ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_BYTES), &mut text).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Unix seconds when the environment last made a group the trainer is sent; `None` before
    /// the first. A file from before `last_sent` was written says only when it last counted,
    /// which is read as before.
    pub fn last_sent_at(&self) -> Option<f64> {
        match self.last_sent {
            LastSent::Unrecorded => self.updated,
            LastSent::Never => None,
            LastSent::At(time) => Some(time),
        }
    }

    /// Every attempt at a group, however it ended.
    pub fn attempts(&self) -> u64 {
        self.made + self.too_long + self.invalid + self.none + self.unsampled + self.failed
    }

    /// Whether at least `bound` attempts were made (`bound` > 0) and none gave a group with
    /// signal.
    pub fn without_signal_past(&self, bound: u64) -> bool {
        bound > 0 && self.with_signal == 0 && self.attempts() >= bound
    }

    /// The shared scores, `all 0.0` or `0.0 or 1.0`.
    pub fn shared_scores(&self) -> String {
        let scores: Vec<&str> = self.alike_scores.keys().map(String::as_str).collect();
        match scores.as_slice() {
            [] => "no score seen".to_owned(),
            [one] => format!("all {one}"),
            many => many.join(" or "),
        }
    }

    fn limit(&self) -> String {
        Self::named_limit(self.token_limit)
    }

    fn named_limit(limit: Option<u64>) -> String {
        limit.map_or_else(
            || "the token limit".to_owned(),
            |limit| format!("the token limit of {limit}"),
        )
    }

    /// `120 of 120 groups scored alike (all 0.0)`, with every other way the calls ended.
    pub fn describe(&self) -> String {
        let attempts = self.attempts();
        let mut parts = Vec::new();
        if self.failed > 0 {
            let how = if self.errors.contains_key(ROLLOUT_HANDLER) {
                "ended without a group to send"
            } else {
                "raised an error"
            };
            parts.push(format!("{} of {attempts} {how}", self.failed));
        }
        if self.invalid > 0 {
            let what = self
                .invalid_first
                .as_deref()
                .map_or_else(String::new, |first| format!(": {first}"));
            parts.push(format!(
                "{} of {attempts} returned no scored group (tokens, masks, scores){what}",
                self.invalid
            ));
        }
        for (handler, errors) in &self.errors {
            let first = errors
                .first
                .as_deref()
                .map_or_else(String::new, |first| format!(", the first: `{first}`"));
            let place = if handler == ROLLOUT_HANDLER {
                "rollouts"
            } else {
                handler.as_str()
            };
            parts.push(format!("{} errors in its {place}{first}", errors.count));
        }
        if self.prompt_too_long > 0 {
            parts.push(format!(
                "{} of {attempts} skipped their prompt without asking the model: prompts of up to \
                 {} tokens against {}",
                self.prompt_too_long,
                self.longest_prompt,
                Self::named_limit(self.prompt_limit.or(self.token_limit))
            ));
        }
        let unsampled = self.unsampled.saturating_sub(self.prompt_too_long);
        if unsampled > 0 {
            parts.push(format!(
                "{unsampled} of {attempts} returned no group without asking the model"
            ));
        }
        if self.too_long > 0 {
            parts.push(format!(
                "{} of {attempts} groups dropped for reaching {} (the longest sequence: {} tokens)",
                self.too_long,
                self.limit(),
                self.longest_sequence
            ));
        }
        if self.alike > 0 {
            parts.push(format!(
                "{} of {attempts} groups scored alike ({})",
                self.alike,
                self.shared_scores()
            ));
        }
        if self.none > 0 {
            parts.push(format!(
                "{} of {attempts} returned no group (the environment's own check of equal \
                 scores, or a failure it swallowed)",
                self.none
            ));
        }
        if self.with_signal > 0 {
            parts.push(format!("{} with scores that differ", self.with_signal));
        }
        if parts.is_empty() {
            return "no group yet".to_owned();
        }
        parts.join(", ")
    }

    /// The largest reason nothing reached the trainer (errors first among equals: they are
    /// what a user can least guess).
    fn main_cause(&self) -> Cause {
        let errors = self.failed + self.invalid;
        [
            (Cause::Errors, errors),
            (Cause::PromptsTooLong, self.prompt_too_long),
            (Cause::GroupsTooLong, self.too_long),
            (
                Cause::Unsampled,
                self.unsampled.saturating_sub(self.prompt_too_long),
            ),
            (Cause::Nothing, self.none),
            (Cause::Alike, self.alike),
        ]
        .into_iter()
        .rev()
        .max_by_key(|(_, count)| *count)
        .map_or(Cause::Alike, |(cause, _)| cause)
    }

    /// The cause of a run that cannot learn, and what to try.
    pub fn no_signal_cause(&self) -> String {
        let counts = self.describe();
        match self.main_cause() {
            Cause::Errors => self.errors_cause(&counts),
            Cause::PromptsTooLong => format!(
                "no group reached the trainer: the environment skips prompts longer than its \
                 token limit: {counts}. Raise max_token_length above the prompts (e.g. \
                 rl_edit_config {{\"field\": \"max_token_length\", \"value\": {}}}), or choose \
                 shorter tasks",
                suggested_limit(self.longest_prompt)
            ),
            Cause::GroupsTooLong => format!(
                "no group reached the trainer: {counts}. Raise max_token_length (and the \
                 trainer's max_token_trainer_length) above the sequences (e.g. {}), or ask for \
                 shorter completions",
                suggested_limit(self.longest_sequence)
            ),
            Cause::Unsampled => format!(
                "no group reached the trainer: {counts}. The environment's log says why it \
                 returns nothing; a pre-flight (rl_test_inference) shows what the model answers"
            ),
            // A group asked of the model and not returned: most often the environment's own
            // check of equal scores (gsm8k-style), so the advice is the alike groups'.
            Cause::Alike | Cause::Nothing => format!(
                "no training signal: {counts}; nothing reaches the trainer. Try a stronger base \
                 model, a smaller or easier task, a shaped reward (partial credit), or a \
                 pre-flight (rl_test_inference) to see how the model scores"
            ),
        }
    }
}

impl EnvGroups {
    /// The cause when errors are the largest, worded by where they were counted: atroposlib's
    /// methods (an Atropos environment's code), or rl's verifiers runner's rollouts and groups
    /// (whose errors may as well be the model endpoint's, or a group's size).
    fn errors_cause(&self, counts: &str) -> String {
        let rollouts = self.errors.contains_key(ROLLOUT_HANDLER);
        let atropos = self.invalid > 0
            || self.errors.keys().any(|handler| handler != ROLLOUT_HANDLER)
            || (self.failed > 0 && !rollouts);
        let mut cause = if atropos {
            format!(
                "no group reached the trainer: the environment's code fails: {counts}. This is \
                 the environment's code (or its data) against atroposlib 0.4.0, not the model: \
                 fix what the first error names (the environment's log has each traceback); \
                 `collect_trajectories` must return a scored group (tokens, masks, scores) or \
                 a list of them, with `score` called by the environment itself"
            )
        } else {
            format!("no group reached the trainer: {counts}")
        };
        if rollouts {
            cause.push_str(
                ". Each error of its rollouts names its cause (the environment's code or data, \
                 the model's endpoint, a prompt that reaches the token limit): fix what the \
                 first names; a pre-flight (rl_test_inference) runs the same rollouts against a \
                 model. A group whose usable rollouts make another number of sequences than \
                 group_size (a rollout failed, or one gave several branches) is not sent: \
                 run-api batches only groups of one size",
            );
        }
        cause
    }
}

/// A token limit that holds `longest` tokens with room for a completion: the next power of two
/// at least twice as long.
fn suggested_limit(longest: u64) -> u64 {
    longest.saturating_mul(2).max(256).next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_alike_groups_is_said_with_its_score() {
        let groups: EnvGroups = serde_json::from_str(
            r#"{"made": 120, "with_signal": 0, "alike": 120, "alike_scores": {"0.0": 120},
                "none": 0, "failed": 0, "updated": 1.0}"#,
        )
        .unwrap();
        assert!(groups.without_signal_past(120));
        assert!(!groups.without_signal_past(121));
        assert!(!groups.without_signal_past(0));
        assert!(
            groups
                .no_signal_cause()
                .starts_with("no training signal: 120 of 120 groups scored alike (all 0.0)")
        );
    }

    /// Groups abandoned after `worker_timeout` refresh `updated` alone; a file from before
    /// `last_sent` was written is read as before (its last count).
    #[test]
    fn the_last_group_sent_is_told_from_the_last_count_and_an_old_file_read_as_before() {
        let failing = counts(r#"{"failed": 4, "updated": 2000.0, "last_sent": 1500.0}"#);
        assert_eq!(failing.last_sent_at(), Some(1500.0));
        assert_eq!(failing.updated, Some(2000.0));
        let none_yet = counts(r#"{"failed": 4, "updated": 2000.0, "last_sent": null}"#);
        assert_eq!(none_yet.last_sent, LastSent::Never);
        assert_eq!(none_yet.last_sent_at(), None);
        let old = counts(r#"{"failed": 4, "updated": 2000.0}"#);
        assert_eq!(old.last_sent, LastSent::Unrecorded);
        assert_eq!(old.last_sent_at(), Some(2000.0));
    }

    #[test]
    fn one_group_with_signal_is_enough() {
        let groups = EnvGroups {
            made: 20,
            with_signal: 1,
            alike: 19,
            ..EnvGroups::default()
        };
        assert!(!groups.without_signal_past(4));
    }

    fn counts(json: &str) -> EnvGroups {
        serde_json::from_str(json).unwrap()
    }

    /// Issue 40: infinimath's rollouts, returned unscored, then `handle_send_to_api` failing.
    #[test]
    fn an_environment_whose_code_fails_is_named_as_such_with_its_first_error() {
        let groups = counts(
            r#"{"made": 0, "invalid": 16, "invalid_first": "a list of 8 tuple",
                "errors": {"handle_send_to_api": {"count": 16,
                "first": "AttributeError: 'tuple' object has no attribute 'get'"}}}"#,
        );
        assert!(groups.without_signal_past(16));
        let cause = groups.no_signal_cause();
        assert!(cause.starts_with("no group reached the trainer: the environment's code fails: 16 of 16 returned no scored group (tokens, masks, scores): a list of 8 tuple, 16 errors in its handle_send_to_api, the first: `AttributeError: 'tuple' object has no attribute 'get'`"), "{cause}");
        assert!(!cause.contains("stronger base model"), "{cause}");
    }

    /// Issue 40: reasoning_gym with max_token_length 256 skipped every prompt.
    #[test]
    fn prompts_skipped_as_too_long_name_the_limit_and_the_length_to_set() {
        let groups = counts(
            r#"{"unsampled": 120, "prompt_too_long": 120, "longest_prompt": 812,
                "token_limit": 8192, "prompt_limit": 256}"#,
        );
        let cause = groups.no_signal_cause();
        assert!(cause.contains("120 of 120 skipped their prompt without asking the model: prompts of up to 812 tokens against the token limit of 256"), "{cause}");
        assert!(
            cause.contains(r#"rl_edit_config {"field": "max_token_length", "value": 2048}"#),
            "{cause}"
        );
    }

    /// The runner's spelling of the handler is this one.
    #[test]
    fn the_rollout_handler_is_the_verifiers_runners() {
        let runner = include_str!("../../rl-python/python/rl_verifiers/scored.py");
        assert!(
            runner.contains(&format!("ROLLOUT_ERRORS = \"{ROLLOUT_HANDLER}\"")),
            "rl_verifiers.scored.ROLLOUT_ERRORS is not {ROLLOUT_HANDLER:?}"
        );
    }

    /// Issue 41: rl's verifiers runner counts its errors under `rollout`, and a group refused
    /// for its size is one of them: no word of atroposlib's methods, the size rule said.
    #[test]
    fn a_verifiers_runs_errors_are_worded_by_its_rollouts_not_atroposlib() {
        let groups = counts(
            r#"{"failed": 12, "errors": {"rollout": {"count": 12,
                "first": "a group of 6 sequences from 4 usable rollouts, not group_size (4): run-api batches only groups of one size, so it was not sent"}}}"#,
        );
        assert!(groups.without_signal_past(12));
        let cause = groups.no_signal_cause();
        assert!(
            cause.starts_with(
                "no group reached the trainer: 12 of 12 ended without a group to send, 12 errors \
                 in its rollouts, the first: `a group of 6 sequences from 4 usable rollouts"
            ),
            "{cause}"
        );
        assert!(
            cause.contains("a rollout failed, or one gave several branches"),
            "{cause}"
        );
        for atropos in ["atroposlib", "collect_trajectories", "traceback", "raised"] {
            assert!(!cause.contains(atropos), "{atropos:?} in {cause}");
        }
        assert!(!cause.contains("stronger base model"), "{cause}");

        // An Atropos environment's failing calls keep atroposlib's wording.
        let groups = counts(
            r#"{"failed": 3, "errors": {"collect_trajectories": {"count": 3, "first": "KeyError: 'x'"}}}"#,
        );
        let cause = groups.no_signal_cause();
        assert!(cause.starts_with("no group reached the trainer: the environment's code fails: 3 of 3 raised an error, 3 errors in its collect_trajectories"), "{cause}");
        assert!(!cause.contains("group_size"), "{cause}");
    }

    #[test]
    fn groups_dropped_for_length_and_calls_that_return_nothing_are_told_apart() {
        let groups = counts(
            r#"{"made": 2, "alike": 2, "alike_scores": {"0.0": 2}, "too_long": 30, "longest_sequence": 300, "token_limit": 256}"#,
        );
        let cause = groups.no_signal_cause();
        assert!(cause.contains("30 of 32 groups dropped for reaching the token limit of 256 (the longest sequence: 300 tokens)"), "{cause}");
        assert!(cause.contains("(e.g. 1024)"), "{cause}");
        let groups = counts(r#"{"unsampled": 5, "none": 7}"#);
        let cause = groups.no_signal_cause();
        assert!(cause.starts_with("no training signal: "), "{cause}");
        assert!(
            cause.contains("5 of 12 returned no group without asking the model"),
            "{cause}"
        );
        assert!(
            cause.contains("7 of 12 returned no group (the environment's own check"),
            "{cause}"
        );
    }
}
