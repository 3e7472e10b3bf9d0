//! A run's checkpoints as the models of a pre-flight: `run:ID` (its last saved state),
//! `run:ID@STEP`, `run:ID@best` and `run:ID@base` (the base model it trained, through the same
//! engine and code, so a comparison differs only in the weights). A local-engine run's are
//! served by `rl_trainer.checkpoints` (rl's trainer's Python, the run's engine started again on
//! a copy of its engine folder), which the test starts before its models and ends after them;
//! a hosted run's by the Tinker service's OpenAI-compatible endpoint, by their sampler paths.

use std::path::Path;
use std::time::Duration;

use rl_preflight::ModelServer;
use rl_process::{RunRecord, RunState};
use rl_settings::{RunConfig, RunId};

use crate::hosted::TrainedOn;
use crate::{Tools, ToolsError};

/// How a model names a run's checkpoint.
pub const RUN_PREFIX: &str = "run:";
/// Loading the engine and each checkpoint compiles JAX functions: minutes on a small CPU.
const READY_TIMEOUT: Duration = Duration::from_secs(900);
const PYTHON_MODULE: &str = "rl_trainer.checkpoints";

/// Which of a run's weights a model names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum At {
    /// The last checkpoint with a saved state (the final one, when the run saved it).
    Last,
    Step(i64),
    /// The best checkpoint, as `rl checkpoints list` marks it (`checkpoints::best_saved`).
    Best,
    Base,
}

/// The model name of run `run_id`'s checkpoint `at` (a step, `best` or `base`; `None`: the
/// last saved state): what `parse_checkpoint_model` reads back.
pub(crate) fn checkpoint_model(run_id: &impl std::fmt::Display, at: Option<&str>) -> String {
    match at {
        Some(at) => format!("{RUN_PREFIX}{run_id}@{at}"),
        None => format!("{RUN_PREFIX}{run_id}"),
    }
}

/// Whether `model` names a run's checkpoint.
pub(crate) fn is_checkpoint_model(model: &str) -> bool {
    model.starts_with(RUN_PREFIX)
}

/// `run:ID[@STEP|@best|@base]` read.
pub(crate) fn parse_checkpoint_model(model: &str) -> Result<(RunId, At), ToolsError> {
    let invalid = |reason: String| ToolsError::Invalid {
        what: format!("model {model}"),
        reason,
    };
    let rest = model
        .strip_prefix(RUN_PREFIX)
        .ok_or_else(|| invalid(format!("a checkpoint is named {RUN_PREFIX}ID[@STEP]")))?;
    let (id, at) = match rest.split_once('@') {
        None => (rest, At::Last),
        Some((id, at)) => (id, At::named(at).map_err(invalid)?),
    };
    Ok((RunId::parse(id)?, at))
}

impl At {
    /// What follows the `@` of a checkpoint's name: a step, `best` or `base`.
    pub(crate) fn named(at: &str) -> Result<Self, String> {
        match at {
            "best" => Ok(Self::Best),
            "base" => Ok(Self::Base),
            step => match step.parse::<i64>() {
                Ok(step) if step >= 0 => Ok(Self::Step(step)),
                _ => Err(format!(
                    "{:?} is not a step: use a step number, best or base",
                    rl_settings::quoted(step)
                )),
            },
        }
    }
}

impl Tools {
    /// The run whose checkpoints `models` name, and what each names: every model a checkpoint,
    /// all of one run.
    pub(crate) fn checkpoint_models(
        &self,
        models: &[String],
    ) -> Result<(RunRecord, Vec<(String, At)>), ToolsError> {
        let mut parsed = Vec::new();
        for model in models {
            if !is_checkpoint_model(model) {
                return Err(ToolsError::Invalid {
                    what: "models".to_owned(),
                    reason: format!(
                        "{model} is not a checkpoint: a test of checkpoints (run:ID[@STEP]) names \
                         checkpoints only; test other models in a test of their own"
                    ),
                });
            }
            parsed.push((model.clone(), parse_checkpoint_model(model)?));
        }
        let Some((_, (run_id, _))) = parsed.first() else {
            return Err(ToolsError::Invalid {
                what: "models".to_owned(),
                reason: "name at least one model".to_owned(),
            });
        };
        if let Some((other, _)) = parsed.iter().find(|(_, (id, _))| id != run_id) {
            return Err(ToolsError::Invalid {
                what: "models".to_owned(),
                reason: format!(
                    "{other} is of another run than {RUN_PREFIX}{run_id}: one test samples the \
                     checkpoints of one run"
                ),
            });
        }
        let run = self.run_status(run_id, i64::MAX)?.run;
        let named = parsed
            .into_iter()
            .map(|(model, (_, at))| (model, at))
            .collect();
        Ok((run, named))
    }

    /// The step `at` names of `run`'s checkpoints, as a test of them would sample it (a saved
    /// state on the local engine, sampler weights at a Tinker service), and what made it the
    /// best when `at` asks for the best.
    pub(crate) fn chosen_step(
        &self,
        run: &RunRecord,
        at: &At,
    ) -> Result<(i64, Option<&'static str>), ToolsError> {
        let weights = match self.trained_on(run)? {
            TrainedOn::LocalEngine => Weights::State,
            TrainedOn::Service(_) => Weights::Sampler,
        };
        let saved = self.saved(run)?;
        let (step, _) = path_of(&saved, at, weights).map_err(|reason| ToolsError::Invalid {
            what: format!("run {}", run.id),
            reason,
        })?;
        Ok((step, (at == &At::Best).then_some(saved.scores.by)))
    }

    /// What the hosted Tinker's OpenAI-compatible endpoint is asked for each of `named`: a
    /// checkpoint's sampler path (`tinker://…/sampler_weights/…`), or the base model's name.
    pub(crate) fn hosted_models(
        &self,
        run: &RunRecord,
        named: &[(String, At)],
    ) -> Result<Vec<String>, ToolsError> {
        let saved = self.saved(run)?;
        let config = RunConfig::read(&run.config_path)?;
        named
            .iter()
            .map(|(model, at)| {
                let invalid = |reason: String| ToolsError::Invalid {
                    what: format!("model {model}"),
                    reason,
                };
                match at {
                    At::Base => base_model_of(&config).ok_or_else(|| {
                        invalid("its run's config names no tinker.base_model".to_owned())
                    }),
                    at => path_of(&saved, at, Weights::Sampler)
                        .map(|(_, path)| path)
                        .map_err(invalid),
                }
            })
            .collect()
    }

    /// The server of `models`, every one a checkpoint of the same finished local-engine run,
    /// on `port`.
    pub(crate) fn checkpoint_server(
        &self,
        run: &RunRecord,
        named: &[(String, At)],
        port: u16,
    ) -> Result<ModelServer, ToolsError> {
        let run_id = RunId::parse(&run.id)?;
        if !run.state.is_finished() || run.state == RunState::Stopping {
            return Err(ToolsError::Invalid {
                what: format!("run {run_id}"),
                reason: format!(
                    "it is {}: its engine is in use; sample its checkpoints once it has ended",
                    run.state.name()
                ),
            });
        }
        let saved = self.saved(run)?;
        let config = RunConfig::read(&run.config_path)?;
        let base_model = base_model_of(&config).ok_or_else(|| ToolsError::Invalid {
            what: format!("run {run_id}"),
            reason: "its config names no tinker.base_model".to_owned(),
        })?;
        let trainer = config.trainer()?;
        let mut served = EngineModels {
            base_model,
            lora_rank: trainer.lora_rank,
            max_token_length: trainer.max_token_length,
            states: Vec::new(),
            base: None,
            engine_of: Some(saved.dir.clone()),
        };
        for (model, at) in named {
            if at == &At::Base {
                served.base = Some(model.clone());
            } else {
                let (_, state) =
                    path_of(&saved, at, Weights::State).map_err(|reason| ToolsError::Invalid {
                        what: format!("model {model}"),
                        reason,
                    })?;
                served.states.push((model.clone(), state));
            }
        }
        self.engine_model_server(served, port)
    }

    /// The server of `served` through a local engine it starts (`rl_trainer.checkpoints`),
    /// on `port`.
    pub(crate) fn engine_model_server(
        &self,
        served: EngineModels,
        port: u16,
    ) -> Result<ModelServer, ToolsError> {
        let settings = self.settings()?;
        let programs = rl_python::install(self.home()).map_err(|error| {
            ToolsError::Internal(format!("cannot write rl's Python programs: {error}"))
        })?;
        let chat_template_of = served.base_model.clone();
        let mut args = vec![
            "--port".to_owned(),
            port.to_string(),
            "--engine-python".to_owned(),
            path_text(settings.engine_python()),
            "--engine-dir".to_owned(),
            rl_preflight::PreflightFolder::ENGINE_COPY.to_owned(),
            "--base-model".to_owned(),
            served.base_model,
            "--lora-rank".to_owned(),
            served.lora_rank.to_string(),
            "--max-token-length".to_owned(),
            served.max_token_length.to_string(),
            "--backend-config".to_owned(),
            serde_json::to_string(&settings.engine.backend_config)
                .map_err(|error| ToolsError::Internal(error.to_string()))?,
        ];
        if let Some(base) = served.base {
            args.extend(["--base".to_owned(), base]);
        }
        for (model, state) in served.states {
            args.extend(["--model".to_owned(), format!("{model}={state}")]);
        }
        // Its parent is the rl process that owns it: if that one dies, even by SIGKILL, the
        // server and its engine end by themselves instead of serving on, unowned.
        args.push("--exit-with-parent".to_owned());
        // The Python that runs atroposlib, with the operator's packages after rl's (the
        // engine's own Python is started by the server itself, alone).
        let launch = rl_python::PythonLauncher::new(&programs, &settings.child_environment).module(
            &settings.python,
            PYTHON_MODULE,
            args,
            rl_python::Imports::WithOperators,
        );
        Ok(ModelServer {
            program: launch.program,
            args: launch.args,
            env: launch.env,
            port,
            ready_timeout: READY_TIMEOUT,
            engine_of: served.engine_of,
            chat_template_of: Some(chat_template_of),
        })
    }
}

/// What a test's engine server serves: on `base_model`, saved states as models and the base
/// model itself, with the LoRA rank and token length they were (or will be) trained with.
pub(crate) struct EngineModels {
    pub base_model: String,
    pub lora_rank: u32,
    pub max_token_length: u32,
    /// Model name and `save_state` path.
    pub states: Vec<(String, String)>,
    /// The name the base model is served as, if it is.
    pub base: Option<String>,
    /// The run folder whose engine folder the server works on a copy of; `None`: an engine
    /// folder of its own, new.
    pub engine_of: Option<std::path::PathBuf>,
}

/// Which of a checkpoint's paths a model samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Weights {
    /// The saved state (`save_state`): what a restarted local engine can load.
    State,
    /// The sampler weights (`save_weights_for_sampler`): what Tinker's endpoint samples;
    /// every saved step has them.
    Sampler,
}

/// The step and the path of `weights` of the checkpoint `at` names; nothing pruned is a model.
fn path_of(
    saved: &crate::saved_states::Saved,
    at: &At,
    weights: Weights,
) -> Result<(i64, String), String> {
    let candidates: Vec<(i64, &str)> = saved
        .record
        .checkpoints
        .iter()
        .filter_map(|checkpoint| {
            let path = match weights {
                Weights::State => checkpoint.state_path.as_deref()?,
                Weights::Sampler => checkpoint.path.as_str(),
            };
            Some((checkpoint.step?, path))
        })
        .filter(|(step, _)| !saved.pruned.contains(step))
        .collect();
    let (having, missing, none) = match weights {
        Weights::State => (
            "steps with a saved state",
            "no saved state to sample",
            "it saved no state, or its states were pruned (save_every in [locked.tinker] saves \
             them as it trains)",
        ),
        Weights::Sampler => (
            "steps with a checkpoint",
            "no checkpoint",
            "it saved no checkpoint, or they were pruned",
        ),
    };
    let steps = || {
        let listed: Vec<String> = candidates
            .iter()
            .map(|(step, _)| step.to_string())
            .collect();
        if listed.is_empty() {
            none.to_owned()
        } else {
            format!("{having}: {}", listed.join(", "))
        }
    };
    let wanted = match at {
        At::Last => candidates.last().map(|(step, _)| *step),
        At::Step(step) => Some(*step),
        // The one best `rl checkpoints list` marks (`checkpoints::best_saved`): it has a saved
        // state, so it has sampler weights too.
        At::Best => saved.best_step,
        At::Base => None,
    };
    let Some(step) = wanted else {
        if at == &At::Best {
            return Err(no_best(saved));
        }
        return Err(format!("no checkpoint to sample; {}", steps()));
    };
    let (step, path) = candidates
        .iter()
        .rev()
        .find(|(at, _)| *at == step)
        .map(|(_, path)| (step, (*path).to_owned()))
        .ok_or_else(|| format!("step {step} has {missing}; {}", steps()))?;
    // A state a restarted engine would load: its files must still be in the run's engine
    // folder, else the engine fails minutes later with nothing to sample.
    if weights == Weights::State && crate::resume_point::state_is_missing(&saved.dir, &path) {
        return Err(format!(
            "the files of step {step}'s saved state ({path}) are missing from the run's engine \
             folder ({}): they were moved or deleted, and nothing of this run can be sampled \
             from them",
            rl_settings::RunFolder::at(&saved.dir).engine().display()
        ));
    }
    Ok((step, path))
}

/// Why a run has no best checkpoint: none has a saved state left, or none of those has a score.
fn no_best(saved: &crate::saved_states::Saved) -> String {
    let loadable: Vec<String> = saved
        .record
        .checkpoints
        .iter()
        .filter(|checkpoint| checkpoint.state_path.is_some())
        .filter_map(|checkpoint| checkpoint.step)
        .filter(|step| !saved.pruned.contains(step))
        .map(|step| step.to_string())
        .collect();
    let by = saved.scores.by;
    let why = if loadable.is_empty() {
        "it has none (save_every in [locked.tinker] saves states as it trains)".to_owned()
    } else {
        format!(
            "none of those it has (steps {}) has a {by} logged",
            loadable.join(", ")
        )
    };
    format!(
        "no best checkpoint: the best is the step with the highest {by} among those with a saved \
         state not pruned, and {why}"
    )
}

/// The model a run trained (`tinker.base_model`, else the tokenizer it was given).
fn base_model_of(config: &RunConfig) -> Option<String> {
    config.trainer().ok()?.base_model
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_models_are_read() {
        let (id, at) = parse_checkpoint_model("run:0badc0de").unwrap();
        assert_eq!((id.to_string().as_str(), at), ("0badc0de", At::Last));
        for (suffix, expected) in [
            ("@4", At::Step(4)),
            ("@best", At::Best),
            ("@base", At::Base),
        ] {
            let model = format!("run:0badc0de{suffix}");
            assert_eq!(parse_checkpoint_model(&model).unwrap().1, expected);
        }
        for bad in [
            "run:",
            "run:x/../y",
            "run:0badc0de@-1",
            "run:0badc0de@last",
            "qwen/qwen3-8b",
        ] {
            assert!(parse_checkpoint_model(bad).is_err(), "{bad}");
        }
    }
}
