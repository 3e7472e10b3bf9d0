//! Whether the tools an environment gives the model reach the model (issue 56). Before a run
//! starts, its environment is loaded in its own Python as the run's would be (the run's config,
//! the operator's variables) by `python -m rl_env ENV_FILE check`, which answers one JSON line;
//! before a pre-flight of models rl serves, `python -m rl_env ENV_FILE tools` names the tools and
//! the served model's chat template is asked (`before_preflight`). The rule is
//! `rl_verifiers.tool_rendering`'s alone; the run's own environment applies it again as it loads
//! (and refuses there), so what could not be asked here (a check that did not answer) is left to
//! the run, never guessed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Deserialize;
use wait_timeout::ChildExt;

use crate::ToolsError;
use rl_process::WrittenConfig;
use rl_settings::Settings;

/// Loading a verifiers environment and its tokenizer takes seconds; one that takes longer is
/// left to the run, which loads it anyway.
const CHECK_TIMEOUT: Duration = Duration::from_secs(180);
/// Files of an environment's own code read for a tool's name; past this, it is checked.
const MAX_FILES_READ: usize = 500;
const MAX_FILE_BYTES: u64 = 1 << 20;
const RUN_DIR_VARIABLE: &str = "RL_RUN_DIR";

/// What `check` answers.
#[derive(Debug, Deserialize)]
struct Verdict {
    #[serde(default)]
    tools: Vec<String>,
    refused: Option<String>,
    /// The tokenizer whose chat template renders the prompts, where the environment's Python
    /// cannot apply it (verifiers v0's has no transformers): rl's trainer's Python is asked.
    #[serde(default)]
    chat_template_of: Option<String>,
}

/// Refuses the run `written` is the config of when its environment gives the model tools its
/// prompts will not show. Asked only of kinds whose prompts rl renders, and only when the
/// environment's own code names tools at all (code that never does cannot give any; the check
/// costs a load of verifiers, seconds of CPU).
pub(crate) fn before_start(
    home: &Path,
    settings: &Settings,
    written: &WrittenConfig,
) -> Result<(), ToolsError> {
    let kind = written.environment_kind;
    if !kind.prompts_rendered_by_rl() || !mentions_tools(&written.env_file, kind) {
        return Ok(());
    }
    // Absolute: the check runs in the run's folder.
    let (Ok(config), Ok(env_file)) = (
        std::path::absolute(&written.path),
        std::path::absolute(&written.env_file),
    ) else {
        return Ok(());
    };
    let Some(run_dir) = config.parent() else {
        return Ok(());
    };
    let programs = rl_python::install(home).map_err(|error| {
        ToolsError::Internal(format!("cannot write rl's Python programs: {error}"))
    })?;
    let launcher = rl_python::PythonLauncher::new(&programs, &settings.child_environment);
    let check = launcher.module(
        &written.env_python,
        rl_python::ENV_RUNNER,
        [
            env_file.to_string_lossy().into_owned(),
            "check".to_owned(),
            "--config".to_owned(),
            config.to_string_lossy().into_owned(),
        ],
        rl_python::Imports::WithOperators,
    );
    let mut command = command_of(check, run_dir);
    command
        .env(rl_settings::KIND_VARIABLE, kind.as_str())
        // The package the file runs as, from the run's record (`rl_env.__main__.package_of`).
        .env(RUN_DIR_VARIABLE, run_dir)
        .envs(rl_python::items_variables(
            rl_python::Items::Training,
            settings.held_out,
        ));
    let mut verdict = verdict_of(command);
    if let Some(Verdict {
        tools,
        chat_template_of: Some(tokenizer),
        ..
    }) = &verdict
    {
        verdict = chat_template_verdict(&launcher, &settings.python, tokenizer, tools, run_dir);
    }
    match verdict {
        Some(Verdict {
            refused: Some(reason),
            ..
        }) => Err(ToolsError::NotStartable { reason }),
        _ => Ok(()),
    }
}

/// Refuses a pre-flight (or comparison) of models rl serves itself whose chat route would
/// refuse the tools the environment gives them: every rollout would fail so, after an engine
/// started for nothing. An outside endpoint renders for itself and is not asked.
pub(crate) fn before_preflight(
    home: &Path,
    settings: &Settings,
    plan: &rl_preflight::PreflightPlan,
) -> Result<(), ToolsError> {
    let Some(tokenizer) = plan
        .server
        .as_ref()
        .and_then(|server| server.chat_template_of.as_ref())
    else {
        return Ok(());
    };
    let kind = plan.kind;
    if !kind.prompts_rendered_by_rl() || !mentions_tools(&plan.env_file, kind) {
        return Ok(());
    }
    let Ok(env_file) = std::path::absolute(&plan.env_file) else {
        return Ok(());
    };
    let programs = rl_python::install(home).map_err(|error| {
        ToolsError::Internal(format!("cannot write rl's Python programs: {error}"))
    })?;
    let launcher = rl_python::PythonLauncher::new(&programs, &plan.child_environment);
    let mut args = vec![env_file.to_string_lossy().into_owned(), "tools".to_owned()];
    for (field, value) in &plan.env_args {
        args.extend([format!("--env.{field}"), value.clone()]);
    }
    // Asked nothing: the endpoint only has to be named.
    args.extend(
        [
            "--openai.base_url",
            "http://127.0.0.1:9/v1",
            "--openai.model_name",
            "tools",
        ]
        .map(str::to_owned),
    );
    let names = launcher.module(
        &plan.python,
        rl_python::ENV_RUNNER,
        args,
        rl_python::Imports::WithOperators,
    );
    let mut command = command_of(names, &plan.working_dir);
    command.env(rl_settings::KIND_VARIABLE, kind.as_str());
    if let Some(package) = rl_config::run_module(kind, &plan.env_file) {
        command
            .env(rl_preflight::MODULE_VARIABLE, &package.name)
            .env(rl_preflight::ROOT_VARIABLE, &package.root);
    }
    let Some(Verdict { tools, .. }) = verdict_of(command) else {
        return Ok(());
    };
    if tools.is_empty() {
        return Ok(());
    }
    match chat_template_verdict(
        &launcher,
        &settings.python,
        tokenizer,
        &tools,
        &plan.working_dir,
    ) {
        Some(Verdict {
            refused: Some(reason),
            ..
        }) => Err(ToolsError::TestNotStartable { reason }),
        _ => Ok(()),
    }
}

/// The verdict for `tools` rendered by `tokenizer`'s chat template, as rl's trainer and chat
/// route apply it: asked of the trainer's Python (`python`), which holds transformers.
fn chat_template_verdict(
    launcher: &rl_python::PythonLauncher<'_>,
    python: &Path,
    tokenizer: &str,
    tools: &[String],
    dir: &Path,
) -> Option<Verdict> {
    let ask = launcher.module(
        python,
        "rl_verifiers.tool_rendering",
        std::iter::once(tokenizer.to_owned()).chain(tools.iter().cloned()),
        rl_python::Imports::WithOperators,
    );
    verdict_of(command_of(ask, dir))
}

/// `program` as a command: no secret (nothing is sampled, and the run's own environment gets
/// its keys itself), nothing on stdin, its answer on stdout.
fn command_of(program: rl_python::ProgramCommand, dir: &Path) -> Command {
    let mut command = Command::new(&program.program);
    rl_settings::withhold(&mut command, &[]);
    command
        .args(&program.args)
        .envs(program.env)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    command
}

/// The check's answer; None when it gave none (it could not load the environment, or did not
/// finish in time): the run's environment will say why as it loads.
fn verdict_of(mut command: Command) -> Option<Verdict> {
    let mut child = command.spawn().ok()?;
    let mut stdout = child.stdout.take()?;
    // Read beside the wait: an answer larger than a pipe's buffer must not stall the child.
    let reader = std::thread::spawn(move || {
        let mut output = String::new();
        let _ = stdout.read_to_string(&mut output);
        output
    });
    let finished = child.wait_timeout(CHECK_TIMEOUT).ok().flatten();
    if finished.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let output = reader.join().ok()?;
    finished.filter(std::process::ExitStatus::success)?;
    serde_json::from_str(output.lines().last()?).ok()
}

/// Whether the environment's own Python files name a tool anywhere (`names_a_tool`): its
/// package's files, or a single-file environment's folder, which it may import from.
fn mentions_tools(env_file: &Path, kind: rl_settings::EnvironmentKind) -> bool {
    let folder = match rl_discovery::run_module(kind, env_file) {
        Some(package) => {
            let top = package.name.split('.').next().unwrap_or_default();
            package.root.join(top)
        }
        None => match env_file.parent() {
            Some(folder) => folder.to_path_buf(),
            None => return true,
        },
    };
    let mut files = Vec::new();
    if !python_files(&folder, &mut files) {
        return true;
    }
    files.iter().any(|file| says_tool(file))
}

/// Collects the `.py` files under `folder` (its subfolders too, for a package), false past
/// `MAX_FILES_READ` or where a folder cannot be read.
fn python_files(folder: &Path, files: &mut Vec<PathBuf>) -> bool {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return false;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            return false;
        };
        if kind.is_dir() && path.join("__init__.py").is_file() {
            if !python_files(&path, files) {
                return false;
            }
        } else if kind.is_file() && path.extension().is_some_and(|ext| ext == "py") {
            files.push(path);
            if files.len() > MAX_FILES_READ {
                return false;
            }
        }
    }
    true
}

fn says_tool(file: &Path) -> bool {
    let Ok(opened) = std::fs::File::open(file) else {
        return true;
    };
    let mut text = Vec::new();
    if opened.take(MAX_FILE_BYTES).read_to_end(&mut text).is_err() {
        return true;
    }
    names_a_tool(&text)
}

/// "tool" starting a word or a part of one (`tool_defs`, `vf.Toolset`, `SearchTool`, `TOOLS`),
/// not inside another word (`functools`, `itertools`).
fn names_a_tool(text: &[u8]) -> bool {
    text.windows(4).enumerate().any(|(at, word)| {
        word.eq_ignore_ascii_case(b"tool")
            && (word[0] == b'T' || at == 0 || !text[at - 1].is_ascii_alphabetic())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rl_settings::EnvironmentKind;

    #[test]
    fn a_tool_is_a_word_or_the_start_of_one() {
        for named in [
            "tools=[add]",
            "vf.Toolset",
            "SearchTool",
            "get_tool",
            "TOOL",
            "tool",
        ] {
            assert!(names_a_tool(named.as_bytes()), "{named}");
        }
        for unnamed in ["from functools import cache", "itertools", "stool", ""] {
            assert!(!names_a_tool(unnamed.as_bytes()), "{unnamed}");
        }
    }

    #[test]
    fn only_code_that_names_tools_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let package = dir.path().join("digits");
        std::fs::create_dir_all(package.join("parts")).unwrap();
        std::fs::write(package.join("__init__.py"), "from .parts import t\n").unwrap();
        std::fs::write(package.join("parts/__init__.py"), "t = 1\n").unwrap();
        std::fs::write(dir.path().join("pyproject.toml"), "[tool.hatch]\n").unwrap();
        let file = package.join("__init__.py");
        assert!(!mentions_tools(&file, EnvironmentKind::VerifiersV0));
        std::fs::write(package.join("parts/__init__.py"), "t = vf.ToolEnv\n").unwrap();
        assert!(mentions_tools(&file, EnvironmentKind::VerifiersV0));
        // Where the code cannot be read, it is checked.
        assert!(mentions_tools(
            &dir.path().join("gone/env.py"),
            EnvironmentKind::VerifiersV0
        ));
    }
}
