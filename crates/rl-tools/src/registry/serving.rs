//! The serving tools' calls: `rl_serve_checkpoint` (a detached server, answered while it
//! starts) and `rl_stop_serving`; `rl_list_served` is a plain read, in the registry.

use serde::Deserialize;

use super::{Registry, parse};
use crate::ToolsError;
use crate::answers::{ServingAnswer, to_json};
use crate::checkpoint_models::checkpoint_model;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServeArgs {
    run_id: String,
    step: Option<String>,
    #[serde(default)]
    with_base: bool,
    port: Option<u16>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StopServingArgs {
    serve_id: String,
}

impl Registry {
    pub(super) async fn serve_checkpoint(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<serde_json::Value, ToolsError> {
        let ServeArgs {
            run_id,
            step,
            with_base,
            port,
        } = parse(name, arguments)?;
        self.tools
            .blocking(move |tools| {
                let id = tools.run_id(&run_id)?;
                let mut models = vec![checkpoint_model(&id, step.as_deref())];
                if with_base {
                    models.push(checkpoint_model(&id, Some("base")));
                }
                to_json(&ServingAnswer::from(tools.start_serving(&models, port)?))
            })
            .await
    }

    pub(super) async fn stop_serving(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<serde_json::Value, ToolsError> {
        let StopServingArgs { serve_id } = parse(name, arguments)?;
        self.tools
            .blocking(move |tools| to_json(&tools.stop_serving(&serve_id)?))
            .await
    }
}
