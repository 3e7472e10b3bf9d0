//! `rl setup`: the Python a run needs, made by rl in the state directory, and `config.toml`
//! pointed at it (`rl_tools::setup`); `--check` says what is missing without changing
//! anything.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use rl_settings::{SettingEdit, write_settings};
use rl_tools::env_dependencies;
use rl_tools::setup::{Installer, Part, PartState, ensure, inspect};
use serde::Serialize;

use crate::context::Context;
use crate::output;

#[derive(Debug, clap::Args)]
pub(crate) struct SetupArgs {
    /// Where runs train: `local` adds the local Tinker-compatible engine (skyrl-tx on CPU or
    /// GPU JAX) and sets `[engine] kind = "local"`; `hosted` (the default) uses the hosted
    /// Tinker with TINKER_API_KEY.
    #[arg(long, value_enum, value_name = "WHERE")]
    engine: Option<Engine>,
    /// The model the local engine trains: a Hugging Face model folder on disk.
    #[arg(long, value_name = "PATH")]
    base_model: Option<PathBuf>,
    /// Only say what is missing or at another version (exit 1 when anything is); change
    /// nothing.
    #[arg(long)]
    check: bool,
    /// Also install what this environment imports beyond atroposlib (its `requirements.txt`
    /// as pinned there, else its missing imports by name) into the managed Python, the
    /// versions installed recorded in `RL_HOME/venvs/environments/NAME.txt`.
    #[arg(long, value_name = "NAME")]
    env: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Engine {
    Local,
    Hosted,
}

pub(crate) fn run(context: &Context, args: &SetupArgs, as_json: bool) -> anyhow::Result<()> {
    let home = context.home()?;
    rl_settings::create_private_dir(&home)?;
    let local = args.engine == Some(Engine::Local)
        || (args.engine.is_none() && Part::Engine.python(&home).is_file());
    let parts: Vec<Part> = std::iter::once(Part::Trainer)
        .chain(local.then_some(Part::Engine))
        .collect();
    if args.check {
        return check(context, &home, &parts, local, args.env.as_deref(), as_json);
    }
    if let Some(model) = &args.base_model {
        anyhow::ensure!(
            model.is_dir(),
            "--base-model {}: not a folder; give a Hugging Face model folder on disk",
            model.display()
        );
    }
    if let Some(name) = &args.env {
        // An environment that does not exist is said before minutes of installing.
        context.tools()?.environment_dependencies(name)?;
    }
    let installer = Installer::find();
    let spinner = if std::io::stderr().is_terminal() {
        let spinner = ProgressBar::new_spinner();
        spinner.set_style(
            ProgressStyle::with_template("{spinner} {elapsed:>4} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        spinner.enable_steady_tick(Duration::from_millis(120));
        spinner
    } else {
        ProgressBar::hidden()
    };
    let say = |line: &str| {
        if spinner.is_hidden() {
            output::progress(line);
        } else {
            spinner.set_message(line.to_owned());
        }
    };
    let mut ready = Vec::new();
    for part in &parts {
        let state = ensure(&home, *part, &installer, &say);
        match state {
            Ok(state) => ready.push(state),
            Err(error) => {
                spinner.finish_and_clear();
                return Err(error).context(format!("setting up the {}", part.name()));
            }
        }
    }
    spinner.finish_and_clear();
    let mut edits = vec![SettingEdit {
        table: None,
        key: "python",
        value: text(&Part::Trainer.python(&home)),
        comment: "rl's managed Python (`rl setup`): atroposlib and rl's trainer",
    }];
    if let Some(root) = context.root_override() {
        edits.push(SettingEdit {
            table: None,
            key: "tinker_atropos_root",
            value: text(&std::path::absolute(root)?),
            comment: "the tinker-atropos tree runs start from",
        });
    }
    if let Some(dir) = context.envs_dir_override() {
        edits.push(SettingEdit {
            table: None,
            key: "environments_dir",
            value: text(&std::path::absolute(dir)?),
            comment: "the folder of your Atropos environments",
        });
    }
    if local {
        edits.push(SettingEdit {
            table: Some("engine"),
            key: "kind",
            value: "local".to_owned(),
            comment: "train on this machine, with the engine each run starts",
        });
        edits.push(SettingEdit {
            table: Some("engine"),
            key: "python",
            value: text(&Part::Engine.python(&home)),
            comment: "rl's managed Python of the local engine (`rl setup --engine local`)",
        });
        if let Some(model) = &args.base_model {
            edits.push(SettingEdit {
                table: Some("engine"),
                key: "base_model",
                value: text(&std::path::absolute(model)?),
                comment: "the model the local engine trains (a model folder on disk)",
            });
        }
    }
    let changed = write_settings(&home, &edits)?;
    let config = home.join(rl_settings::SETTINGS_FILE);
    let mut message = if changed.is_empty() {
        format!("{} already says so: nothing written", config.display())
    } else {
        format!("set {} in {}", changed.join(", "), config.display())
    };
    let environment = match &args.env {
        Some(name) => {
            let deps = context
                .tools()?
                .environment_dependencies(name)?
                .ok_or_else(|| unjudged(name))?;
            // The spinner is gone by now: each step on its own line.
            let installed = env_dependencies::install(&home, &deps, &installer, &output::progress)
                .with_context(|| format!("installing what {name} imports"))?;
            message.push_str(&if installed.nothing_to_do {
                format!("; {name}: every import found, nothing installed")
            } else {
                format!(
                    "; {name}: installed {}{}",
                    installed.packages.join(" "),
                    installed
                        .record
                        .as_deref()
                        .map_or_else(String::new, |file| format!(
                            " (recorded in {})",
                            file.display()
                        ))
                )
            });
            Some(EnvSetUp {
                environment: name.clone(),
                installed: installed.packages,
                record: installed.record,
            })
        }
        None => None,
    };
    if as_json {
        return output::json(&SetUp {
            parts: ready
                .iter()
                .map(|state| ReadyPart {
                    part: state.part.name(),
                    python: &state.python,
                })
                .collect(),
            config: &config,
            changed: &changed,
            message: &message,
            installer: installer.name(),
            next: NEXT,
            environment,
        });
    }
    for state in &ready {
        output::line(format!(
            "{}: ready ({})",
            state.part.name(),
            state.python.display()
        ))?;
    }
    output::line(format!(
        "{message} (with {}); next: {}",
        installer.name(),
        NEXT.join(", ")
    ))
}

/// What to run after `rl setup`.
const NEXT: &[&str] = &["rl doctor", "rl envs list", "rl mcp --print-config CLIENT"];

/// What `rl setup --json` prints once every part is ready.
#[derive(Serialize)]
struct SetUp<'a> {
    /// What made the venvs: `uv`, or `venv + pip`.
    installer: &'a str,
    parts: Vec<ReadyPart<'a>>,
    /// The operator settings file rl points at the parts.
    config: &'a std::path::Path,
    /// The keys of `config` whose value this run set (`table.key`); empty when it already said
    /// so, and then it was not written.
    changed: &'a [String],
    message: &'a str,
    next: &'static [&'static str],
    /// What `--env NAME` installed.
    #[serde(skip_serializing_if = "Option::is_none")]
    environment: Option<EnvSetUp>,
}

#[derive(Serialize)]
struct EnvSetUp {
    environment: String,
    /// `name==version` of each package installed; empty when nothing was missing.
    installed: Vec<String>,
    /// The file recording them.
    record: Option<PathBuf>,
}

/// An environment whose imports cannot be judged: the run's Python is not there or lacks
/// atroposlib.
fn unjudged(name: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "cannot check what {name} imports: the run's Python cannot be asked or lacks atroposlib; \
         `rl doctor` says why"
    )
}

#[derive(Serialize)]
struct ReadyPart<'a> {
    part: &'static str,
    python: &'a std::path::Path,
}

/// What `rl setup --check` prints with `--json`.
#[derive(Serialize)]
struct Checked<'a> {
    /// Every part holds its pins.
    ready: bool,
    parts: Vec<CheckedPart<'a>>,
    /// The command that makes it ready; `None` when it is.
    fix: Option<String>,
    /// With `--env NAME`: what the environment imports that the run's Python lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    environment: Option<rl_tools::DependenciesView>,
}

#[derive(Serialize)]
struct CheckedPart<'a> {
    part: &'static str,
    python: &'a std::path::Path,
    problems: &'a [String],
    /// The Tinker SDK installed there beside the one rl was built for.
    tinker_sdk: Option<CheckedSdk<'a>>,
}

#[derive(Serialize)]
struct CheckedSdk<'a> {
    installed: Option<&'a str>,
    built_for: &'static str,
}

/// `rl setup --check`: each part's Python against its pins, and the SDK it holds; exit 1 when
/// anything is missing or at another version.
fn check(
    context: &Context,
    home: &std::path::Path,
    parts: &[Part],
    local: bool,
    env: Option<&str>,
    as_json: bool,
) -> anyhow::Result<()> {
    let states: Vec<PartState> = parts.iter().map(|part| inspect(home, *part)).collect();
    let deps = match env {
        Some(name) => Some(
            context
                .tools()?
                .environment_dependencies(name)?
                .ok_or_else(|| unjudged(name))?,
        ),
        None => None,
    };
    let env_ready = deps
        .as_ref()
        .is_none_or(env_dependencies::Dependencies::ready);
    let ready = states.iter().all(|state| state.problems.is_empty()) && env_ready;
    let fix = (!ready).then(|| {
        let mut fix = "rl setup".to_owned() + if local { " --engine local" } else { "" };
        if let (Some(name), false) = (env, env_ready) {
            fix.push_str(&format!(" --env {name}"));
        }
        fix
    });
    if as_json {
        output::json(&Checked {
            ready,
            parts: states
                .iter()
                .map(|state| CheckedPart {
                    part: state.part.name(),
                    python: &state.python,
                    problems: &state.problems,
                    tinker_sdk: state.sdk.as_ref().map(|sdk| CheckedSdk {
                        installed: sdk.installed.as_deref(),
                        built_for: sdk.built_for,
                    }),
                })
                .collect(),
            fix,
            environment: deps.as_ref().and_then(env_dependencies::Dependencies::view),
        })?;
    } else {
        for state in &states {
            if state.problems.is_empty() {
                output::line(format!(
                    "{}: as pinned ({})",
                    state.part.name(),
                    state.python.display()
                ))?;
            } else {
                output::line(format!(
                    "{}: {}",
                    state.part.name(),
                    state.problems.join(", ")
                ))?;
            }
            if let Some(sdk) = &state.sdk {
                output::line(format!(
                    "{}: tinker SDK {}",
                    state.part.name(),
                    sdk.describe()
                ))?;
            }
        }
        if let Some(deps) = &deps {
            if deps.ready() {
                output::line(format!(
                    "{}: every import found in {}",
                    deps.environment,
                    deps.python.display()
                ))?;
            } else {
                output::line(format!("{}: {}", deps.environment, deps.describe()))?;
            }
        }
        if let Some(fix) = &fix {
            output::line(format!("fix: {fix}"))?;
        }
    }
    if ready {
        Ok(())
    } else {
        Err(anyhow::Error::new(output::AlreadyReported(1)))
    }
}

fn text(path: &std::path::Path) -> String {
    path.to_string_lossy().into_owned()
}
