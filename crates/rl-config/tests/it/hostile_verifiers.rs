//! verifiers environments built to break `rl config show|set`: a `load_environment` of 100 000
//! keyword arguments, a taskset config class of 100 000 fields, a default nested as deep as
//! discovery lets a file nest. Selected, shown and edited on a thread with half the stack of a
//! tool server's, in bounded time: a correct result or a clear error, never a crash or a hang.

use std::time::{Duration, Instant};

use rl_config::{ConfigService, DefaultValue, FieldType};
use rl_settings::Value;

const FIELDS: usize = 100_000;

/// Brackets as deep as discovery lets a file nest them (`Nesting::Brackets`), less the
/// function's own parentheses.
const DEEP: usize = 190;

fn wide_v0() -> String {
    let mut text = String::from("import verifiers as vf\n\n\ndef load_environment(\n");
    for i in 0..FIELDS {
        text.push_str(&format!("    p{i}: int = {i},\n"));
    }
    text.push_str("):\n    return vf.SingleTurnEnv()\n");
    text
}

fn wide_taskset() -> String {
    let mut text = String::from(
        "import verifiers.v1 as vf\n\n\nclass WideTask(vf.Task):\n    pass\n\n\n\
         class WideConfig(vf.TasksetConfig):\n",
    );
    for i in 0..FIELDS {
        text.push_str(&format!("    f{i}: int = {i}\n"));
    }
    text.push_str(
        "\n\nclass WideTaskset(vf.Taskset[WideTask, WideConfig]):\n    def load(self):\n        \
         return []\n",
    );
    text
}

fn deep_v0() -> String {
    format!(
        "import verifiers as vf\n\n\ndef load_environment(n: int = 1, x: dict = {}1{}):\n    \
         return vf.SingleTurnEnv()\n",
        "{\"a\": ".repeat(DEEP),
        "}".repeat(DEEP)
    )
}

/// Runs `work` on a thread with a 1 MiB stack, failing (not hanging) past `limit`.
fn bounded<T: Send + 'static>(limit: Duration, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .stack_size(1024 * 1024)
        .spawn(move || {
            let _ = done.send(work());
        })
        .unwrap();
    finished
        .recv_timeout(limit)
        .unwrap_or_else(|_| panic!("not done within {limit:?}"))
}

fn service_over(files: &[(&str, String)]) -> (tempfile::TempDir, tempfile::TempDir, ConfigService) {
    let envs = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = envs.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    let settings = rl_settings::Settings {
        environments_dir: Some(envs.path().to_owned()),
        ..Default::default()
    };
    let service = ConfigService::open(home.path(), settings).unwrap();
    (envs, home, service)
}

#[test]
fn a_hundred_thousand_fields_are_shown_and_set_in_bounded_time() {
    let pyproject = "[project]\nname = \"wide-taskset\"\ndependencies = [\"verifiers>=0.4\"]\n";
    let (_envs, _home, service) = service_over(&[
        ("wide_v0.py", wide_v0()),
        ("wide-taskset/pyproject.toml", pyproject.to_owned()),
        ("wide-taskset/wide_taskset/__init__.py", wide_taskset()),
    ]);
    let began = Instant::now();
    bounded(Duration::from_secs(300), move || {
        for (name, last) in [("wide_v0", "p99999"), ("wide-taskset", "f99999")] {
            let selected = service.select(name).unwrap();
            assert!(selected.field_count > FIELDS, "{name}: {selected:?}");
            service.edit(last, &Value::from("7")).unwrap();
            let refused = service.edit(last, &Value::from("seven")).unwrap_err();
            assert!(refused.to_string().contains(last), "{refused}");
            let current = service.current().unwrap();
            let field = current
                .fields
                .iter()
                .find(|field| field.spec.name == last)
                .unwrap();
            assert_eq!(
                field.current,
                DefaultValue::Value {
                    value: Value::Int(7)
                },
                "{name}"
            );
        }
    });
    eprintln!(
        "two selections, edits and shows of 100 000 fields: {:?}",
        began.elapsed()
    );
}

/// A default nested as deep as a file may nest is read as its value, shown, and the other
/// fields set; a value as deep given to `rl config set` is refused with why.
#[test]
fn a_default_nested_to_the_limit_is_shown_and_its_environment_configured() {
    let (_envs, _home, service) = service_over(&[("deep_v0.py", deep_v0())]);
    bounded(Duration::from_secs(120), move || {
        service.select("deep_v0").unwrap();
        service.edit("n", &Value::from("3")).unwrap();
        let current = service.current().unwrap();
        let x = current
            .fields
            .iter()
            .find(|field| field.spec.name == "x")
            .unwrap();
        let mut depth = 0;
        let DefaultValue::Value { value } = &x.current else {
            panic!("{:?}", x.current);
        };
        let mut value = value;
        while let Value::Map(map) = value {
            depth += 1;
            value = &map["a"];
        }
        assert_eq!((depth, value), (DEEP, &Value::Int(1)));
        assert!(
            matches!(x.spec.field_type, FieldType::Map),
            "{:?}",
            x.spec.field_type
        );
        let deep_json = format!("{}1{}", "{\"a\": ".repeat(100_000), "}".repeat(100_000));
        let refused = service.edit("x", &Value::from(deep_json.as_str()));
        assert!(refused.is_err(), "{refused:?}");
        // The selection is still readable and keeps the edit made before.
        let current = service.current().unwrap();
        let n = current.fields.iter().find(|f| f.spec.name == "n").unwrap();
        assert_eq!(
            n.current,
            DefaultValue::Value {
                value: Value::Int(3)
            }
        );
    });
}
