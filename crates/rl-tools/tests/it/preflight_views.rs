//! What `rl preflight list|show|wait|stop --json` print of tests that the pre-flight store
//! lists, shows unfinished, or stops: every key, with every optional one present.

use std::path::PathBuf;

use rl_preflight::{
    Interruption, ModelProgress, PreflightListing, PreflightProgress, PreflightStatus,
    PreflightStopReport, PreflightView, Verdict,
};
use rl_tools::{PreflightListingView, PreflightShown, PreflightStopView};
use serde_json::Value;

fn listing() -> PreflightListing {
    PreflightListing {
        test_id: "0badc0de".to_owned(),
        environment: "word_ladder".to_owned(),
        models: vec!["tiny".to_owned(), "small".to_owned()],
        started_at: "2026-11-24T10:00:00Z".to_owned(),
        status: PreflightStatus::Finished,
        verdict: Some(Verdict::TooHard),
        models_succeeded: Some(1),
        output_dir: PathBuf::from("/home/rl/preflight/0badc0de"),
    }
}

fn progress() -> PreflightProgress {
    PreflightProgress {
        test_id: "0badc0de".to_owned(),
        status: PreflightStatus::Interrupted,
        environment: "word_ladder".to_owned(),
        base_url: "http://127.0.0.1:8000/v1".to_owned(),
        started_at: "2026-11-24T10:00:00Z".to_owned(),
        output_dir: PathBuf::from("/home/rl/preflight/0badc0de"),
        owner_pid: Some(4242),
        stop_requested_at: Some("2026-11-24T10:01:00Z".to_owned()),
        interruption: Some(Interruption {
            found_at: "2026-11-24T10:02:00Z".to_owned(),
            reason: "its process 4242 is gone".to_owned(),
            ended: "no model process was left".to_owned(),
        }),
        models: vec![ModelProgress {
            model: "tiny".to_owned(),
            groups_done: 3,
            total_groups: Some(8),
            running: false,
            log_path: PathBuf::from("/home/rl/preflight/0badc0de/tiny.log"),
        }],
    }
}

fn stopped() -> PreflightStopReport {
    PreflightStopReport {
        test_id: "0badc0de".to_owned(),
        stopped: true,
        status: PreflightStatus::Stopped,
        message: "stopped test 0badc0de".to_owned(),
    }
}

fn json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap()
}

fn shown(progress: PreflightProgress) -> PreflightShown {
    PreflightShown::from(&PreflightView::Unfinished(Box::new(progress)))
}

#[test]
fn a_listing_names_every_key() {
    insta::assert_json_snapshot!(json(&vec![PreflightListingView::from(&listing())]));
}

#[test]
fn an_unfinished_test_names_every_key() {
    let mut quiet = progress();
    quiet.stop_requested_at = None;
    quiet.interruption = None;
    quiet.status = PreflightStatus::Running;
    insta::assert_json_snapshot!(json(&vec![shown(progress()), shown(quiet)]));
}

#[test]
fn a_stop_names_every_key() {
    insta::assert_json_snapshot!(json(&PreflightStopView::from(&stopped())));
}
