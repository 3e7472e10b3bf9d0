//! Config classes built to break a parser or a recursive walk: read without ending the process.

use rl_config::{DefaultValue, FieldType, Value, config_schema};

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
            let scan = rl_discovery::scan(&root, &Default::default()).unwrap();
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
