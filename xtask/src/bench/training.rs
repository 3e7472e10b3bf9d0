//! Real training on the local engine (issue 15): seconds per training step of a run driven by
//! rl (its trainer, run-api, the digits environment sampling through the trainer) against the
//! same Tinker calls made by a bare SDK script (`xtask/python/bare_sdk_loop.py`) on the same
//! engine and model, start → first step, and the engine's peak memory. Issue 34: both sides'
//! tokens per second, counted alike, and what rl's per-step accounting costs
//! (`xtask/python/accounting_cost.py` on a batch of the run's shape). Issue 43: both sides again
//! with the KL penalty to the base model, and what its extra logprob requests cost a step.

use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use sha2::Digest as _;

use super::{median, verdict};
use crate::venv::LocalEngine;
use crate::{local_stack_rl, run_command};

mod tokens;
use tokens::{Rates, Step, bare_step, rl_step};

pub(super) const TITLE: &str = "## Real training on the local engine (issue 15)";

/// Steps of each side; the first ones compile JAX functions and are left out of the median.
const STEPS: usize = 12;
const WARM_UP_STEPS: usize = 3;
/// Issue 15: rl's time per step at most this much above the bare script's.
const OVERHEAD_GOAL: f64 = 0.05;
const BARE_SCRIPT: &str = "xtask/python/bare_sdk_loop.py";

/// The key the stand-in for the hosted service takes in the benchmark (no secret).
const BENCH_KEY: &str = "tml-bench-key-0000";

/// Where the Tinker calls go: the engine itself, or the stand-in for the hosted service in
/// front of it (`fixtures/tinker-service`: key and SDK checks, then forwarded), as a hosted
/// user's run reaches the service.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Through {
    Engine,
    StandIn,
}

/// Each path's figures.
struct Figures {
    bare_step: f64,
    rl_step: f64,
    /// rl's own clock: the median `time/total_secs`.
    rl_clock_step: f64,
    /// How far rl's steps (between rows, after the warm-up) spread: interquartile range over
    /// the median.
    rl_step_spread: f64,
    bare: Rates,
    /// rl's tokens over the time between its metrics rows, as `rl_step` is measured.
    rl: Rates,
    /// rl's tokens over its own clock (its logged `throughput/*`).
    rl_own: Rates,
    to_first_step: f64,
    engine_peak_bytes: f64,
    /// Prompt and completion tokens of one completion in rl's batches (medians).
    shape: (f64, f64),
}

impl Figures {
    fn overhead(&self) -> f64 {
        self.rl_step / self.bare_step - 1.0
    }
}

fn measure_path(
    root: &Path,
    rl: &Path,
    python: &Path,
    engine: &LocalEngine,
    through: Through,
) -> anyhow::Result<Figures> {
    let bare = bare_steps(root, engine, through, 0.0)?;
    let driven = rl_steps(root, rl, python, engine, through, 0.0)?;
    let seconds = |steps: &[Step]| steps.iter().map(|s| s.seconds).collect::<Vec<_>>();
    // Row n's tokens over the time since row n - 1 (its steps[n - 1]), from the second row on.
    let between_rows: Vec<Step> = driven.rows[1..]
        .iter()
        .zip(&driven.steps)
        .map(|(row, &seconds)| Step { seconds, ..*row })
        .collect();
    Ok(Figures {
        bare_step: median(&seconds(&bare)[WARM_UP_STEPS..]),
        rl_step: median(&driven.steps[WARM_UP_STEPS..]),
        rl_clock_step: median(&seconds(&driven.rows)[WARM_UP_STEPS..]),
        rl_step_spread: tokens::spread(&driven.steps[WARM_UP_STEPS..]),
        bare: Rates::of(&bare),
        rl: Rates::of(&between_rows),
        rl_own: Rates::of(&driven.rows),
        to_first_step: driven.to_first_step,
        engine_peak_bytes: driven.engine_peak_bytes,
        shape: driven.shape,
    })
}

pub(super) fn measure(
    root: &Path,
    rl: &Path,
    python: &Path,
    engine: &LocalEngine,
) -> anyhow::Result<String> {
    let local = measure_path(root, rl, python, engine, Through::Engine)?;
    let hosted = measure_path(root, rl, python, engine, Through::StandIn)?;
    let accounting = tokens::accounting_cost(root, python, local.shape)?;
    let kl = kl_cost(root, rl, python, engine)?;
    let mut text = format!("{TITLE}\n\n");
    let _ = writeln!(
        text,
        "tinker SDK {} on both sides. The tiny random Qwen3 (2 layers, hidden 64, made by \
         `cargo xtask`) on skyrl-tx 0.3.0 behind rl_engine (the routes and protobuf bodies the \
         current SDK needs), CPU JAX, 8 prompts × 8 completions of at most 16 tokens a step, \
         LoRA rank 8, {STEPS} steps each side, medians of the steps after the first \
         {WARM_UP_STEPS} (they compile JAX functions). rl's step is measured between the \
         trainer's metrics rows; it includes waiting for run-api's batch, which the environment \
         fills by sampling through the trainer's `/generate` while the previous step trains \
         (one batch ahead at most, `max_batches_offpolicy = 1`). The bare script's step is its \
         whole loop body, from sampling to its new sampling client. Both make the same Tinker \
         calls per step (rl's run with `save_every = 0`; its last step also saves the final \
         state). The bare script samples, trains and saves one after another. *Through the \
         stand-in*: every call goes through `fixtures/tinker-service` (the key and the SDK's \
         version checked, then forwarded to the engine), as a hosted run's go to the service; \
         each side gets an engine and a stand-in of its own. rl's hosted run starts no engine \
         (its engine is already up), so its start → first step is not comparable with the local \
         one's. Nine steps a side on a shared 2-core machine: the bare script's two columns do \
         the same work, and their difference shows how far one run's medians move by chance, \
         often more than the 5 % goal.\n",
        rl_python::SDK.version
    );
    let _ = writeln!(text, "{}\n", tokens::TOKENS_NOTE);
    let _ = writeln!(
        text,
        "| measure | on the engine | through the stand-in |\n|---|---|---|"
    );
    let mut row = |name: &str, at: fn(&Figures) -> String| {
        let _ = writeln!(text, "| {name} | {} | {} |", at(&local), at(&hosted));
    };
    row("bare SDK script, seconds per step", |f| {
        format!("{:.2}", f.bare_step)
    });
    row("rl run, seconds per step", |f| format!("{:.2}", f.rl_step));
    row(
        &format!(
            "rl's overhead per step (goal ≤ {:.0} %)",
            OVERHEAD_GOAL * 100.0
        ),
        |f| {
            format!(
                "{:+.1} % — {}",
                f.overhead() * 100.0,
                verdict(f.overhead() <= OVERHEAD_GOAL)
            )
        },
    );
    row(
        "rl run, seconds per step by its own clock (`time/total_secs`)",
        |f| format!("{:.2}", f.rl_clock_step),
    );
    row("bare SDK script, tokens per step, sampled / trained", |f| {
        format!("{:.0} / {:.0}", f.bare.sampled, f.bare.trained)
    });
    row("rl run, tokens per step, sampled / trained", |f| {
        format!("{:.0} / {:.0}", f.rl_own.sampled, f.rl_own.trained)
    });
    row("bare SDK script, sampled tokens per second", |f| {
        format!("{:.0}", f.bare.sampled_per_sec)
    });
    row(
        "rl run, sampled tokens per second (between rows / its own clock)",
        |f| {
            format!(
                "{:.0} / {:.0}",
                f.rl.sampled_per_sec, f.rl_own.sampled_per_sec
            )
        },
    );
    row(
        "**rl ÷ bare, sampled tokens per second**: the medians (the steps taken together)",
        |f| {
            format!(
                "**{:.2}** ({:.2})",
                f.rl.sampled_per_sec / f.bare.sampled_per_sec,
                f.rl.sampled_together / f.bare.sampled_together
            )
        },
    );
    row("bare SDK script, trained tokens per second", |f| {
        format!("{:.0}", f.bare.trained_per_sec)
    });
    row(
        "rl run, trained tokens per second (between rows / its own clock)",
        |f| {
            format!(
                "{:.0} / {:.0}",
                f.rl.trained_per_sec, f.rl_own.trained_per_sec
            )
        },
    );
    row(
        "**rl ÷ bare, trained tokens per second**: the medians (the steps taken together)",
        |f| {
            format!(
                "**{:.2}** ({:.2})",
                f.rl.trained_per_sec / f.bare.trained_per_sec,
                f.rl.trained_together / f.bare.trained_together
            )
        },
    );
    let _ = writeln!(
        text,
        "| rl run, start → first step | {:.1} s | {:.1} s |",
        local.to_first_step, hosted.to_first_step
    );
    let _ = writeln!(
        text,
        "| the engine's peak resident memory (its largest process, VmHWM) | {:.0} MB | — |",
        local.engine_peak_bytes / 1e6
    );
    let spread = (hosted.bare_step / local.bare_step - 1.0).abs();
    let _ = writeln!(
        text,
        "\nThe stand-in's own cost per step, the bare script through it against straight to the \
         engine: {:+.1} %.",
        (hosted.bare_step / local.bare_step - 1.0) * 100.0
    );
    text.push_str(&kl.note(&local));
    text.push_str(&tokens::accounting_note(
        &accounting,
        local.rl_step,
        spread,
        local.rl_step_spread,
    ));
    Ok(text)
}

/// The KL penalty's coefficient of the benchmark's KL runs (issue 43).
const KL_COEF: f64 = 0.05;

/// Both sides again with the KL penalty to the base model on the engine: each step's extra
/// logprob requests of the base weights (issue 43).
struct KlCost {
    bare_step: f64,
    rl_step: f64,
}

fn kl_cost(root: &Path, rl: &Path, python: &Path, engine: &LocalEngine) -> anyhow::Result<KlCost> {
    let bare = bare_steps(root, engine, Through::Engine, KL_COEF)?;
    let driven = rl_steps(root, rl, python, engine, Through::Engine, KL_COEF)?;
    let bare_seconds: Vec<f64> = bare.iter().map(|step| step.seconds).collect();
    Ok(KlCost {
        bare_step: median(&bare_seconds[WARM_UP_STEPS..]),
        rl_step: median(&driven.steps[WARM_UP_STEPS..]),
    })
}

impl KlCost {
    fn note(&self, without: &Figures) -> String {
        let cost = |with: f64, without: f64| format!("{:+.1} %", (with / without - 1.0) * 100.0);
        format!(
            "\n### The KL penalty to the base model (issue 43)\n\nThe same runs on the engine with \
             `kl_coef = {KL_COEF}`: each step one more logprob request per trained completion, \
             to a sampler of the base weights made once (rl: `kl_coef` in the run's settings; \
             the bare script: `--kl-coef`, the cookbook's penalty computed the same way).\n\n\
             | measure | bare SDK script | rl run |\n|---|---|---|\n\
             | seconds per step, no KL term | {:.2} | {:.2} |\n\
             | seconds per step, `kl_coef = {KL_COEF}` | {:.2} | {:.2} |\n\
             | the KL term's cost per step | {} | {} |\n\
             | **rl ÷ bare, seconds per step with the KL term** | | **{:.2}** |\n",
            without.bare_step,
            without.rl_step,
            self.bare_step,
            self.rl_step,
            cost(self.bare_step, without.bare_step),
            cost(self.rl_step, without.rl_step),
            self.rl_step / self.bare_step,
        )
    }
}

/// A server the benchmark started, ended with its process group when dropped.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

/// The engine (and, for [`Through::StandIn`], the stand-in in front of it) in `scratch`, and the
/// URL the Tinker calls go to.
fn tinker_at(
    root: &Path,
    engine: &LocalEngine,
    scratch: &Path,
    through: Through,
) -> anyhow::Result<(Vec<Server>, String)> {
    let port = free_port()?;
    let server = Server(
        Command::new(&engine.python)
            .args(["-m", "rl_engine", "--base-model"])
            .arg(&engine.base_model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--database-url")
            .arg(format!("sqlite:///{}/tinker.db", scratch.display()))
            .arg("--checkpoints-base")
            .arg(scratch.join("checkpoints"))
            .args([
                "--backend-config",
                r#"{"max_lora_adapters": 3, "max_lora_rank": 8, "sample_max_num_sequences": 64, "train_micro_batch_size": 8}"#,
            ])
            .env("PYTHONPATH", root.join("crates/rl-python/python"))
            .env("JAX_PLATFORMS", "cpu")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .context("cannot start the engine")?,
    );
    wait_for_engine(port)?;
    let engine_url = format!("http://127.0.0.1:{port}");
    if through == Through::Engine {
        return Ok((vec![server], engine_url));
    }
    let key_sha256 =
        sha2::Sha256::digest(BENCH_KEY.as_bytes())
            .iter()
            .fold(String::new(), |mut hex, byte| {
                let _ = write!(hex, "{byte:02x}");
                hex
            });
    let mut stand_in = Command::new("python3")
        .arg(root.join("fixtures/tinker-service/tinker_service.py"))
        .args(["--port", "0", "--engine", &engine_url])
        .args(["--require-key-sha256", &key_sha256])
        .args(["--min-sdk", rl_python::SDK.version])
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .context("cannot start the stand-in for the hosted service")?;
    let mut first = String::new();
    if let Some(stdout) = stand_in.stdout.take() {
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut first)?;
    }
    let stand_in = Server(stand_in);
    let url = first
        .trim()
        .strip_prefix("listening on ")
        .with_context(|| format!("the stand-in said {first:?}"))?
        .to_owned();
    Ok((vec![stand_in, server], url))
}

/// The bare script's step times against an engine of its own.
fn bare_steps(
    root: &Path,
    engine: &LocalEngine,
    through: Through,
    kl_coef: f64,
) -> anyhow::Result<Vec<Step>> {
    let scratch = tempfile::tempdir()?;
    let (_servers, url) = tinker_at(root, engine, scratch.path(), through)?;
    let out = scratch.path().join("bare.json");
    run_command(
        Command::new(&engine.python)
            .arg(root.join(BARE_SCRIPT))
            .args(["--base-url", &url])
            .arg("--base-model")
            .arg(&engine.base_model)
            .args(["--steps", &STEPS.to_string()])
            .args(["--group-size", "8", "--groups", "8", "--max-tokens", "16"])
            .args(["--lr", "0.01", "--rank", "8"])
            .args(["--kl-coef", &kl_coef.to_string(), "--json-out"])
            .arg(&out)
            .env("TINKER_API_KEY", BENCH_KEY),
    )?;
    let report: Value = serde_json::from_slice(&std::fs::read(&out)?)?;
    report["steps"]
        .as_array()
        .context("the bare script wrote no steps")?
        .iter()
        .map(bare_step)
        .collect()
}

struct Driven {
    /// Seconds between consecutive metrics rows.
    steps: Vec<f64>,
    /// Each row's own figures.
    rows: Vec<Step>,
    to_first_step: f64,
    engine_peak_bytes: f64,
    /// Prompt and completion tokens of one completion (medians over the rows).
    shape: (f64, f64),
}

/// One rl run of [`STEPS`] steps: on the local engine the run starts, or as a hosted run at
/// the stand-in; its step times from the metrics rows, and the engine's memory sampled while
/// it runs (a local run's).
fn rl_steps(
    root: &Path,
    rl: &Path,
    python: &Path,
    engine: &LocalEngine,
    through: Through,
    kl_coef: f64,
) -> anyhow::Result<Driven> {
    let home = tempfile::tempdir()?;
    let scratch = tempfile::tempdir()?;
    // The same Tinker calls as the bare script: no optimizer-state saves between steps.
    let mut settings = crate::venv::local_engine_settings(root, python, engine)?
        .replace("total_steps = 12", &format!("total_steps = {STEPS}"))
        .replace("save_every = 4", "save_every = 0")
        .replace(
            "learning_rate = 0.01\n",
            &format!("learning_rate = 0.01\nkl_coef = {kl_coef:?}\n"),
        );
    let _servers = if through == Through::StandIn {
        let (servers, url) = tinker_at(root, engine, scratch.path(), through)?;
        let model = engine.base_model.display().to_string();
        settings = settings
            .replace("kind = \"local\"", "kind = \"tinker\"")
            .replace(
                "tinker_atropos_root = ",
                "trainer_needs_tinker_key = true\ntinker_atropos_root = ",
            )
            .replace(
                "[locked.tinker]\n",
                &format!("[locked.tinker]\nbase_url = \"{url}\"\nbase_model = \"{model}\"\n"),
            )
            .replace(
                "[locked.env]\n",
                &format!("[locked.env]\ntokenizer_name = \"{model}\"\n"),
            )
            .replace(
                "[[locked.openai]]\n",
                &format!("[[locked.openai]]\ntokenizer_name = \"{model}\"\n"),
            );
        servers
    } else {
        Vec::new()
    };
    std::fs::write(home.path().join("config.toml"), settings)?;
    let rl_json = |args: &[&str]| -> anyhow::Result<Value> {
        let output = local_stack_rl(rl, root, home.path(), args)
            .arg("--json")
            .env("TINKER_API_KEY", BENCH_KEY)
            .output()?;
        if !output.status.success() {
            bail!(
                "rl {args:?} failed: {}",
                String::from_utf8_lossy(&output.stdout)
            );
        }
        Ok(serde_json::from_slice(&output.stdout)?)
    };
    rl_json(&["select", "digits"])?;
    let status = rl_json(&["runs", "start"])?;
    let id = status["id"].as_str().context("no run id")?.to_owned();
    let mut peak = 0.0_f64;
    let deadline = Instant::now() + Duration::from_secs(1200);
    let finished = loop {
        let status = rl_json(&["runs", "status", &id])?;
        if let Some(pgid) = status["components"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["component"] == "engine"))
            .and_then(|engine| engine["process"]["pid"].as_u64())
        {
            peak = peak.max(group_peak_bytes(pgid));
        }
        if matches!(
            status["state"].as_str(),
            Some("completed" | "failed" | "stopped" | "lost")
        ) {
            break status;
        }
        if Instant::now() > deadline {
            let _ = rl_json(&["runs", "stop", &id]);
            bail!("the benchmark run {id} did not finish in 20 minutes");
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    if finished["state"] != "completed" {
        bail!(
            "the benchmark run ended {}: {}",
            finished["state"],
            finished["error"]
        );
    }
    let metrics =
        std::fs::read_to_string(home.path().join("runs").join(&id).join("metrics.jsonl"))?;
    let rows: Vec<Value> = metrics
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|row| row.get("step").is_some())
        .collect();
    let stamps: Vec<f64> = rows
        .iter()
        .filter_map(|row| row["_timestamp"].as_f64())
        .collect();
    if stamps.len() != STEPS || rows.len() != STEPS {
        bail!("{} metrics rows for {STEPS} steps", rows.len());
    }
    let per_completion = |key: &str| {
        median(
            &rows
                .iter()
                .filter_map(|row| Some(row[key].as_f64()? / row["batch/completions"].as_f64()?))
                .collect::<Vec<_>>(),
        )
    };
    let shape = (
        per_completion("tokens/prompt"),
        per_completion("tokens/sampled"),
    );
    let created: jiff::Timestamp = finished["created_at"]
        .as_str()
        .context("the run has no created_at")?
        .parse()?;
    let created = created.as_millisecond() as f64 / 1000.0;
    Ok(Driven {
        steps: stamps.windows(2).map(|pair| pair[1] - pair[0]).collect(),
        rows: rows.iter().map(rl_step).collect::<anyhow::Result<_>>()?,
        to_first_step: stamps[0] - created,
        engine_peak_bytes: peak,
        shape,
    })
}

/// The largest peak resident size (VmHWM) among the members of process group `pgid`.
fn group_peak_bytes(pgid: u64) -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    let mut peak = 0.0_f64;
    for entry in entries.flatten() {
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // The group is the fifth field after the command's closing parenthesis.
        let in_group = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2))
            .is_some_and(|group| group == pgid.to_string());
        if !in_group {
            continue;
        }
        if let Some(kb) = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|value| {
                value
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
        {
            peak = peak.max(kb * 1024.0);
        }
    }
    peak
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn wait_for_engine(port: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    bail!("the engine did not listen on port {port} within 180 s")
}
