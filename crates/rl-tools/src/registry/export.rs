//! The handing-over tools' calls: `rl_export_checkpoint` (a folder of the exports folder) and
//! `rl_stop_test` (a pre-flight or comparison ended, whichever process runs it).

use serde::Deserialize;

use super::{Registry, parse};
use crate::ToolsError;
use crate::answers::{PreflightStopView, to_json};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportArgs {
    run_id: String,
    step: Option<String>,
    #[serde(default)]
    merged: bool,
    name: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StopTestArgs {
    test_id: String,
}

impl Registry {
    pub(super) async fn export_checkpoint(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<serde_json::Value, ToolsError> {
        let ExportArgs {
            run_id,
            step,
            merged,
            name: folder,
        } = parse(name, arguments)?;
        self.tools
            .blocking(move |tools| {
                let id = tools.run_id(&run_id)?;
                to_json(&tools.hand_over(&id, step.as_deref(), merged, folder.as_deref())?)
            })
            .await
    }

    pub(super) async fn stop_test(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<serde_json::Value, ToolsError> {
        let StopTestArgs { test_id } = parse(name, arguments)?;
        self.tools
            .blocking(move |tools| {
                to_json(&PreflightStopView::from(&tools.stop_preflight(&test_id)?))
            })
            .await
    }
}
