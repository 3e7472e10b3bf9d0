//! The Tinker SDK in a Python, against the one rl's programs are written for: `rl doctor`'s
//! "tinker SDK" check (what `rl setup --check` says of each Python is `SdkVersions`, in
//! `python_probe.rs`).

use std::path::Path;

use rl_settings::Settings;

use super::finding;
use crate::answers::Check;
use crate::python_probe::{PythonFacts, SdkVersions};

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
