//! The pre-flight of the selected environment (`rl_test_inference`, `rl preflight`).

use std::path::PathBuf;
use std::time::Duration;

use rl_preflight::{
    CorrectRule, Endpoint, Key, OPENROUTER_BASE_URL, OPENROUTER_KEY_VARIABLE, PreflightError,
    PreflightListing, PreflightPlan, PreflightReport, PreflightRequest, PreflightStopReport,
    PreflightStore, PreflightView, ProgressSink,
};

use crate::checkpoint_models::{EngineModels, is_checkpoint_model};
use crate::hosted::{TINKER_KEY_VARIABLE, TrainedOn};
use crate::{Tools, ToolsError};

/// The model name of the base model the next run trains, in a pre-flight's `models`.
pub(crate) const NEXT_RUN_BASE: &str = "base";

/// What a caller may choose; everything left `None` comes from the operator's settings
/// (`[inference]` in config.toml), then the original tool's defaults.
#[derive(Debug, Clone, Default)]
pub struct InferenceOptions {
    pub models: Vec<String>,
    pub num_steps: Option<u32>,
    pub group_size: Option<u32>,
    /// Where requests go. Agents cannot set it: the key goes wherever this points.
    pub base_url: Option<String>,
    /// The variable holding the endpoint's key. Agents cannot set it either.
    pub key_variable: Option<String>,
    /// An endpoint an agent names: its requests carry no key, whatever the operator set (the
    /// operator's keys go only where the operator points them).
    pub keyless_endpoint: Option<String>,
    pub concurrency: Option<usize>,
    pub timeout: Option<Duration>,
    /// A completion is correct from this score on (default: the top score the test saw).
    pub threshold: Option<f64>,
    pub use_wandb: bool,
}

impl InferenceOptions {
    /// Whether the caller chose where requests go (the operator's or an agent's endpoint).
    fn names_an_endpoint(&self) -> bool {
        self.base_url.is_some() || self.key_variable.is_some() || self.keyless_endpoint.is_some()
    }
}

impl Tools {
    pub(crate) fn preflight_store(&self) -> PreflightStore {
        PreflightStore::new(self.home())
    }

    /// Where pre-flights are kept (`<home>/preflight`).
    pub fn preflight_dir(&self) -> PathBuf {
        self.preflight_store().dir().to_owned()
    }

    /// Every pre-flight, newest first; one whose process is gone is marked interrupted and what
    /// it left is ended.
    pub fn preflights(&self) -> Result<Vec<PreflightListing>, ToolsError> {
        Ok(self.preflight_store().list()?)
    }

    /// One pre-flight: its report, or how far it got.
    pub fn preflight(&self, id: &str) -> Result<PreflightView, ToolsError> {
        Ok(self.preflight_store().view(id)?)
    }

    /// Stops a pre-flight, whichever process runs it.
    pub fn stop_preflight(&self, id: &str) -> Result<PreflightStopReport, ToolsError> {
        Ok(self.preflight_store().stop(id)?)
    }

    /// The plan of a test of the selected environment, with every key it needs at hand.
    pub fn inference_plan(&self, options: &InferenceOptions) -> Result<PreflightPlan, ToolsError> {
        let settings = self.settings()?;
        let selection = self.service()?.selection()?;
        if options
            .models
            .iter()
            .any(|model| is_checkpoint_model(model))
        {
            return self.checkpoint_plan(options, &selection, &settings);
        }
        if options.models.iter().any(|model| model == NEXT_RUN_BASE) {
            return self.next_base_plan(options, &selection, &settings);
        }
        let configured = &settings.inference;
        if let Some(base_url) = &options.keyless_endpoint {
            let mut request = PreflightRequest::openrouter(None);
            request.models = if options.models.is_empty() {
                configured.models.clone()
            } else {
                options.models.clone()
            };
            if request.models.is_empty() {
                return Err(ToolsError::invalid(
                    "models",
                    "name the models the endpoint serves (the operator's list is for the \
                     operator's endpoint)",
                ));
            }
            request.endpoint = Endpoint {
                base_url: base_url.clone(),
                key_variable: "(none)".to_owned(),
                key: None,
            };
            return self.finish_plan(request, options, &selection, &settings);
        }
        let base_url = options
            .base_url
            .clone()
            .or_else(|| configured.base_url.clone())
            .unwrap_or_else(|| OPENROUTER_BASE_URL.to_owned());
        let key_variable = options
            .key_variable
            .clone()
            .or_else(|| configured.key_variable.clone())
            .or_else(|| {
                (base_url == OPENROUTER_BASE_URL).then(|| OPENROUTER_KEY_VARIABLE.to_owned())
            });
        let key = match &key_variable {
            None => None,
            Some(name) => Some(self.key(name).ok_or_else(|| PreflightError::MissingKey {
                variable: name.clone(),
            })?),
        };
        let mut request = PreflightRequest::openrouter(key.clone());
        if !options.models.is_empty() {
            request.models.clone_from(&options.models);
        } else if !configured.models.is_empty() {
            request.models.clone_from(&configured.models);
        }
        request.endpoint = Endpoint {
            base_url,
            key_variable: key_variable.unwrap_or_else(|| "(none)".to_owned()),
            key,
        };
        self.finish_plan(request, options, &selection, &settings)
    }

    /// A test of a run's checkpoints (`run:ID[@STEP]`) on `selection`'s environment: a
    /// local-engine run's served by a process the test starts, a hosted run's by the Tinker
    /// service's endpoint.
    pub(crate) fn checkpoint_plan(
        &self,
        options: &InferenceOptions,
        selection: &rl_config::Selection,
        settings: &rl_settings::Settings,
    ) -> Result<PreflightPlan, ToolsError> {
        if options.names_an_endpoint() {
            return Err(ToolsError::Invalid {
                what: "base_url".to_owned(),
                reason: "checkpoints (run:ID[@STEP]) are served by rl itself: give no endpoint"
                    .to_owned(),
            });
        }
        rl_preflight::check_models(&options.models)?;
        let (run, named) = self.checkpoint_models(&options.models)?;
        let mut request = PreflightRequest::openrouter(None);
        match self.trained_on(&run)? {
            TrainedOn::LocalEngine => {
                let [port] = rl_process::free_loopback_ports::<1>()?;
                let server = self.checkpoint_server(&run, &named, port)?;
                request.models.clone_from(&options.models);
                request.endpoint = Endpoint {
                    base_url: server.base_url(),
                    key_variable: "(none)".to_owned(),
                    key: None,
                };
                // The checkpoints are loaded and compiled before the first model starts; a
                // model's timeout counts from its own start.
                request.server = Some(server);
            }
            TrainedOn::Service(service) => {
                // Tinker's endpoint samples a checkpoint by its sampler path, while training goes
                // on or after; the test's models are those paths.
                let key = self.tinker_key()?;
                request.models = self.hosted_models(&run, &named)?;
                request.endpoint = Endpoint {
                    base_url: settings.inference.tinker_openai_url(service.base_url()),
                    key_variable: TINKER_KEY_VARIABLE.to_owned(),
                    key: Some(key),
                };
            }
        }
        self.finish_plan(request, options, selection, settings)
    }

    /// A test of the base model the next run trains (`base`), sampled as training samples it:
    /// on the local engine, through an engine started for the test (ended with it) and the same
    /// serving code as a run's checkpoints; on a Tinker service, at its OpenAI-compatible
    /// endpoint by the model's name. Nothing need have run before.
    fn next_base_plan(
        &self,
        options: &InferenceOptions,
        selection: &rl_config::Selection,
        settings: &rl_settings::Settings,
    ) -> Result<PreflightPlan, ToolsError> {
        if options.names_an_endpoint() {
            return Err(ToolsError::invalid(
                "base_url",
                "the base model the next run trains (base) is sampled where the run would \
                 sample it: give no endpoint",
            ));
        }
        if options.models.len() > 1 {
            return Err(ToolsError::invalid(
                "models",
                "base (the base model the next run trains) is tested alone: test other models \
                 in a test of their own",
            ));
        }
        let config = self.service()?.next_run_config()?;
        let trainer = config.trainer()?;
        let base_model = trainer.base_model.clone().ok_or_else(|| {
            ToolsError::invalid(
                "models",
                "the next run names no base model: set [engine] base_model in config.toml (the \
                 local engine) or base_model in [locked.tinker] (a Tinker service)",
            )
        })?;
        let mut request = PreflightRequest::openrouter(None);
        if settings.engine.is_local() {
            if let Some(problem) = settings.engine.base_model_problem() {
                return Err(ToolsError::invalid("models", problem));
            }
            let [port] = rl_process::free_loopback_ports::<1>()?;
            let server = self.engine_model_server(
                EngineModels {
                    base_model,
                    lora_rank: trainer.lora_rank,
                    max_token_length: trainer.max_token_length,
                    states: Vec::new(),
                    base: Some(NEXT_RUN_BASE.to_owned()),
                    engine_of: None,
                },
                port,
            )?;
            request.models = vec![NEXT_RUN_BASE.to_owned()];
            request.endpoint = Endpoint {
                base_url: server.base_url(),
                key_variable: "(none)".to_owned(),
                key: None,
            };
            request.server = Some(server);
        } else {
            // The key goes where the next run's trainer would send it: the operator's service.
            let key = self.tinker_key()?;
            request.models = vec![base_model];
            request.endpoint = Endpoint {
                base_url: settings
                    .inference
                    .tinker_openai_url(trainer.base_url.as_deref()),
                key_variable: TINKER_KEY_VARIABLE.to_owned(),
                key: Some(key),
            };
        }
        self.finish_plan(request, options, selection, settings)
    }

    /// The caller's sizes, limits and rule applied to `request`, then checked into a plan.
    fn finish_plan(
        &self,
        mut request: PreflightRequest,
        options: &InferenceOptions,
        selection: &rl_config::Selection,
        settings: &rl_settings::Settings,
    ) -> Result<PreflightPlan, ToolsError> {
        if let Some(steps) = options.num_steps {
            request.steps = steps;
        }
        if let Some(group_size) = options.group_size {
            request.group_size = group_size;
        }
        if let Some(concurrency) = options.concurrency {
            request.concurrency = concurrency;
        }
        if let Some(timeout) = options.timeout {
            request.timeout = timeout;
        }
        // Every model through rl's environment runner: its group counts end a model whose
        // groups have no signal early, rather than at the timeout.
        request.runner = Some(
            rl_python::install(self.home())
                .map_err(|error| ToolsError::Internal(error.to_string()))?,
        );
        request.python = self.own_python(&selection.environment)?;
        request.use_wandb = options.use_wandb;
        if options.use_wandb {
            request.wandb_key = self.key("WANDB_API_KEY").map(Key);
        }
        request.environment_keys = self.environment_keys(settings);
        if let Some(threshold) = options.threshold {
            request.correct_rule = CorrectRule::AtLeast { threshold };
        }
        let root = settings
            .tinker_atropos_root
            .clone()
            .unwrap_or_else(|| ".".into());
        let working_dir = std::path::absolute(&root).map_err(|source| ToolsError::Io {
            action: "cannot resolve the tinker-atropos tree",
            path: root,
            source,
        })?;
        let plan = PreflightPlan::new(request, selection, settings, working_dir)?;
        crate::env_tools::before_preflight(self.home(), settings, &plan)?;
        Ok(plan)
    }

    /// Runs the plan: every model at once up to its concurrency, each in a process group of
    /// its own. The keys rl knows are masked in every log the test writes.
    pub async fn test_inference(
        &self,
        plan: &PreflightPlan,
        progress: ProgressSink,
    ) -> Result<PreflightReport, ToolsError> {
        self.test_inference_in(plan, &self.preflight_store(), progress)
            .await
    }

    /// Runs the plan as a test kept in `store` (a run's evaluations are kept in its folder).
    pub(crate) async fn test_inference_in(
        &self,
        plan: &PreflightPlan,
        store: &PreflightStore,
        progress: ProgressSink,
    ) -> Result<PreflightReport, ToolsError> {
        let mut secrets = self.secrets().clone();
        if let Some(key) = &plan.endpoint.key {
            secrets.also_redact(&plan.endpoint.key_variable, key);
        }
        Ok(rl_preflight::run_test(
            plan,
            store,
            std::sync::Arc::new(self.model_runner().clone()),
            secrets,
            progress,
        )
        .await?)
    }
}
