//! The Tinker SDK in a Python, against the one rl's programs are written for: `rl doctor`'s
//! "tinker SDK" check and what `rl setup --check` says of each Python.

use std::path::Path;

use rl_settings::Settings;

use super::{PythonFacts, finding};
use crate::answers::Check;

/// The Tinker SDK a Python holds, beside the one rl's programs are written for
/// ([`rl_python::SDK`]): the hosted service refuses SDKs it no longer supports, and the local
/// engine speaks the protocol of the pinned one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdkVersions {
    /// `None`: not installed in that Python.
    pub installed: Option<String>,
    pub built_for: &'static str,
}

impl SdkVersions {
    pub(crate) fn of(facts: &PythonFacts) -> Self {
        Self {
            installed: facts.packages.get(rl_python::SDK.name).cloned().flatten(),
            built_for: rl_python::SDK.version,
        }
    }

    pub fn matches(&self) -> bool {
        self.installed.as_deref() == Some(self.built_for)
    }

    /// `0.38.0 (what rl was built for)`, `0.16.1 installed, rl was built for 0.38.0`, ...
    pub fn describe(&self) -> String {
        match &self.installed {
            Some(installed) if self.matches() => format!("{installed} (what rl was built for)"),
            Some(installed) => {
                format!("{installed} installed, rl was built for {}", self.built_for)
            }
            None => format!("not installed, rl was built for {}", self.built_for),
        }
    }
}

/// The SDK in the trainer's Python (`tinker SDK`): what the service and the engine are
/// spoken to with.
pub(super) fn sdk_check(
    home: &Path,
    settings: &Settings,
    probed: &Result<PythonFacts, String>,
) -> Check {
    let Ok(facts) = probed else {
        return finding(
            "tinker SDK",
            true,
            Err((
                "not checked: no working Python".to_owned(),
                "fix Python first".to_owned(),
            )),
        );
    };
    let versions = SdkVersions::of(facts);
    if versions.matches() {
        return finding("tinker SDK", true, Ok(versions.describe()));
    }
    let fix = if crate::setup::is_managed(home, &settings.python) {
        "rl setup (it installs the SDK rl was built for)".to_owned()
    } else {
        format!(
            "{} -m pip install {}=={}",
            settings.python.display(),
            rl_python::SDK.name,
            rl_python::SDK.version
        )
    };
    finding("tinker SDK", true, Err((versions.describe(), fix)))
}
