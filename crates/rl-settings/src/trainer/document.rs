//! The contract as the trainer reads it: every key, the constants, the run folder's names and
//! the rules across keys, written as `contract.json` beside rl's Python packages.

use serde_json::json;

use super::{D, EVALUATE_MARGIN, EXIT_CAPPED, KEYS};

/// The rules across keys, and which side's check is the one that refuses a run: rl's, before
/// anything starts, or the trainer's, on a config nobody checked (one written by hand).
const RULES: &[(&str, &str)] = &[
    (
        "env.group_size <= env.batch_size (once batch_size 0 or less is read as twice the group)",
        "rl: rl-config's rules at each edit and before a run starts; the trainer again at its start",
    ),
    (
        "tinker.starting_step < env.total_steps, and tinker.resume_state given when starting_step > 0",
        "rl writes both only for a resumed run; the trainer refuses a config that breaks it",
    ),
    (
        "tinker.eval_prompts and eval_group_size within a pre-flight's bounds",
        "rl: rl_preflight::check_size as the run starts",
    ),
];

/// The contract as the trainer reads it (`contract.json` beside rl's Python packages).
pub fn contract_document() -> serde_json::Value {
    let mut sections = serde_json::Map::new();
    for key in KEYS {
        let default = match key.default {
            D::Absent => serde_json::Value::Null,
            D::Integer(n) => json!(n),
            D::Number(x) => json!(x),
            D::Text(text) => json!(text),
            D::Boolean(b) => json!(b),
            D::Key { key, otherwise } => json!({ "key": key, "otherwise": otherwise }),
            D::ByEngine { loopback, remote } => json!({ "loopback": loopback, "remote": remote }),
        };
        let entry = json!({
            "kind": key.kind,
            "default": default,
            "minimum": key.minimum,
            "exclusive": key.exclusive,
            "maximum": key.maximum,
            "reader": key.reader,
            "choices": key.choices,
            "doc": key.doc,
        });
        let section = sections
            .entry(key.section.name())
            .or_insert_with(|| json!({}));
        if let Some(section) = section.as_object_mut() {
            section.insert(key.name.to_owned(), entry);
        }
    }
    json!({
        "about": "Generated from crates/rl-settings/src/trainer.rs (the test contract_file_is_current rewrites it); do not edit.",
        "sections": sections,
        "constants": {
            "evaluate_margin_secs": EVALUATE_MARGIN.as_secs(),
            "exit_capped": EXIT_CAPPED,
            "hosted_tinker_url": crate::HOSTED_TINKER_URL,
            "local_engine_ppo_clip": [super::LOCAL_ENGINE_PPO_CLIP.0, super::LOCAL_ENGINE_PPO_CLIP.1],
            "local_adapter_cispo_clip": [super::LOCAL_ADAPTER_CISPO_CLIP.0, super::LOCAL_ADAPTER_CISPO_CLIP.1],
            "local_adapter_dro_beta": super::LOCAL_ADAPTER_DRO_BETA,
        },
        "run_folder": crate::run_folder::names_for_python(),
        "rules": RULES
            .iter()
            .map(|(rule, authority)| json!({ "rule": rule, "authority": authority }))
            .collect::<Vec<_>>(),
    })
}
