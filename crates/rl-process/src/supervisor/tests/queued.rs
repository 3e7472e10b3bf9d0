//! Runs that wait for a scheduler's place before their first component: the queue recorded,
//! the placed host probed, the cluster's verdict on how the run ended.

use super::*;

/// A launcher double that queues before placing the run on `node1`, as the SLURM backend does,
/// and reports `end` as the cluster's verdict when a component ends.
fn queued_launcher(exits: &Exits, end: Option<ClusterEnd>) -> MockLauncher {
    let mut launcher = MockLauncher::new();
    fake_processes(&mut launcher, exits, None, None);
    launcher.expect_allocate().returning(|notes| {
        let _ = notes.send(AllocationNote::Submitted {
            job: "4242".to_owned(),
        });
        let _ = notes.send(AllocationNote::Waiting {
            job: "4242".to_owned(),
            reason: "Resources".to_owned(),
        });
        Ok(Placement {
            host: "node1".to_owned(),
            local: false,
            description: "SLURM job 4242 on node1".to_owned(),
        })
    });
    launcher.expect_cluster_end().returning(move || end.clone());
    launcher
        .expect_end_strays()
        .returning(|_| StrayOutcome::default());
    launcher.expect_release().times(1).returning(|| Ok(()));
    launcher
}

#[tokio::test]
async fn a_queued_run_records_its_job_and_wait_then_starts_on_the_placed_host() {
    let run = new_run_queued(quick(), true);
    assert_eq!(
        run.store().state(&run.id).unwrap(),
        RunState::Starting(Phase::Queued)
    );
    // The local launcher double is replaced, so it expects no launch.
    let mut doubles = doubles(0, ALL, None);
    doubles.launcher = queued_launcher(&doubles.exits, None);
    let mut probe = MockProbe::new();
    probe.expect_is_ready().returning(|host, _| host == "node1");
    doubles.probe = probe;
    let ended = run
        .run_ending(
            &doubles,
            Secrets::default(),
            RunState::Running,
            Duration::ZERO,
            Component::Trainer,
            ComponentStatus::Exited { code: 0 },
        )
        .await;
    assert_eq!(ended, RunState::Completed);
    let record = run.store().run(&run.id).unwrap().unwrap();
    assert_eq!(record.slurm_job.as_deref(), Some("4242"));
    let messages = run.messages().join("\n");
    for expected in [
        "queued: submitted to SLURM as job 4242",
        "queued: SLURM job 4242 is pending: Resources",
        "placed: SLURM job 4242 on node1",
        "GET http://node1:",
    ] {
        assert!(messages.contains(expected), "{expected} in {messages}");
    }
}

#[tokio::test]
async fn the_clusters_verdict_decides_how_a_run_ends() {
    for (end, expected, in_error) in [
        (
            ClusterEnd {
                outcome: RunState::Failed,
                message: "SLURM job 4242 reached its time limit (TIMEOUT, reason TimeLimit, exit code 0:15)".to_owned(),
            },
            RunState::Failed,
            "reached its time limit",
        ),
        (
            ClusterEnd {
                outcome: RunState::Stopped,
                message: "SLURM job 4242 was cancelled (CANCELLED, reason None, exit code 0:15)".to_owned(),
            },
            RunState::Stopped,
            "",
        ),
    ] {
        let run = new_run_queued(quick(), true);
        let mut doubles = doubles(0, ALL, None);
        doubles.launcher = queued_launcher(&doubles.exits, Some(end));
        let ended = run
            .run_ending(
                &doubles,
                Secrets::default(),
                RunState::Running,
                Duration::ZERO,
                Component::Trainer,
                ComponentStatus::Signalled { signal: 9 },
            )
            .await;
        assert_eq!(ended, expected);
        assert!(run.error().contains(in_error), "{}", run.error());
        assert!(run.messages().iter().any(|m| m.starts_with("cluster: SLURM job 4242")));
    }
}

#[tokio::test]
async fn a_stop_while_queued_ends_the_run_stopped_and_cancels_the_job() {
    use crate::slurm::{JobInfo, MockSlurmCommands, SlurmLauncher};
    let run = new_run_queued(quick(), true);
    let cancels = Arc::new(Mutex::new(Vec::new()));
    let mut commands = MockSlurmCommands::new();
    commands
        .expect_submit()
        .returning(|_, _| Ok("77".to_owned()));
    // A scheduler that never places the run, and cancels it when told.
    let cancelled = cancels.clone();
    commands.expect_job().returning(move |_| {
        let state = if cancelled.lock().unwrap().is_empty() {
            "PENDING"
        } else {
            "CANCELLED"
        };
        Ok(Some(JobInfo {
            state: state.to_owned(),
            reason: "Priority".to_owned(),
            batch_host: None,
            exit_code: "0:0".to_owned(),
        }))
    });
    let seen = cancels.clone();
    commands
        .expect_cancel()
        .returning(move |target, signal, _| {
            seen.lock().unwrap().push((target.to_owned(), signal));
            Ok(())
        });
    let launcher = SlurmLauncher::new(
        run.id.clone(),
        rl_settings::SlurmSettings::default(),
        run.home.path().to_owned(),
        Box::new(commands),
        crate::launcher::LocalLauncher::default(),
    );
    let doubles = doubles(0, ALL, None);
    let supervisor = Supervisor::new(
        run.store(),
        run.plan.clone(),
        &launcher,
        &doubles.probe,
        doubles.stop.subscribe(),
        Secrets::default(),
    );
    let driver = async {
        while !run
            .messages()
            .iter()
            .any(|m| m.contains("is pending: Priority"))
        {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        doubles.stop.send_replace(true);
    };
    let (ended, ()) = tokio::join!(supervisor.run(), driver);
    assert_eq!(ended.unwrap(), RunState::Stopped);
    assert_eq!(*cancels.lock().unwrap(), [("77".to_owned(), None)]);
}
