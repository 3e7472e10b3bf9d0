//! The sweep tools' calls: `rl_start_sweep`, `rl_check_sweep` (under the agents' status-check
//! limit, one check of a sweep per interval, as `rl_check_status`'s of a run) and
//! `rl_stop_sweep`.

use std::collections::BTreeMap;

use rl_settings::{Caps, SweepId, Value};
use serde::Deserialize;

use super::{Caller, Registry, now_seconds, parse};
use crate::answers::{SweepRateLimited, to_json};
use crate::rate_limit::StatusChecks;
use crate::{SweepRequest, ToolsError};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartSweepArgs {
    settings: BTreeMap<String, Vec<Value>>,
    #[serde(default)]
    max_parallel: Option<u32>,
    #[serde(default)]
    metric: Option<String>,
    #[serde(default)]
    lower_is_better: Option<bool>,
    #[serde(default)]
    max_cost: Option<f64>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_hours: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepArgs {
    sweep_id: String,
}

impl Registry {
    pub(super) async fn start_sweep(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<serde_json::Value, ToolsError> {
        let StartSweepArgs {
            settings,
            max_parallel,
            metric,
            lower_is_better,
            max_cost,
            max_tokens,
            max_hours,
        } = parse(name, arguments)?;
        let request = SweepRequest {
            grid: settings.into_iter().collect(),
            max_parallel,
            metric,
            lower_is_better,
            caps: Caps {
                max_cost,
                max_tokens,
                max_hours,
            },
        };
        self.tools
            .blocking(move |tools| to_json(&tools.start_sweep(&request)?))
            .await
    }

    pub(super) async fn check_sweep(
        &self,
        name: &str,
        arguments: serde_json::Value,
        caller: Caller,
    ) -> Result<serde_json::Value, ToolsError> {
        let SweepArgs { sweep_id } = parse(name, arguments)?;
        let id = SweepId::parse(&sweep_id)?;
        let interval = self.tools.settings().map_or(
            rl_settings::DEFAULT_STATUS_CHECK_INTERVAL_SECS,
            |settings| settings.status_check_interval_secs,
        );
        let limited = caller == Caller::Agent && interval > 0.0;
        self.tools
            .blocking(move |tools| {
                // Read first: only a sweep that exists counts, so a mistyped id uses no check.
                let view = tools.sweep_view(&id)?;
                if limited {
                    let checks = StatusChecks::new(tools.home());
                    if let Some(left) = checks.admit(id.as_str(), interval, now_seconds())? {
                        return to_json(&SweepRateLimited::new(&id, left));
                    }
                }
                to_json(&view)
            })
            .await
    }

    pub(super) async fn stop_sweep(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<serde_json::Value, ToolsError> {
        let SweepArgs { sweep_id } = parse(name, arguments)?;
        let id = SweepId::parse(&sweep_id)?;
        self.tools
            .blocking(move |tools| to_json(&tools.stop_sweep(&id)?))
            .await
    }
}
