//! A run's answers say the kind of environment it ran (`environment_kind`), as its folder's
//! `environment.json` records it: a verifiers run is shown as one, a run recorded before
//! verifiers as Atropos, and a run whose record is gone as unknown (`null`), never a guess.

use rl_process::RunState;
use rl_settings::{RunFolder, RunId, run_dir};
use serde_json::{Value, json};

use crate::answers::{FIXTURE_RUN, Fixture, ended_run_with, fixture};

/// The kind each run answer shows: list, status, results, stop, and the page's list.
fn kinds_shown(fixture: &Fixture) -> Vec<Value> {
    let run = json!({"run_id": FIXTURE_RUN});
    let list = fixture.call("rl_list_runs", json!({}));
    let status = fixture.call("rl_check_status", run.clone());
    let results = fixture.call("rl_get_results", run.clone());
    let stopped = fixture.call("rl_stop_training", run);
    let rows = fixture.registry_tools().run_rows().unwrap();
    vec![
        list["answer"]["runs"][0]["environment_kind"].clone(),
        status["answer"]["environment_kind"].clone(),
        results["answer"]["environment_kind"].clone(),
        stopped["answer"]["run"]["environment_kind"].clone(),
        serde_json::to_value(&rows.runs[0]).unwrap()["environment_kind"].clone(),
    ]
}

#[test]
fn run_answers_say_the_kind_the_run_recorded() {
    let fixture = fixture();
    ended_run_with(&fixture, RunState::Completed, None);
    let folder = RunFolder::at(run_dir(fixture.home(), &RunId::parse(FIXTURE_RUN).unwrap()));
    let path = folder.environment();
    let mut recorded: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(recorded["environment"]["kind"], "atropos");
    assert_eq!(kinds_shown(&fixture), vec![json!("atropos"); 5]);

    recorded["environment"]["kind"] = json!("verifiers-v0");
    std::fs::write(&path, recorded.to_string()).unwrap();
    assert_eq!(kinds_shown(&fixture), vec![json!("verifiers-v0"); 5]);

    // Recorded before verifiers: no kind, which was Atropos then.
    recorded["environment"]
        .as_object_mut()
        .unwrap()
        .remove("kind");
    std::fs::write(&path, recorded.to_string()).unwrap();
    assert_eq!(kinds_shown(&fixture), vec![json!("atropos"); 5]);

    // No record (or no readable one): unknown, not a default.
    std::fs::write(&path, b"{not json").unwrap();
    assert_eq!(kinds_shown(&fixture), vec![Value::Null; 5]);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(kinds_shown(&fixture), vec![Value::Null; 5]);
}
