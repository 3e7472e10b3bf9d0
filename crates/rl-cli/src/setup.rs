//! `rl setup`: the Python a run needs, made by rl in the state directory, and `config.toml`
//! pointed at it (`rl_tools::setup`); `--check` says what is missing without changing
//! anything. A Python of the operator's own that the settings name is kept (issue 40 #9):
//! one Python is the run's, and `--env` installs into that one; `--managed-python` replaces
//! it with rl's. The engine is the one the settings name unless `--engine` says otherwise.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use rl_settings::{SettingEdit, read_setting, write_settings};
use rl_tools::env_dependencies;
use rl_tools::own_python::set_up_environment;
use rl_tools::setup::{Installer, Part, PartState, ensure, inspect, inspect_python};
use serde::Serialize;

use crate::context::Context;
use crate::output;

#[derive(Debug, clap::Args)]
pub(crate) struct SetupArgs {
    /// Where runs train: `local` adds the local Tinker-compatible engine (skyrl-tx on CPU or
    /// GPU JAX) and sets `[engine] kind = "local"`; `hosted` sets `[engine] kind = "tinker"`,
    /// the hosted Tinker with TINKER_API_KEY (a new home's default). Without it, the engine
    /// config.toml names stays.
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
    /// as pinned there, else its missing imports by name) into the run's Python (the managed
    /// one, or your own that config.toml names), the versions installed recorded in
    /// `RL_HOME/venvs/environments/NAME.txt`.
    #[arg(long, value_name = "NAME")]
    env: Option<String>,
    /// Replace a Python of your own that config.toml names (`python`; with the local engine,
    /// `[engine] python`) with rl's managed venv, made in RL_HOME/venvs. Without it, yours is
    /// kept: rl installs nothing into it but what `--env` asks for.
    #[arg(long)]
    managed_python: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Engine {
    Local,
    Hosted,
}

impl Engine {
    /// `[engine] kind` in config.toml.
    fn kind(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Hosted => "tinker",
        }
    }
}

/// What the operator's settings say of a key `rl setup` manages: an `RL_*` variable, which
/// wins, else `config.toml`.
struct Said {
    value: String,
    /// The variable it came from; `None`: config.toml.
    variable: Option<String>,
}

fn said(home: &std::path::Path, table: Option<&str>, key: &str) -> anyhow::Result<Option<Said>> {
    let variable = match table {
        None => format!("RL_{}", key.to_uppercase()),
        Some(table) => format!("RL_{}__{}", table.to_uppercase(), key.to_uppercase()),
    };
    if let Ok(value) = std::env::var(&variable) {
        return Ok(Some(Said {
            value,
            variable: Some(variable),
        }));
    }
    Ok(read_setting(home, table, key)?.map(|value| Said {
        value,
        variable: None,
    }))
}

/// The Python one part runs on: rl's managed venv, or the operator's own, kept.
struct Choice {
    part: Part,
    python: PathBuf,
    /// Where the operator's own is named (config.toml, or an `RL_*` variable); `None`: rl's.
    own: Option<String>,
}

/// The settings' key naming `part`'s Python.
fn python_key(part: Part) -> (Option<&'static str>, &'static str) {
    match part {
        Part::Trainer => (None, "python"),
        Part::Engine => (Some("engine"), "python"),
    }
}

/// `part`'s Python: the operator's own when the settings name one other than rl's managed
/// venv, unless `--managed-python` asks for rl's (refused while an `RL_*` variable names
/// theirs: it would win over what config.toml is told).
fn choose(home: &std::path::Path, part: Part, managed_python: bool) -> anyhow::Result<Choice> {
    let managed = part.python(home);
    let (table, key) = python_key(part);
    match said(home, table, key)? {
        Some(said) if std::path::Path::new(&said.value) != managed => {
            if !managed_python {
                return Ok(Choice {
                    part,
                    python: PathBuf::from(said.value),
                    own: Some(said.variable.unwrap_or_else(|| "config.toml".to_owned())),
                });
            }
            if let Some(variable) = said.variable {
                anyhow::bail!(
                    "{variable}={} names the {} Python and wins over config.toml: unset it for \
                     rl's managed Python (--managed-python)",
                    said.value,
                    part.name()
                );
            }
        }
        _ => {}
    }
    Ok(Choice {
        part,
        python: managed,
        own: None,
    })
}

pub(crate) fn run(context: &Context, args: &SetupArgs, as_json: bool) -> anyhow::Result<()> {
    let home = context.home()?;
    rl_settings::create_private_dir(&home)?;
    let engine = engine(&home, args.engine)?;
    let local = engine == Engine::Local;
    let mut choices = vec![choose(&home, Part::Trainer, args.managed_python)?];
    if local {
        choices.push(choose(&home, Part::Engine, args.managed_python)?);
    }
    if args.check {
        return check(
            context,
            &home,
            &choices,
            local,
            args.env.as_deref(),
            as_json,
        );
    }
    if let Some(model) = &args.base_model {
        anyhow::ensure!(
            local,
            "--base-model names the local engine's model: add --engine local"
        );
        anyhow::ensure!(
            model.is_dir(),
            "--base-model {}: not a folder; give a Hugging Face model folder on disk",
            model.display()
        );
    }
    // An environment that does not exist is said before minutes of installing.
    let env_target = match &args.env {
        Some(name) => Some(context.tools()?.set_up_target(name)?),
        None => None,
    };
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
        if spinner.is_hidden() || spinner.is_finished() {
            output::progress(line);
        } else {
            spinner.set_message(line.to_owned());
        }
    };
    let installer = Installer::new(&home, &say);
    let mut ready = Vec::new();
    for choice in &choices {
        if let Some(named_in) = &choice.own {
            // The operator's own: looked at, never changed (but by `--env`, below).
            say(&format!(
                "{}: your own Python {} ({named_in}), kept",
                choice.part.name(),
                choice.python.display()
            ));
            ready.push(inspect_python(choice.part, &choice.python));
            continue;
        }
        match ensure(&home, choice.part, &installer, &say) {
            Ok(state) => ready.push(state),
            Err(error) => {
                spinner.finish_and_clear();
                return Err(error).context(format!("setting up the {}", choice.part.name()));
            }
        }
    }
    spinner.finish_and_clear();
    let edits = edits(context, &home, &choices, engine, args)?;
    let before: Vec<Option<String>> = edits
        .iter()
        .map(|edit| read_setting(&home, edit.table, edit.key))
        .collect::<Result<_, _>>()?;
    let changed = write_settings(&home, &edits)?;
    let config = home.join(rl_settings::SETTINGS_FILE);
    let mut message = if changed.is_empty() {
        format!("{} already says so: nothing written", config.display())
    } else {
        format!(
            "set {} in {}",
            described_changes(&edits, &before, &changed).join(", "),
            config.display()
        )
    };
    let environment = match &env_target {
        Some(target) => {
            let name = args.env.as_deref().unwrap_or_default();
            // Asked of the Python the run will have, which is not always the one the
            // settings name yet.
            let settings = run_settings(context, &choices[0].python)?;
            // The spinner is gone by now: each step on its own line.
            let (python, installed) =
                set_up_environment(&home, &settings, target, &installer, &output::progress)
                    .with_context(|| format!("setting up what {name} needs"))?;
            message.push_str(&if installed.nothing_to_do {
                format!(
                    "; {name}: every import found in {}, nothing installed",
                    python.display()
                )
            } else {
                format!(
                    "; {name}: installed {} into {}{}",
                    installed.packages.join(" "),
                    python.display(),
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
                environment: name.to_owned(),
                python,
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
                .zip(&choices)
                .map(|(state, choice)| SetUpPart {
                    part: state.part.name(),
                    python: &state.python,
                    own: choice.own.is_some(),
                    problems: &state.problems,
                })
                .collect(),
            config: &config,
            changed: &changed,
            message: &message,
            installer: installer.used(),
            next: NEXT,
            environment,
        });
    }
    for (state, choice) in ready.iter().zip(&choices) {
        output::line(if choice.own.is_none() {
            format!("{}: ready ({})", state.part.name(), state.python.display())
        } else {
            let part = state.part.name();
            let python = state.python.display();
            if state.problems.is_empty() {
                format!("{part}: your own Python {python}, kept (it holds rl's pins)")
            } else {
                format!(
                    "{part}: your own Python {python}, kept: {}; `rl setup --managed-python` \
                     replaces it with rl's",
                    state.problems.join(", ")
                )
            }
        })?;
    }
    let with = installer
        .used()
        .map_or_else(String::new, |used| format!(" (with {used})"));
    output::line(format!("{message}{with}; next: {}", NEXT.join(", ")))
}

/// The engine runs train on after this setup: `--engine`, else the one the settings name.
/// An `RL_ENGINE__KIND` naming another would win over what config.toml is told: refused.
fn engine(home: &std::path::Path, asked: Option<Engine>) -> anyhow::Result<Engine> {
    let said = said(home, Some("engine"), "kind")?;
    let said_local = said.as_ref().is_some_and(|said| said.value == "local");
    let Some(asked) = asked else {
        return Ok(if said_local {
            Engine::Local
        } else {
            Engine::Hosted
        });
    };
    if let Some(Said {
        value,
        variable: Some(variable),
    }) = &said
        && value != asked.kind()
    {
        anyhow::bail!(
            "{variable}={value} names the engine and wins over config.toml: unset it to set \
             `[engine] kind = \"{}\"`",
            asked.kind()
        );
    }
    Ok(asked)
}

/// What config.toml is told: each managed Python where it is the run's, the tree and
/// environments given on the command line, and the engine.
fn edits(
    context: &Context,
    home: &std::path::Path,
    choices: &[Choice],
    engine: Engine,
    args: &SetupArgs,
) -> anyhow::Result<Vec<SettingEdit>> {
    let mut edits = Vec::new();
    for choice in choices.iter().filter(|choice| choice.own.is_none()) {
        let (table, key) = python_key(choice.part);
        edits.push(SettingEdit {
            table,
            key,
            value: text(&choice.python),
            comment: match choice.part {
                Part::Trainer => "rl's managed Python (`rl setup`): atroposlib and rl's trainer",
                Part::Engine => {
                    "rl's managed Python of the local engine (`rl setup --engine local`)"
                }
            },
        });
    }
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
    match engine {
        Engine::Local => {
            edits.push(SettingEdit {
                table: Some("engine"),
                key: "kind",
                value: engine.kind().to_owned(),
                comment: "train on this machine, with the engine each run starts",
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
        // Asked for, and the file names an engine: it is told the hosted one (issue 40 #7).
        // A file naming none already trains there. `[engine] python` and `base_model` stay
        // for a later `--engine local`; nothing reads them meanwhile.
        Engine::Hosted => {
            if args.engine.is_some() && read_setting(home, Some("engine"), "kind")?.is_some() {
                edits.push(SettingEdit {
                    table: Some("engine"),
                    key: "kind",
                    value: engine.kind().to_owned(),
                    comment: "train on the hosted Tinker, with TINKER_API_KEY",
                });
            }
        }
    }
    Ok(edits)
}

/// `table.key = "new" (was "old")` of each key of `changed`, `before` being the file's values
/// before `edits`.
fn described_changes(
    edits: &[SettingEdit],
    before: &[Option<String>],
    changed: &[String],
) -> Vec<String> {
    edits
        .iter()
        .zip(before)
        .filter_map(|(edit, before)| {
            let name = edit.table.map_or_else(
                || edit.key.to_owned(),
                |table| format!("{table}.{}", edit.key),
            );
            changed.contains(&name).then(|| match before {
                Some(old) => format!("{name} = {:?} (was {old:?})", edit.value),
                None => format!("{name} = {:?}", edit.value),
            })
        })
        .collect()
}

/// What to run after `rl setup`.
const NEXT: &[&str] = &["rl doctor", "rl envs list", "rl mcp --print-config CLIENT"];

/// What `rl setup --json` prints once every part is ready.
#[derive(Serialize)]
struct SetUp<'a> {
    /// What installed packages this time: `uv`, or `venv + pip`; null when nothing was.
    installer: Option<&'a str>,
    parts: Vec<SetUpPart<'a>>,
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
    /// The run's Python, which it was installed into.
    python: PathBuf,
    /// `name==version` of each package installed; empty when nothing was missing.
    installed: Vec<String>,
    /// The file recording them.
    record: Option<PathBuf>,
}

/// An environment whose imports cannot be judged: the run's Python is not there or lacks
/// atroposlib.
/// The settings with the run's Python `rl setup` chose (written to `config.toml` already, or
/// about to be).
fn run_settings(
    context: &Context,
    run_python: &std::path::Path,
) -> anyhow::Result<rl_settings::Settings> {
    let mut settings = rl_settings::Settings::clone(&*context.tools()?.settings()?);
    run_python.clone_into(&mut settings.python);
    Ok(settings)
}

fn unjudged(name: &str, python: &std::path::Path) -> anyhow::Error {
    anyhow::anyhow!(
        "cannot check what {name} imports: the run's Python {} cannot be asked or lacks \
         atroposlib; `rl doctor` says why",
        python.display()
    )
}

#[derive(Serialize)]
struct SetUpPart<'a> {
    part: &'static str,
    python: &'a std::path::Path,
    /// The operator's own Python, kept: rl installed nothing there (but what `--env` asked).
    own: bool,
    /// Where it stands beside rl's pins (always empty for rl's managed Python, made to them).
    problems: &'a [String],
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
    /// The operator's own Python, which `rl setup` keeps.
    own: bool,
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
    choices: &[Choice],
    local: bool,
    env: Option<&str>,
    as_json: bool,
) -> anyhow::Result<()> {
    let states: Vec<PartState> = choices
        .iter()
        .map(|choice| {
            if choice.own.is_some() {
                inspect_python(choice.part, &choice.python)
            } else {
                inspect(home, choice.part)
            }
        })
        .collect();
    let run_python = &choices[0].python;
    let deps = match env {
        Some(name) => {
            let target = context.tools()?.environment_to_set_up(name)?;
            let settings = run_settings(context, run_python)?;
            Some(
                env_dependencies::examine(home, &settings, &target.file, name, target.kind)
                    .ok_or_else(|| unjudged(name, run_python))?,
            )
        }
        None => None,
    };
    let env_ready = deps
        .as_ref()
        .is_none_or(env_dependencies::Dependencies::ready);
    let ready = states.iter().all(|state| state.problems.is_empty()) && env_ready;
    let fix = (!ready).then(|| {
        let mut fix = "rl setup".to_owned() + if local { " --engine local" } else { "" };
        // `rl setup` keeps an operator's own Python as it is: rl's replaces it.
        if states
            .iter()
            .zip(choices)
            .any(|(state, choice)| choice.own.is_some() && !state.problems.is_empty())
        {
            fix.push_str(" --managed-python");
        }
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
                .zip(choices)
                .map(|(state, choice)| CheckedPart {
                    part: state.part.name(),
                    python: &state.python,
                    own: choice.own.is_some(),
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
        for (state, choice) in states.iter().zip(choices) {
            let part = state.part.name();
            let python = state.python.display();
            let problems = state.problems.join(", ");
            output::line(match (state.problems.is_empty(), choice.own.is_some()) {
                (true, false) => format!("{part}: as pinned ({python})"),
                (true, true) => format!("{part}: as pinned (your own Python {python})"),
                (false, false) => format!("{part}: {problems}"),
                (false, true) => format!("{part}: your own Python {python}: {problems}"),
            })?;
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
            output::say(&format!("fix: {fix}"))?;
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
