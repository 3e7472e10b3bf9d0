//! Config classes built to break a parser or a recursive walk: read without ending the process.

use rl_config::{DefaultValue, FieldType, config_schema};
use rl_settings::Value;

/// A config class nesting as deeply as discovery lets a file nest, read on a thread with half
/// the stack of the threads that serve tools (tokio's blocking pool), in a debug build.
#[test]
fn a_config_class_nesting_to_the_limits_is_read_on_a_small_stack() {
    let depth = rl_discovery::Nesting::Expression.limit() as usize - 20;
    let minus_one = format!("-{}1", "-".repeat(depth & !1));
    let source = format!(
        "from atroposlib.envs.base import BaseEnv, BaseEnvConfig\n\n\n\
         class DeepConfig(BaseEnvConfig):\n    \
             negative: int = {minus_one}\n    \
             union: {} = None\n    \
             forward: \"{}\" = 1\n\n\n\
         class DeepEnv(BaseEnv):\n    \
             name = \"deep\"\n    \
             env_config_cls = DeepConfig\n\n    \
             @classmethod\n    \
             def config_init(cls):\n        \
                 return DeepConfig(negative={minus_one}), []\n",
        "None | ".repeat(depth) + "int",
        "[".repeat(150_000),
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("deep.py"), source).unwrap();
    let root = dir.path().to_owned();
    let schema = std::thread::Builder::new()
        .stack_size(1024 * 1024)
        .spawn(move || {
            let scan = rl_discovery::scan(&root, &rl_discovery::ScanOptions::default()).unwrap();
            assert!(scan.skipped.is_empty(), "{:#?}", scan.skipped);
            config_schema(&scan, scan.find("deep").unwrap()).unwrap()
        })
        .unwrap()
        .join()
        .unwrap();

    let field = |name: &str| schema.fields.iter().find(|f| f.name == name).unwrap();
    let minus_one_value = DefaultValue::Value {
        value: Value::Int(-1),
    };
    assert_eq!(field("negative").class_default, minus_one_value);
    assert_eq!(field("negative").env_default, Some(minus_one_value));
    // A union of one type and None is that type, optional.
    let optional_int = FieldType::Optional {
        inner: Box::new(FieldType::Int),
    };
    assert!(field("union").field_type == optional_int, "union not read");
    // The string annotation nests past the limit: its type is not known, and nothing crashed.
    assert!(
        matches!(field("forward").field_type, FieldType::Unknown { .. }),
        "{:?}",
        field("forward").field_type
    );
}

/// Runs `work` on another thread, failing (not hanging) if it blocks.
fn within_a_minute<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(work());
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("blocked on a FIFO")
}

fn fifo(path: &std::path::Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
}

/// A FIFO where rl keeps its settings, keys or selection is refused with what it is; opening it
/// waited forever before, and every face hung.
#[test]
fn state_files_that_are_fifos_are_refused_not_waited_on() {
    let home = tempfile::tempdir().unwrap();
    fifo(&home.path().join("config.toml"));
    let path = home.path().to_owned();
    let error = within_a_minute(move || rl_settings::Settings::load(&path, Vec::new()))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("config.toml is a FIFO (named pipe), not a regular file"),
        "{error}"
    );

    let home = tempfile::tempdir().unwrap();
    fifo(&home.path().join(".env"));
    let path = home.path().to_owned();
    let secrets = within_a_minute(move || {
        rl_settings::Secrets::load(&path, &std::collections::BTreeMap::new())
    });
    assert!(
        secrets
            .warnings
            .iter()
            .any(|w| w.contains(".env is a FIFO")),
        "{:?}",
        secrets.warnings
    );

    for state in ["selection.json", "selection.lock"] {
        let home = tempfile::tempdir().unwrap();
        fifo(&home.path().join(state));
        let path = home.path().to_owned();
        let settings = rl_settings::Settings {
            tinker_atropos_root: Some(crate::fixture_tree()),
            ..Default::default()
        };
        let error = within_a_minute(move || {
            let service = rl_config::ConfigService::open(&path, settings).unwrap();
            service.select("word_ladder").map(|_| ())
        })
        .unwrap_err()
        .to_string();
        assert!(error.contains(&format!("{state} is a FIFO")), "{error}");
    }
}
