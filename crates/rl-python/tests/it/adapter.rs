//! rl's loss adapter (`rl_trainer/losses.py`) against the real local engine: one optimizer
//! step through it gives the weights skyrl-tx's own loss with the same gradient gives
//! (`python/tests/engine_adapter_check.py` makes the calls and reports what it read).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rl_test_support::EngineServer;

/// The engine's start aside, five training steps and a dozen forward passes on the tiny model.
const LIMIT: Duration = Duration::from_secs(900);

/// Max |logprob difference| between two weights that should be the same: float32 sums in
/// another order, well below what one step moves (asserted too).
const SAME: f64 = 2e-3;

#[test]
#[ignore = "needs the test venv and the local engine: `cargo xtask test` runs it"]
fn the_adapters_ppo_and_cispo_step_as_the_engines_own_ppo_and_importance_sampling() {
    let folder = tempfile::tempdir().unwrap();
    let engine_dir = folder.path().join("engine");
    std::fs::create_dir(&engine_dir).unwrap();
    let local = rl_test_support::local_engine();
    let engine = EngineServer::start(&local, &engine_dir);
    let programs = rl_test_support::workspace_root().join("crates/rl-python/python");
    let out = folder.path().join("report.json");
    let mut child = Command::new(rl_test_support::test_python())
        .arg("tests/engine_adapter_check.py")
        .args(["--base-url", &engine.url, "--base-model"])
        .arg(&local.base_model)
        .current_dir(&programs)
        .env("PYTHONPATH", &programs)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("TINKER_API_KEY")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(folder.path().join("check.log")).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the check did not finish within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let said = std::fs::read_to_string(folder.path().join("check.log")).unwrap_or_default();
    let engine_log = std::fs::read_to_string(engine_dir.join("engine.log")).unwrap_or_default();
    assert!(status.success(), "{said}\nthe engine's log:\n{engine_log}");
    let text = std::fs::read_to_string(&out).unwrap();
    let report: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_else(|error| {
        panic!("{error}: {text}\n{said}");
    });
    eprintln!("what the check read: {report}");
    let number = |key: &str| {
        report[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key}: {report}"))
    };
    // Not vacuous: the step moves the logprobs well beyond the tolerance, and ppo's clip binds
    // (some ratios lie outside 0.8..1.2, and ppo's step differs from importance_sampling's).
    assert!(number("outside_ppo_clip") >= 4.0, "{report}");
    assert!(number("moved_ppo") > 20.0 * SAME, "{report}");
    assert!(number("moved_is") > 20.0 * SAME, "{report}");
    assert!(number("ppo_vs_is") > 5.0 * SAME, "{report}");
    assert!(number("narrow_ppo_vs_native") > 5.0 * SAME, "{report}");
    assert!(number("adapter_ppo_vs_native") < SAME, "{report}");
    assert!(number("adapter_cispo_vs_is") < SAME, "{report}");
    // The adapter's ppo reports the loss skyrl-tx's ppo computes (the sum of its per-token
    // losses), not its importance_sampling surrogate's.
    let loss = |name: &str| report["loss"][name].as_f64().unwrap();
    assert!(
        (loss("adapter_ppo") - loss("native_ppo")).abs() < 1e-3 * loss("native_ppo").abs().max(1.0),
        "{report}"
    );
    drop(engine);
}
