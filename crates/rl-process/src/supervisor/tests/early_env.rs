//! An environment run through `rl_env` starts first (issue 40): its setup runs while the engine,
//! run-api and trainer start, it registers only once the supervisor writes its go file, and one
//! that dies in its setup fails the run at once, quoting the exception that ended it.

use super::*;

/// A run on the local engine whose environment's spec names a go file.
fn run_with_go_file() -> (Run, std::path::PathBuf) {
    let mut run = new_run_of(quick(), false, &Component::START_ORDER);
    let go = run.home.path().join("env-go");
    for spec in &mut run.plan.components {
        if spec.component == Component::Env {
            spec.env.push((
                rl_python::ENV_GO_VARIABLE.to_owned(),
                go.to_string_lossy().into_owned(),
            ));
        }
    }
    (run, go)
}

#[tokio::test]
async fn the_environment_starts_first_and_registers_once_the_others_are_ready() {
    let (run, go) = run_with_go_file();
    let doubles = doubles(4, &Component::START_ORDER, None);
    let supervisor = run.supervisor(&doubles, Secrets::default());
    let driver = async {
        run.until(RunState::Running).await;
        doubles
            .exits
            .end(Component::Trainer, ComponentStatus::Exited { code: 0 });
    };
    let (ended, ()) = tokio::join!(supervisor.run(), driver);
    assert_eq!(ended.unwrap(), RunState::Completed, "{:#?}", run.messages());
    assert!(go.exists(), "the environment was never let register");
    let messages = run.messages();
    let position = |prefix: &str| {
        messages
            .iter()
            .position(|m| m.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in {messages:#?}"))
    };
    assert!(position("env_setup: env launched first") < position("ready: engine ready after"));
    assert!(position("ready: trainer ready after") < position("ready: env ready after"));
}

#[tokio::test]
async fn an_environment_dying_in_its_setup_fails_the_run_before_the_engine_is_ready() {
    let (run, go) = run_with_go_file();
    std::fs::write(
        run.home.path().join("env.log"),
        "Traceback (most recent call last):\n  File \"words_env.py\", line 9, in setup\n    \
         words.words()\nLookupError: \n******\n  Resource words not found.\n  Please use the \
         NLTK Downloader to obtain the resource:\n\n  >>> import nltk\n  >>> \
         nltk.download('words')\n******\n",
    )
    .unwrap();
    // The engine never gets ready: only the environment's end can end this run.
    let doubles = doubles(2, &[], None);
    let began = std::time::Instant::now();
    let ended = run
        .run_ending(
            &doubles,
            Secrets::default(),
            RunState::Starting(Phase::Engine),
            Duration::from_millis(100),
            Component::Env,
            // Its exit code does not matter: it ended before it could register.
            ComponentStatus::Exited { code: 0 },
        )
        .await;
    assert_eq!(ended, RunState::Failed, "{:#?}", run.messages());
    assert!(
        began.elapsed() < Duration::from_secs(4),
        "{:?}",
        began.elapsed()
    );
    let error = run.error();
    assert!(
        error.starts_with(
            "env exited with code 0 during its setup (started first, before the other \
             components were ready): LookupError: Resource words not found."
        ) && error
            .lines()
            .next()
            .unwrap()
            .contains("nltk.download('words')"),
        "{error}"
    );
    assert!(!go.exists());
    assert_eq!(
        run.status(Component::Engine),
        ComponentStatus::Signalled { signal: 15 }
    );
}
