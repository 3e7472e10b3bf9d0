//! Evaluation during training (`[locked.tinker] eval_every`): rl's trainer, every `eval_every`
//! steps, pauses after saving and asks `rl runs evaluate` for the same test `rl compare` runs
//! (the run's environment and settings, its held-out items, each prompt once), against the
//! checkpoint it now serves on its own port. The answer's figures become the step's `eval/*`
//! series; the best checkpoint is then the best of these.

use rl_preflight::{
    CorrectRule, Endpoint, HeldOutItems, PreflightPlan, PreflightRequest, PreflightStore,
};
use rl_settings::{RunFolder, RunId};

use crate::answers::Evaluated;
use crate::as_trained::AsTrained;
use crate::checkpoint_test_size::EvaluationSize;
use crate::prompts::Prompts;
use crate::{Tools, ToolsError};

/// What the trainer asks: the step it saved, and where it serves that checkpoint.
#[derive(Debug, Clone)]
pub struct EvaluationRequest {
    pub step: u64,
    pub base_url: String,
    pub model: String,
}

impl Tools {
    /// The test of run `id`'s checkpoint served at `request.base_url`: the run's environment,
    /// edits and locked fields as it trained (not the selection's: another may be selected
    /// meanwhile), on its held-out items.
    pub fn evaluation_plan(
        &self,
        id: &RunId,
        request: &EvaluationRequest,
    ) -> Result<PreflightPlan, ToolsError> {
        check_loopback(&request.base_url)?;
        // An unknown run is said as such, with the runs there are.
        self.run_status(id, i64::MAX)?;
        let AsTrained {
            config,
            selection,
            settings,
        } = self.as_trained(id)?;
        let size = EvaluationSize::of(&config.trainer()?);
        let mut test = PreflightRequest::openrouter(None);
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
        test.python = self.own_python(&selection.environment)?;
        test.environment_keys = self.environment_keys(&settings);
        if let Some(slice) = self.held_out_of(id) {
            test.held_out = Some(HeldOutItems { programs, slice });
        }
        let working_dir = std::env::current_dir().map_err(|source| ToolsError::Io {
            action: "cannot read the working directory",
            path: ".".into(),
            source,
        })?;
        Ok(PreflightPlan::new(
            test,
            &selection,
            &settings,
            working_dir,
        )?)
    }

    /// Runs the evaluation of `request` for run `id` and reads its figures. A model that
    /// produced no scored completion is an error naming its log.
    pub async fn evaluate_checkpoint(
        &self,
        id: &RunId,
        request: &EvaluationRequest,
    ) -> Result<Evaluated, ToolsError> {
        let plan = self.evaluation_plan(id, request)?;
        // A run's evaluations are kept in its own folder, not among the pre-flights.
        let store = PreflightStore::in_dir(RunFolder::of(self.home(), id).evaluations());
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
        let prompts = Prompts::of(model.drawn_items()?, self.held_out_of(id));
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
