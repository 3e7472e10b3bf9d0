//! `rl_install_environment`: what `rl setup --env NAME` installs, asked by an agent, within
//! what the operator's `[agents] install` allows (an environment of the operator's folder by
//! default; a published package only when the operator says so). The same installer, locks
//! and records as the CLI's: two installs of one environment wait for each other.

use rl_settings::AgentInstalls;

use crate::answers::EnvironmentInstalled;
use crate::own_python::{SetUpTarget, set_up_environment};
use crate::setup::Installer;
use crate::{Tools, ToolsError};

impl Tools {
    /// Installs what environment `name` (or the published package `name==version`) needs,
    /// telling `say` each step.
    pub fn install_environment(
        &self,
        name: &str,
        say: &dyn Fn(&str),
    ) -> Result<EnvironmentInstalled, ToolsError> {
        let settings = self.settings()?;
        let target = self.set_up_target(name)?;
        let allowed = settings.agents.install;
        let (what, needs) = match &target {
            SetUpTarget::Known(_) => (
                "an environment of the operator's folder",
                AgentInstalls::Folder,
            ),
            SetUpTarget::Registry(_) => ("a published package", AgentInstalls::Published),
        };
        if !allowed.allows(needs) {
            return Err(ToolsError::OperatorForbids {
                what: format!("installing {} ({what})", rl_settings::quoted(name)),
                reason: format!(
                    "the operator's config.toml says [agents] install = \"{}\" (\"folder\": \
                     the environments of the operator's folder; \"published\": also packages of \
                     the registry at an exact version); ask the operator to run `rl setup --env \
                     {name}` or to allow it",
                    allowed.name()
                ),
            });
        }
        let installer = Installer::new(self.home(), say);
        let (python, installed) =
            set_up_environment(self.home(), &settings, &target, &installer, say)?;
        let message = if installed.nothing_to_do {
            format!(
                "{name}: every import found in {}, nothing installed",
                python.display()
            )
        } else {
            format!(
                "{name}: installed {} into {}",
                installed.packages.join(" "),
                python.display()
            )
        };
        Ok(EnvironmentInstalled {
            environment: name.to_owned(),
            python,
            installed: installed.packages,
            nothing_to_do: installed.nothing_to_do,
            record: installed.record,
            installer: installer.used(),
            message,
        })
    }
}
