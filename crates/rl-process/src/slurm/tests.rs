//! The SLURM backend against a scripted cluster: the state mapping, the batch script, and the
//! launcher's conversation with SLURM. The real cluster is exercised by rl-cli's tests.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rl_settings::{ComponentGpus, RunConfig, RunId, SlurmSettings};
use tokio::sync::mpsc;

use super::*;

/// `scontrol show job -o` as slurm 22.05 prints it (shortened where nothing is read).
fn scontrol(state: &str, reason: &str, batch_host: &str, exit_code: &str) -> String {
    format!(
        "JobId=27 JobName=rl-0badc0de UserId=root(0) Priority=0 Account=(null) JobState={state} \
         Reason={reason} Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 ExitCode={exit_code} \
         RunTime=00:00:01 Partition=debug NodeList={batch_host} BatchHost={batch_host} \
         NumNodes=1 WorkDir=/state/runs/0badc0de StdOut=/state/runs/0badc0de/slurm-27.out\n"
    )
}

fn info(state: &str, reason: &str) -> JobInfo {
    parse_job(&scontrol(state, reason, "node1", "0:0")).unwrap()
}

#[test]
fn scontrol_lines_are_read() {
    let running = parse_job(&scontrol("RUNNING", "None", "vm", "0:0")).unwrap();
    assert_eq!(
        running,
        JobInfo {
            state: "RUNNING".to_owned(),
            reason: "None".to_owned(),
            batch_host: Some("vm".to_owned()),
            exit_code: "0:0".to_owned(),
        }
    );
    // A pending job has no host yet (`BatchHost=` or `(null)`).
    let pending = parse_job(&scontrol("PENDING", "JobHeldUser", "", "0:0")).unwrap();
    assert_eq!(pending.batch_host, None);
    assert_eq!(
        parse_job("slurm_load_jobs error: Invalid job id specified"),
        None
    );
}

#[test]
fn slurm_states_map_to_run_states() {
    assert_eq!(
        phase_of("27", &info("PENDING", "Resources")),
        JobPhase::Queued {
            reason: "Resources".to_owned()
        }
    );
    assert_eq!(phase_of("27", &info("RUNNING", "None")), JobPhase::Running);
    assert_eq!(
        phase_of("27", &info("COMPLETING", "None")),
        JobPhase::Completing
    );
    for (state, outcome, words) in [
        ("COMPLETED", RunState::Completed, "completed"),
        ("CANCELLED", RunState::Stopped, "was cancelled"),
        ("TIMEOUT", RunState::Failed, "reached its time limit"),
        ("FAILED", RunState::Failed, "failed"),
        ("OUT_OF_MEMORY", RunState::Failed, "ran out of memory"),
        ("NODE_FAIL", RunState::Failed, "lost its node"),
        ("PREEMPTED", RunState::Failed, "was preempted"),
    ] {
        let JobPhase::Ended(end) =
            phase_of("27", &parse_job(&scontrol(state, "X", "n", "3:0")).unwrap())
        else {
            panic!("{state} is an end");
        };
        assert_eq!(end.outcome, outcome, "{state}");
        assert_eq!(
            end.message,
            format!("SLURM job 27 {words} ({state}, reason X, exit code 3:0)")
        );
    }
}

fn settings() -> SlurmSettings {
    SlurmSettings {
        partition: Some("gpu".to_owned()),
        account: Some("rl-team".to_owned()),
        time_limit: Some("04:00:00".to_owned()),
        nodes: Some(2),
        gpus: ComponentGpus {
            engine: 0,
            api: 0,
            trainer: 4,
            env: 1,
        },
        extra_sbatch: vec!["--qos=high".to_owned(), "--exclusive".to_owned()],
        env_uses_allocation: true,
        host: None,
    }
}

fn id() -> RunId {
    RunId::parse("0badc0de").unwrap()
}

#[test]
fn the_batch_script_holds_the_allocation_with_the_operators_settings() {
    let script = batch_script(&id(), &settings(), Path::new("/state/runs/0badc0de"));
    insta::assert_snapshot!(script);
    let minimal = batch_script(&id(), &SlurmSettings::default(), Path::new("/r"));
    assert!(!minimal.contains("--partition") && !minimal.contains("--gpus"));
}

/// A cluster whose answers the test scripts, and which records what it was asked.
#[derive(Clone, Default)]
struct Cluster {
    /// Successive answers to `scontrol show job`; the last one repeats.
    states: Arc<Mutex<Vec<JobInfo>>>,
    calls: Arc<Mutex<Vec<String>>>,
    /// What `squeue -n` finds by the run's job name.
    named: Arc<Mutex<Vec<String>>>,
}

impl Cluster {
    fn answering(states: &[(&str, &str)]) -> Self {
        let cluster = Cluster::default();
        *cluster.states.lock().unwrap() = states
            .iter()
            .map(|(state, reason)| info(state, reason))
            .collect();
        cluster
    }

    fn commands(&self) -> MockSlurmCommands {
        let mut commands = MockSlurmCommands::new();
        let calls = self.calls.clone();
        commands.expect_submit().returning(move |script, _| {
            calls
                .lock()
                .unwrap()
                .push(format!("sbatch {}", script.display()));
            Ok("27".to_owned())
        });
        let states = self.states.clone();
        commands.expect_job().returning(move |_| {
            let mut states = states.lock().unwrap();
            let next = if states.len() > 1 {
                states.remove(0)
            } else {
                states[0].clone()
            };
            Ok(Some(next))
        });
        commands
            .expect_step()
            .returning(|job, name| Ok(Some(format!("{job}.1")).filter(|_| name.ends_with("-env"))));
        let named = self.named.clone();
        commands
            .expect_jobs_named()
            .returning(move |_| Ok(named.lock().unwrap().clone()));
        let calls = self.calls.clone();
        commands
            .expect_cancel()
            .returning(move |target, signal, batch| {
                calls.lock().unwrap().push(format!(
                    "scancel {target} signal={} batch={batch}",
                    signal.unwrap_or("-")
                ));
                Ok(())
            });
        commands
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

fn launcher(cluster: &Cluster, dir: &Path) -> SlurmLauncher {
    SlurmLauncher::new(
        id(),
        settings(),
        dir.to_owned(),
        Box::new(cluster.commands()),
        LocalLauncher::default(),
    )
}

#[tokio::test(start_paused = true)]
async fn allocation_submits_the_script_reports_the_wait_and_places_the_run_on_its_node() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::answering(&[
        ("PENDING", "Priority"),
        ("PENDING", "Priority"),
        ("PENDING", "Resources"),
        ("RUNNING", "None"),
    ]);
    let launcher = launcher(&cluster, dir.path());
    let loopback = RunConfig {
        env: [(
            "rollout_server_url".to_owned(),
            "http://127.0.0.1:41000".into(),
        )]
        .into(),
        openai: vec![[("base_url".to_owned(), "http://127.0.0.1:41001/v1".into())].into()],
        tinker: std::collections::BTreeMap::new(),
        slurm: false,
        testing: false,
    };
    let config_path = dir.path().join("config.yaml");
    std::fs::write(
        &config_path,
        format!("# Run 0badc0de\n{}", loopback.to_yaml().unwrap()),
    )
    .unwrap();
    let (notes, mut received) = mpsc::unbounded_channel();
    let placement = launcher.allocate(notes).await.unwrap();
    // The run's config now names the node, so workers elsewhere in the allocation reach it.
    let placed = RunConfig::read(&config_path).unwrap();
    assert_eq!(
        placed.env["rollout_server_url"],
        "http://node1:41000".into()
    );
    assert_eq!(placed.openai[0]["base_url"], "http://node1:41001/v1".into());
    assert!(
        std::fs::read_to_string(&config_path)
            .unwrap()
            .starts_with("# Run 0badc0de\n")
    );
    assert_eq!(
        placement,
        Placement {
            host: "node1".to_owned(),
            local: false,
            description: "SLURM job 27 on node1".to_owned(),
        }
    );
    let mut seen = Vec::new();
    while let Ok(note) = received.try_recv() {
        seen.push(note);
    }
    assert_eq!(
        seen,
        [
            AllocationNote::Submitted {
                job: "27".to_owned()
            },
            AllocationNote::Waiting {
                job: "27".to_owned(),
                reason: "Priority".to_owned()
            },
            AllocationNote::Waiting {
                job: "27".to_owned(),
                reason: "Resources".to_owned()
            },
        ],
        "each reason once, as it changes"
    );
    let script = RunFolder::at(dir.path()).slurm_script();
    assert_eq!(cluster.calls(), [format!("sbatch {}", script.display())]);
    assert!(
        std::fs::read_to_string(script)
            .unwrap()
            .contains("trap 'exit 0' USR1")
    );

    // Each component becomes a step of the job on its node, with its GPUs and its name.
    let spec = LaunchSpec {
        component: Component::Trainer,
        program: "/venv/bin/python".into(),
        args: vec![
            "launch_training.py".to_owned(),
            "--config".to_owned(),
            "c.yaml".to_owned(),
        ],
        cwd: "/tree".into(),
        env: vec![("RL_RUN_ID".to_owned(), "0badc0de".to_owned())],
        env_remove: vec!["OPENAI_API_KEY".to_owned()],
        log_path: dir.path().join("trainer.log"),
    };
    let step = launcher.step_spec(&spec, "27", "node1");
    assert_eq!(step.program, Path::new("srun"));
    assert_eq!(
        step.args,
        [
            "--jobid=27",
            "--overlap",
            "--nodes=1",
            "--ntasks=1",
            "--nodelist=node1",
            "--job-name=rl-0badc0de-trainer",
            "--chdir=/tree",
            "--export=ALL",
            "--gpus=4",
            "/venv/bin/python",
            "launch_training.py",
            "--config",
            "c.yaml",
        ]
    );
    // The environment, told to use the allocation, gets atroposlib's switch.
    let env_step = launcher.step_spec(
        &LaunchSpec {
            component: Component::Env,
            ..spec.clone()
        },
        "27",
        "node1",
    );
    assert_eq!(
        env_step.args[env_step.args.len() - 2..],
        ["--slurm", "true"]
    );
    assert_eq!((step.env, step.env_remove), (spec.env, spec.env_remove));
}

#[tokio::test(start_paused = true)]
async fn a_job_that_ends_before_it_runs_is_an_error_naming_slurms_state() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::answering(&[("PENDING", "Priority"), ("FAILED", "BadConstraints")]);
    let (notes, _received) = mpsc::unbounded_channel();
    let ended = launcher(&cluster, dir.path())
        .allocate(notes)
        .await
        .unwrap_err();
    let ProcessError::SlurmEnded(end) = ended else {
        panic!("{ended}");
    };
    assert_eq!(end.outcome, RunState::Failed);
    assert_eq!(
        end.message,
        "SLURM job 27 failed (FAILED, reason BadConstraints, exit code 0:0)"
    );
}

#[tokio::test(start_paused = true)]
async fn the_end_of_a_running_job_is_read_after_it_settles() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::answering(&[("RUNNING", "None")]);
    let launcher = launcher(&cluster, dir.path());
    launcher.state().job = Some("27".to_owned());
    // A component that failed by itself: the job still runs, the cluster has nothing to add.
    assert_eq!(launcher.cluster_end().await, None);
    *cluster.states.lock().unwrap() = vec![
        info("COMPLETING", "TimeLimit"),
        info("COMPLETING", "TimeLimit"),
        parse_job(&scontrol("TIMEOUT", "TimeLimit", "node1", "0:15")).unwrap(),
    ];
    let end = launcher.cluster_end().await.unwrap();
    assert_eq!(end.outcome, RunState::Failed);
    assert!(
        end.message.contains("reached its time limit (TIMEOUT"),
        "{}",
        end.message
    );
}

#[tokio::test(start_paused = true)]
async fn release_ends_the_holding_script_cleanly_once_and_cancels_only_if_it_must() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::answering(&[
        ("RUNNING", "None"),
        ("COMPLETING", "None"),
        ("COMPLETED", "None"),
    ]);
    let launcher = launcher(&cluster, dir.path());
    launcher.state().job = Some("27".to_owned());
    launcher.release().await.unwrap();
    launcher.release().await.unwrap();
    assert_eq!(cluster.calls(), ["scancel 27 signal=USR1 batch=true"]);

    // A job still queued is cancelled, and its end checked.
    let queued = Cluster::answering(&[("PENDING", "Priority"), ("CANCELLED", "None")]);
    let launcher = self::launcher(&queued, dir.path());
    launcher.state().job = Some("27".to_owned());
    launcher.release().await.unwrap();
    assert_eq!(queued.calls(), ["scancel 27 signal=- batch=false"]);

    // A job that ends on nothing: SIGUSR1, two cancels, then an error naming it.
    let stubborn = Cluster::answering(&[("RUNNING", "None")]);
    let launcher = self::launcher(&stubborn, dir.path());
    launcher.state().job = Some("27".to_owned());
    let error = launcher.release().await.unwrap_err().to_string();
    assert!(error.contains("job 27 is still held by SLURM"), "{error}");
    assert_eq!(
        stubborn.calls(),
        [
            "scancel 27 signal=USR1 batch=true",
            "scancel 27 signal=- batch=false",
            "scancel 27 signal=- batch=false"
        ]
    );
}

/// A submission given up on before its answer (a stop, a timeout) may still have made a job:
/// it is found by the run's name and ended.
#[tokio::test(start_paused = true)]
async fn a_job_whose_id_was_never_heard_is_found_by_name_and_ended() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::answering(&[("PENDING", "Priority"), ("CANCELLED", "None")]);
    *cluster.named.lock().unwrap() = vec!["31".to_owned()];
    launcher(&cluster, dir.path()).release().await.unwrap();
    assert_eq!(cluster.calls(), ["scancel 31 signal=- batch=false"]);
}

#[tokio::test(start_paused = true)]
async fn waiting_copes_with_a_busy_controller_and_gives_up_on_what_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    // Failed queries are asked again.
    let mut commands = MockSlurmCommands::new();
    commands
        .expect_submit()
        .returning(|_, _| Ok("27".to_owned()));
    let mut answers = vec![
        Err(ProcessError::Slurm("timed out".to_owned())),
        Err(ProcessError::Slurm("timed out".to_owned())),
        Ok(Some(info("RUNNING", "None"))),
    ]
    .into_iter();
    commands
        .expect_job()
        .returning(move |_| answers.next().unwrap_or(Ok(None)));
    let launcher = SlurmLauncher::new(
        id(),
        SlurmSettings::default(),
        dir.path().to_owned(),
        Box::new(commands),
        LocalLauncher::default(),
    );
    let (notes, _received) = mpsc::unbounded_channel();
    assert!(launcher.allocate(notes).await.is_ok());

    // A request the partition can never meet fails the run at once, saying why.
    let cluster = Cluster::answering(&[("PENDING", "PartitionConfig")]);
    let (notes, _received) = mpsc::unbounded_channel();
    let error = self::launcher(&cluster, dir.path())
        .allocate(notes)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("will never run job 27 as asked (pending: PartitionConfig)"),
        "{error}"
    );

    // A job cancelled while it waits ends the run stopped, not failed.
    let cluster = Cluster::answering(&[("PENDING", "Priority"), ("CANCELLED", "None")]);
    let (notes, _received) = mpsc::unbounded_channel();
    let ended = self::launcher(&cluster, dir.path())
        .allocate(notes)
        .await
        .unwrap_err();
    let ProcessError::SlurmEnded(end) = ended else {
        panic!("{ended}");
    };
    assert_eq!(end.outcome, RunState::Stopped);
}

#[tokio::test(start_paused = true)]
async fn a_job_still_ending_after_the_wait_is_the_clusters_doing() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::answering(&[("COMPLETING", "TimeLimit")]);
    let launcher = launcher(&cluster, dir.path());
    launcher.state().job = Some("27".to_owned());
    let end = launcher.cluster_end().await.unwrap();
    assert_eq!(end.outcome, RunState::Failed);
    assert!(
        end.message.contains("being ended by SLURM (COMPLETING"),
        "{}",
        end.message
    );
}

#[tokio::test]
async fn a_step_is_stopped_through_slurm_first() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::answering(&[("RUNNING", "None")]);
    let launcher = launcher(&cluster, dir.path());
    // A group that does not exist: the step's srun is already gone once SIGTERM is sent.
    let srun = ProcessIdentity {
        pid: 90_000_001,
        start_ticks: 1,
    };
    {
        let mut state = launcher.state();
        state.job = Some("27".to_owned());
        state.steps.push((srun, "rl-0badc0de-env".to_owned()));
    }
    let outcome = launcher.stop_group(srun, Duration::from_secs(1)).await;
    assert!(outcome.graceful);
    assert_eq!(cluster.calls(), ["scancel 27.1 signal=TERM batch=false"]);
}

/// A step's srun reaped long ago may have left its group's id to another group (its pid reused
/// by that group's leader): the step is still cancelled through SLURM, but that group is neither
/// waited for nor signalled.
#[tokio::test]
async fn a_group_whose_id_is_anothers_now_is_not_signalled() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::answering(&[("RUNNING", "None")]);
    let launcher = launcher(&cluster, dir.path());
    let mut other = std::process::Command::new("sleep")
        .arg("60")
        .process_group(0)
        .spawn()
        .unwrap();
    let now = ProcessIdentity::of(other.id()).unwrap();
    let srun = ProcessIdentity {
        start_ticks: now.start_ticks.wrapping_sub(1),
        ..now
    };
    {
        let mut state = launcher.state();
        state.job = Some("27".to_owned());
        state.steps.push((srun, "rl-0badc0de-env".to_owned()));
    }
    let outcome = launcher.stop_group(srun, Duration::from_millis(300)).await;
    let untouched = other.try_wait().unwrap().is_none();
    let _ = other.kill();
    let _ = other.wait();
    assert!(untouched, "another's group was signalled: {outcome:?}");
    assert_eq!(cluster.calls(), ["scancel 27.1 signal=TERM batch=false"]);
}
