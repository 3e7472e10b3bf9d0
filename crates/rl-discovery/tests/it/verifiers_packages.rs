//! verifiers environments in a folder of environment packages: v1 tasksets (classes deriving
//! from `vf.Taskset`, their config the taskset's second argument) and v0 modules
//! (`load_environment`), each with its kind and its package, beside Atropos environments.

use rl_discovery::{ConfigClassSource, EnvironmentKind, ScanOptions};

use crate::tree;

const V1_PYPROJECT: &[u8] =
    b"[project]\nname = \"count-up\"\nversion = \"0.1.0\"\ndependencies = [\"verifiers>=0.4\"]\n";
const V1_INIT: &[u8] =
    b"from count_up.taskset import CountTaskset\n\n__all__ = [\"CountTaskset\"]\n";
const V1_TASKSET: &[u8] = b"import verifiers.v1 as vf\n\n\nclass CountData(vf.TaskData):\n    target: int = 0\n\n\nclass CountTask(vf.Task[CountData]):\n    @vf.reward(weight=1.0)\n    async def reward(self, trace: vf.Trace) -> float:\n        return 0.0\n\n\nclass CountConfig(vf.TasksetConfig):\n    num_tasks: int = 8\n\n\nclass CountTaskset(vf.Taskset[CountTask, CountConfig]):\n    \"\"\"Counts up.\"\"\"\n\n    def load(self):\n        return []\n";
const V0_PYPROJECT: &[u8] = b"[project]\nname = \"echo-back\"\nversion = \"0.1.0\"\ndependencies = [\"verifiers>=0.1.9,<0.2\", \"datasets\"]\n";
const V0_MODULE: &[u8] = b"\"\"\"Echoes its prompt back.\"\"\"\nimport verifiers as vf\n\n\ndef load_environment(num_examples: int = 16, **kwargs) -> vf.Environment:\n    return vf.SingleTurnEnv()\n";

fn packages() -> tempfile::TempDir {
    tree(&[
        ("count-up/pyproject.toml", V1_PYPROJECT),
        ("count-up/count_up/__init__.py", V1_INIT),
        ("count-up/count_up/taskset.py", V1_TASKSET),
        ("echo-back/pyproject.toml", V0_PYPROJECT),
        ("echo-back/echo_back.py", V0_MODULE),
        // Not a verifiers package: never walked by a top-level scan.
        (
            "notes/pyproject.toml",
            b"[project]\nname = \"notes\"\ndependencies = []\n",
        ),
        ("notes/echo_again.py", V0_MODULE),
    ])
}

#[test]
fn a_folder_of_packages_lists_v1_and_v0_environments_with_their_kind() {
    let dir = packages();
    let scan = rl_discovery::scan(dir.path(), &ScanOptions::default()).unwrap();
    let found: Vec<_> = scan
        .environments
        .iter()
        .map(|env| {
            (
                env.name.as_str(),
                env.kind,
                env.file.as_str(),
                env.config_class.as_str(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "count-up",
                EnvironmentKind::VerifiersV1,
                "count-up/count_up/taskset.py",
                "CountConfig"
            ),
            (
                "echo-back",
                EnvironmentKind::VerifiersV0,
                "echo-back/echo_back.py",
                "load_environment"
            ),
        ]
    );
    let v1 = &scan.environments[0];
    assert_eq!(v1.config_class_source, ConfigClassSource::TasksetArgument);
    assert_eq!(v1.description, "Counts up.");
    assert_eq!(v1.bases, ["verifiers.v1.Taskset"]);
    assert_eq!(v1.project.as_ref().unwrap().folder, "count-up");
    let v0 = &scan.environments[1];
    assert_eq!(v0.description, "Echoes its prompt back.");
    assert_eq!(
        v0.project.as_ref().unwrap().verifiers,
        "verifiers>=0.1.9,<0.2"
    );
    assert!(scan.skipped.is_empty(), "{:?}", scan.skipped);
}

#[test]
fn the_config_class_of_a_taskset_resolves_to_its_class() {
    let dir = packages();
    let scan = rl_discovery::scan(dir.path(), &ScanOptions::default()).unwrap();
    let v1 = &scan.environments[0];
    let target = scan.config_class_target(v1).unwrap();
    let rl_discovery::ClassTarget::Scanned(location) = target else {
        panic!("{target:?}")
    };
    assert_eq!(location.class_name, "CountConfig");
    assert_eq!(location.file, "count-up/count_up/taskset.py");
    assert_eq!(
        scan.class_bases(&location),
        [rl_discovery::ClassTarget::External(
            "verifiers.v1.TasksetConfig".to_owned()
        )]
    );
}

#[test]
fn a_module_importing_verifiers_v1_or_nothing_of_verifiers_is_no_v0_environment() {
    let dir = tree(&[
        (
            "a.py",
            b"import verifiers.v1 as vf\ndef load_environment():\n    pass\n",
        ),
        ("b.py", b"def load_environment():\n    pass\n"),
        (
            "c.py",
            b"from verifiers import v1\ndef load_environment():\n    pass\n",
        ),
        (
            "d.py",
            b"from verifiers import SingleTurnEnv\ndef load_environment():\n    pass\n",
        ),
    ]);
    let scan = rl_discovery::scan(dir.path(), &ScanOptions::default()).unwrap();
    let names: Vec<_> = scan
        .environments
        .iter()
        .map(|env| env.name.as_str())
        .collect();
    assert_eq!(names, ["d"]);
}
