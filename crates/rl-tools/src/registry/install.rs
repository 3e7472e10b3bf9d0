//! `rl_install_environment`'s call: the install runs off the async runtime, each step it says
//! told as progress (a client that asked for progress sees the minutes pass).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::Deserialize;

use super::{CallProgress, Registry, parse};
use crate::ToolsError;
use crate::answers::to_json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InstallArgs {
    name: String,
}

impl Registry {
    pub(super) async fn install_environment(
        &self,
        name: &str,
        arguments: serde_json::Value,
        progress: Option<CallProgress>,
    ) -> Result<serde_json::Value, ToolsError> {
        let InstallArgs { name: environment } = parse(name, arguments)?;
        let told = Arc::new(AtomicU32::new(0));
        self.tools
            .blocking(move |tools| {
                let say = |line: &str| {
                    if let Some(progress) = &progress {
                        let step = told.fetch_add(1, Ordering::Relaxed) + 1;
                        progress(f64::from(step), None, line.to_owned());
                    }
                };
                to_json(&tools.install_environment(&environment, &say)?)
            })
            .await
    }
}
