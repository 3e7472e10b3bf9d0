//! Evaluation during training (`[locked.tinker] eval_every`): rl's trainer, every `eval_every`
//! steps, pauses after saving and asks `rl runs evaluate` for the same test `rl compare` runs
//! (the run's environment and settings, its held-out items, each prompt once), against the
//! checkpoint it now serves on its own port. The answer's figures become the step's `eval/*`
//! series; the best checkpoint is then the best of these.

use std::collections::BTreeMap;
use std::time::Duration;

use rl_preflight::{CorrectRule, Endpoint, HeldOutItems, TestPlan, TestRequest, TestStore};
use rl_settings::{RUN_CONFIG_FILE, RunConfig, RunId, Value, run_dir};

use crate::answers::Evaluated;
use crate::compare::{DEFAULT_COMPARE_GROUP_SIZE, DEFAULT_COMPARE_PROMPTS, Prompts};
use crate::{Tools, ToolsError};

/// A run's evaluations are kept in its own folder, not among the pre-flights.
pub const EVALUATIONS_DIR: &str = "evaluations";
/// atroposlib's environments give a right answer 1.0 (gsm8k, the template, digits' full marks):
/// a fixed bar, so that the series compares steps; the operator may set another.
const DEFAULT_CORRECT_FROM: f64 = 1.0;
const DEFAULT_TIMEOUT_SECS: f64 = 1800.0;
/// A week, as a pre-flight's own limit.
const MAX_TIMEOUT_SECS: f64 = 7.0 * 86_400.0;

/// What the trainer asks: the step it saved, and where it serves that checkpoint.
#[derive(Debug, Clone)]
pub struct EvaluationRequest {
    pub step: u64,
    pub base_url: String,
    pub model: String,
}

/// The evaluation settings of a run, from its config's `tinker` section.
#[derive(Debug, Clone, Copy, PartialEq)]
struct EvaluationSize {
    prompts: u32,
    group_size: u32,
    correct_from: f64,
    timeout: Duration,
}

impl EvaluationSize {
    fn of(tinker: &BTreeMap<String, Value>) -> Result<Self, ToolsError> {
        let whole = |key: &str, default: u32| -> Result<u32, ToolsError> {
            match tinker.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(Value::Int(n)) => u32::try_from(*n).map_err(|_| {
                    ToolsError::invalid(format!("tinker.{key}"), format!("{n} is out of range"))
                }),
                Some(other) => Err(ToolsError::invalid(
                    format!("tinker.{key}"),
                    format!("must be a whole number, got {}", other.kind()),
                )),
            }
        };
        let number = |key: &str, default: f64| -> Result<f64, ToolsError> {
            match tinker.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(Value::Int(n)) => i32::try_from(*n).map(f64::from).map_err(|_| {
                    ToolsError::invalid(format!("tinker.{key}"), format!("{n} is out of range"))
                }),
                Some(Value::Float(x)) if x.is_finite() => Ok(*x),
                Some(other) => Err(ToolsError::invalid(
                    format!("tinker.{key}"),
                    format!("must be a finite number, got {}", other.kind()),
                )),
            }
        };
        let correct_from = number("eval_correct_from", DEFAULT_CORRECT_FROM)?;
        let timeout = number("eval_timeout_secs", DEFAULT_TIMEOUT_SECS)?;
        if !(timeout > 0.0 && timeout <= MAX_TIMEOUT_SECS) {
            return Err(ToolsError::invalid(
                "tinker.eval_timeout_secs",
                format!("must be above 0 and at most {MAX_TIMEOUT_SECS}, got {timeout}"),
            ));
        }
        Ok(Self {
            prompts: whole("eval_prompts", DEFAULT_COMPARE_PROMPTS)?,
            group_size: whole("eval_group_size", DEFAULT_COMPARE_GROUP_SIZE)?,
            correct_from,
            timeout: Duration::from_secs_f64(timeout),
        })
    }
}

/// How much longer than an evaluation's own limit the trainer waits for `rl runs evaluate`
/// (starting the test, reading it); the trainer's copy is `evaluate()`'s bound in `loop.py`.
const EVALUATE_MARGIN: Duration = Duration::from_secs(120);

/// The operator's `[locked.tinker]` evaluation settings, checked as a run starts: `eval_every`
/// a whole number from 0, and with it on, sizes a test takes. Returns how long one evaluation
/// may hold the trainer (zero when there is none).
pub(crate) fn check_locked(tinker: &BTreeMap<String, Value>) -> Result<Duration, ToolsError> {
    let every = match tinker.get("eval_every") {
        None | Some(Value::Null) => 0,
        Some(Value::Int(n)) if *n >= 0 => *n,
        Some(other) => {
            return Err(ToolsError::invalid(
                "[locked.tinker] eval_every",
                format!(
                    "must be a whole number from 0 (0: never), got {}",
                    other.kind()
                ),
            ));
        }
    };
    if every == 0 {
        return Ok(Duration::ZERO);
    }
    let size = EvaluationSize::of(tinker)?;
    for (key, value, max) in [
        ("eval_prompts", size.prompts, rl_preflight::MAX_STEPS),
        (
            "eval_group_size",
            size.group_size,
            rl_preflight::MAX_GROUP_SIZE,
        ),
    ] {
        if !(1..=max).contains(&value) {
            return Err(ToolsError::invalid(
                format!("[locked.tinker] {key}"),
                format!("is {value}; it must be between 1 and {max}, as a pre-flight's"),
            ));
        }
    }
    Ok(size.timeout + EVALUATE_MARGIN)
}

/// A run as it trained: what a test of its checkpoints runs.
pub(crate) struct AsTrained {
    pub(crate) config: RunConfig,
    /// The environment and edits the run recorded at its start, not the selection's: another
    /// may be selected meanwhile.
    pub(crate) selection: rl_config::Selection,
    /// The operator's settings with the run's own `env` fields locked.
    pub(crate) settings: rl_settings::Settings,
}

impl Tools {
    /// Run `id` as it trained, from what its folder recorded.
    pub(crate) fn as_trained(&self, id: &RunId) -> Result<AsTrained, ToolsError> {
        let config = RunConfig::read(&run_dir(self.home(), id).join(RUN_CONFIG_FILE))?;
        let selection = rl_config::run_selection(self.home(), id)?;
        let mut settings = self.settings()?.clone();
        settings.locked.env.clone_from(&config.env);
        Ok(AsTrained {
            config,
            selection,
            settings,
        })
    }

    /// The test of run `id`'s checkpoint served at `request.base_url`: the run's environment,
    /// edits and locked fields as it trained (not the selection's: another may be selected
    /// meanwhile), on its held-out items.
    pub fn evaluation_plan(
        &self,
        id: &RunId,
        request: &EvaluationRequest,
    ) -> Result<TestPlan, ToolsError> {
        check_loopback(&request.base_url)?;
        // An unknown run is said as such, with the runs there are.
        self.run_status(id, i64::MAX)?;
        let AsTrained {
            config,
            selection,
            settings,
        } = self.as_trained(id)?;
        let size = EvaluationSize::of(&config.tinker)?;
        let mut test = TestRequest::openrouter(None);
        test.models = vec![request.model.clone()];
        test.endpoint = Endpoint {
            base_url: request.base_url.clone(),
            key_variable: "(none)".to_owned(),
            key: None,
        };
        test.steps = size.prompts;
        test.group_size = size.group_size;
        test.concurrency = 1;
        test.timeout = size.timeout;
        test.correct_rule = CorrectRule::AtLeast {
            threshold: size.correct_from,
        };
        // Through rl's environment runner, always: its group counts end an evaluation whose
        // groups have no signal early (`no signal`) rather than at its time bound.
        let programs = rl_python::install(self.home())
            .map_err(|error| ToolsError::Internal(error.to_string()))?;
        test.runner = Some(programs.clone());
        if let Some(slice) = self.kept_out(id) {
            test.held_out = Some(HeldOutItems { programs, slice });
        }
        let working_dir = std::env::current_dir().map_err(|source| ToolsError::Io {
            action: "cannot read the working directory",
            path: ".".into(),
            source,
        })?;
        Ok(TestPlan::new(test, &selection, &settings, working_dir)?)
    }

    /// Runs the evaluation of `request` for run `id` and reads its figures. A model that
    /// produced no scored completion is an error naming its log.
    pub async fn evaluate_checkpoint(
        &self,
        id: &RunId,
        request: &EvaluationRequest,
    ) -> Result<Evaluated, ToolsError> {
        let plan = self.evaluation_plan(id, request)?;
        let store = TestStore::in_dir(run_dir(self.home(), id).join(EVALUATIONS_DIR));
        let report = self
            .test_inference_in(
                &plan,
                &store,
                std::sync::Arc::new(|_: rl_preflight::Progress| {}),
            )
            .await?;
        let [model] = report.models.as_slice() else {
            return Err(ToolsError::Internal(format!(
                "an evaluation tests one model, the test {} has {}",
                report.test_id,
                report.models.len()
            )));
        };
        let groups = rl_preflight::read_groups(&model.output_path)?;
        let correct_from = match plan.correct_rule {
            CorrectRule::AtLeast { threshold } => threshold,
            CorrectRule::TopScore => report.correct_from.unwrap_or(f64::INFINITY),
        };
        let Some(figures) = rl_preflight::evaluate(&groups.scores, correct_from) else {
            let why = match &model.outcome {
                rl_preflight::ModelOutcome::NoSignal { cause } => {
                    format!("no signal: {cause}")
                }
                _ => model
                    .error
                    .clone()
                    .unwrap_or_else(|| "it wrote no scored group".to_owned()),
            };
            return Err(ToolsError::Internal(format!(
                "the evaluation of step {} scored nothing: {why} (its log: {})",
                request.step,
                model.log_path.display()
            )));
        };
        let prompts = Prompts::of(model.drawn_items()?, self.kept_out(id));
        Ok(Evaluated::new(
            id,
            request.step,
            &report,
            &figures,
            correct_from,
            &prompts,
        ))
    }
}

/// The trainer serves on loopback; an evaluation never sends the run's prompts elsewhere.
fn check_loopback(base_url: &str) -> Result<(), ToolsError> {
    let refuse = |reason: &str| ToolsError::invalid("base_url", format!("{base_url:?}: {reason}"));
    // Parsed as the clients that will call it parse it (WHATWG): a user name, a fragment or a
    // backslash cannot make it name one host here and another there.
    let url = url::Url::parse(base_url).map_err(|_| refuse("not a URL"))?;
    if url.scheme() != "http" {
        return Err(refuse("an evaluation asks the run's trainer over http://"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse("a URL with a user name is not the run's trainer"));
    }
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(address)) => address.is_loopback(),
        Some(url::Host::Ipv6(address)) => address.is_loopback(),
        None => false,
    };
    if loopback && !base_url.contains('@') {
        Ok(())
    } else {
        Err(refuse(
            "not on loopback; an evaluation asks only the run's own trainer",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tinker(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), value.clone()))
            .collect()
    }

    #[test]
    fn sizes_default_to_a_comparisons_and_refuse_wrong_types() {
        let size = EvaluationSize::of(&BTreeMap::new()).unwrap();
        assert_eq!(size.prompts, DEFAULT_COMPARE_PROMPTS);
        assert_eq!(size.group_size, DEFAULT_COMPARE_GROUP_SIZE);
        assert!((size.correct_from - 1.0).abs() < f64::EPSILON);
        let size = EvaluationSize::of(&tinker(&[
            ("eval_prompts", Value::Int(4)),
            ("eval_group_size", Value::Int(2)),
            ("eval_correct_from", Value::Float(0.5)),
        ]))
        .unwrap();
        assert_eq!((size.prompts, size.group_size), (4, 2));
        assert!((size.correct_from - 0.5).abs() < f64::EPSILON);
        for bad in [
            ("eval_prompts", Value::Str("many".to_owned())),
            ("eval_prompts", Value::Int(-1)),
            ("eval_correct_from", Value::Float(f64::NAN)),
        ] {
            let error = EvaluationSize::of(&tinker(std::slice::from_ref(&bad))).unwrap_err();
            assert!(error.to_string().contains(bad.0), "{error}");
        }
    }

    #[test]
    fn a_run_with_an_evaluation_that_cannot_run_is_refused_at_its_start() {
        assert!(check_locked(&BTreeMap::new()).is_ok());
        // Off: its sizes are not looked at.
        assert!(check_locked(&tinker(&[("eval_prompts", Value::Int(100_000))])).is_ok());
        for bad in [
            vec![("eval_every", Value::Int(-1))],
            vec![("eval_every", Value::Str("often".to_owned()))],
            vec![
                ("eval_every", Value::Int(5)),
                ("eval_prompts", Value::Int(100_000)),
            ],
            vec![
                ("eval_every", Value::Int(5)),
                ("eval_group_size", Value::Int(0)),
            ],
            vec![
                ("eval_every", Value::Int(5)),
                ("eval_timeout_secs", Value::Int(0)),
            ],
        ] {
            let error = check_locked(&tinker(&bad)).unwrap_err();
            assert!(error.to_string().contains("eval_"), "{error}");
        }
        assert!(
            check_locked(&tinker(&[
                ("eval_every", Value::Int(5)),
                ("eval_prompts", Value::Int(4))
            ]))
            .is_ok()
        );
    }

    #[test]
    fn only_loopback_trainers_are_asked() {
        for ok in [
            "http://127.0.0.1:9000/v1",
            "http://localhost:1/v1",
            "http://[::1]:5/v1",
        ] {
            assert!(check_loopback(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://10.0.0.1:9000/v1",
            "https://127.0.0.1/v1",
            "http://example.com/v1",
            "not a url",
            // Loopback before an `@` is a user name: the host is what follows.
            "http://127.0.0.1:1@evil.example/v1",
            "http://127.0.0.1@evil.example/v1",
            "http://evil.example#@127.0.0.1/v1",
            "http://evil.example\\@127.0.0.1/v1",
        ] {
            assert!(check_loopback(bad).is_err(), "{bad}");
        }
    }
}
