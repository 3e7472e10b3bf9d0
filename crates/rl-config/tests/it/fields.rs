use rl_config::{DefaultValue, FieldType, config_schema};
use rl_settings::Value;

use crate::fixture_scan;

/// One snapshot per fixture environment: the whole field table as read (what an agent sees of
/// it is snapshotted at the edge, in rl-cli's `json_outputs`).
#[test]
fn field_tables_of_every_fixture_environment() {
    let scan = fixture_scan();
    for env in &scan.environments {
        let schema = config_schema(&scan, env).unwrap();
        insta::with_settings!({ snapshot_suffix => env.key.replace(['@', '/', ':'], "_") }, {
            insta::assert_debug_snapshot!(schema);
        });
    }
}

#[test]
fn inherited_config_class_has_its_bases_fields_in_order() {
    let scan = fixture_scan();
    let schema = config_schema(&scan, scan.find("gsm8k_harder").unwrap()).unwrap();
    let names: Vec<&str> = schema.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names[0], "group_size", "atroposlib's fields come first");
    let declared: Vec<&str> = schema
        .fields
        .iter()
        .map(|f| f.declared_in.as_str())
        .collect();
    assert!(declared.contains(&"GSM8kTinkerConfig") && declared.contains(&"GSM8kHarderConfig"));
    assert_eq!(
        schema.fields.len(),
        names
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    );
}

#[test]
fn literal_enum_constraints_and_computed_values() {
    let scan = fixture_scan();
    let schema = config_schema(&scan, scan.find("word_ladder").unwrap()).unwrap();
    let field = |name: &str| schema.field(name).unwrap();

    let FieldType::Enum { members, .. } = &field("difficulty").field_type else {
        panic!()
    };
    assert_eq!(members.len(), 3);
    assert_eq!(
        field("difficulty").class_default.value(),
        Some(&Value::from("medium"))
    );
    assert_eq!(
        field("difficulty").effective_default().value(),
        Some(&Value::from("hard"))
    );

    assert!(
        matches!(&field("answer_format").field_type, FieldType::Literal { values } if values.len() == 3)
    );
    assert_eq!(field("max_rungs").constraints.ge, Some(2.0));
    assert!(
        matches!(field("max_rungs").env_default, Some(DefaultValue::Computed { ref expression }) if expression == "words * 2")
    );
    assert!(matches!(
        field("tokenizer_name").env_default,
        Some(DefaultValue::Computed { .. })
    ));
    assert_eq!(
        field("steps_per_eval").effective_default().value(),
        Some(&Value::Int(20))
    );
    assert_eq!(field("label").class_default, DefaultValue::Required);
    assert_eq!(
        field("banned_words").class_default.value(),
        Some(&Value::List(vec![]))
    );
    assert_eq!(
        field("group_size").class_default.value(),
        Some(&Value::Int(4))
    );
    assert_eq!(
        field("group_size").effective_default().value(),
        Some(&Value::Int(8))
    );
    assert_eq!(
        field("seed").effective_default().value(),
        Some(&Value::Int(7)),
        "from **extra, a literal dict"
    );
}

#[test]
fn builtin_table_matches_the_facts_of_atroposlib_0_4_0() {
    let scan = fixture_scan();
    let schema = config_schema(&scan, scan.find("fallback").unwrap()).unwrap();
    assert_eq!(schema.config_class, "BaseEnvConfig");
    assert_eq!(schema.fields.len(), 29);
    let eval = schema.field("eval_handling").unwrap();
    assert_eq!(eval.class_default.value(), Some(&Value::from("STOP_TRAIN")));
    let tokens = schema.field("max_reasoning_tokens").unwrap();
    assert_eq!(
        (tokens.constraints.ge, tokens.constraints.le),
        (Some(1024.0), Some(32000.0))
    );
    assert!(matches!(tokens.field_type, FieldType::Optional { .. }));
}
