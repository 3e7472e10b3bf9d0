//! Malformed names, fields and values: each gets a clear error and leaves the stored state as
//! it was, byte for byte.

use rl_settings::Value;

use crate::service;

fn long(n: usize) -> String {
    "x".repeat(n)
}

#[test]
fn every_bad_input_is_refused_and_changes_nothing() {
    let (home, service) = service();
    service.select("word_ladder").unwrap();
    service.edit("seed", &Value::Int(5)).unwrap();
    let state = home.path().join("selection.json");
    let before = std::fs::read(&state).unwrap();

    let bad_names = [
        "",
        "   ",
        "../../etc/passwd",
        "gsm8k\u{0}",
        "gsm8k_tinker\n",
        "ünïcødé名前",
        "*a",
        "!!python/object:os.system",
        "{",
        "countdown",
        &long(10_000),
    ];
    let bad_fields = [
        "",
        "GROUP_SIZE",
        "group size",
        "../seed",
        "ü",
        "*a",
        "{",
        "!!python/object",
        "__class__",
        &long(1_000),
        "max_token_length",
        "tokenizer_name",
        "use_wandb",
    ];
    let bad_values: Vec<(&str, Value)> = vec![
        ("group_size", "abc".into()),
        ("group_size", "*a".into()),
        ("group_size", "!!python/object:os.system".into()),
        ("group_size", "{".into()),
        ("group_size", 1.5.into()),
        ("group_size", Value::List(vec![1.into()])),
        ("group_size", Value::Null),
        ("group_size", true.into()),
        ("max_rungs", 1.into()),
        ("max_rungs", 33.into()),
        ("temperature", 0.into()),
        ("temperature", f64::NAN.into()),
        ("answer_format", "yaml".into()),
        ("difficulty", "impossible".into()),
        ("label", "".into()),
        ("label", long(41).as_str().into()),
        ("wandb_name", long(5_000).as_str().into()),
        ("wandb_name", "bell\u{7}".into()),
        ("eval_handling", "STOP".into()),
        ("banned_words", "not a list".into()),
        ("banned_words", Value::List(vec![1.into(), 2.into()])),
        (
            "dictionary_path",
            Value::Map([("a".to_owned(), 1.into())].into()),
        ),
        ("seed", "1e3".into()),
        ("wandb_project", "a/b".into()),
        ("wandb_project", "".into()),
        ("wandb_project", 5.into()),
        ("max_reasoning_tokens", 100.into()),
        ("reasoning_effort", "extreme".into()),
    ];

    let mut messages = Vec::new();
    for name in bad_names {
        let error = service.select(name).unwrap_err();
        messages.push(format!("select {:?}: {error}", shorten(name)));
    }
    for field in bad_fields {
        let error = service.edit(field, &Value::Int(1)).unwrap_err();
        messages.push(format!("edit {:?}: {error}", shorten(field)));
    }
    for (field, value) in &bad_values {
        let error = service.edit(field, value).unwrap_err();
        messages.push(format!(
            "edit {field} = {}: {error}",
            shorten(&value.to_string())
        ));
    }
    assert!(messages.len() >= 30, "{}", messages.len());
    assert_eq!(
        std::fs::read(&state).unwrap(),
        before,
        "a refused request changed the state"
    );
    insta::assert_snapshot!(messages.join("\n"));
}

fn shorten(text: &str) -> String {
    if text.chars().count() > 40 {
        format!(
            "{}… ({} chars)",
            text.chars().take(20).collect::<String>(),
            text.chars().count()
        )
    } else {
        text.to_owned()
    }
}
