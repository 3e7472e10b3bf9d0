//! The command line of one model's `process` run: argument by argument, no shell, and no key —
//! the key goes to the child's environment as `OPENAI_API_KEY`, which atroposlib's OpenAI client
//! reads when `--openai.api_key None` leaves the config without one.

use std::path::{Path, PathBuf};

use rl_python::{Imports, PythonLauncher};

use crate::folder::{ModelFiles, PreflightFolder};
use crate::marks::ModelMarks;
use crate::plan::PreflightPlan;

/// The variable atroposlib's OpenAI client reads its key from.
pub const CHILD_KEY_VARIABLE: &str = "OPENAI_API_KEY";
const WANDB_KEY_VARIABLE: &str = "WANDB_API_KEY";
/// Tell rl's environment runner (`rl_env`) that the environment's file runs as this module of
/// its package, from this folder (the one holding its top package).
pub const MODULE_VARIABLE: &str = "RL_ENV_MODULE";
pub const ROOT_VARIABLE: &str = "RL_ENV_ROOT";
/// Handed to endpoints that take no key (a local vLLM): the OpenAI client refuses to start
/// without one, and this one is no secret.
pub(crate) const NO_KEY_PLACEHOLDER: &str = "no-key-needed";

/// One model's process, ready to start.
#[derive(Clone, PartialEq)]
pub struct ModelJob {
    pub model: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub working_dir: PathBuf,
    /// Set in the child's environment (besides what it inherits minus `env_remove`, and the
    /// marks).
    pub env: Vec<(String, String)>,
    /// Inherited variables the child must not see (every key rl knows and rl's own secrets:
    /// those it needs are set in `env`).
    pub env_remove: Vec<String>,
    pub log_path: PathBuf,
    pub output_path: PathBuf,
    /// Where the runner records the model's process group as soon as it exists, so that a
    /// process other than the one running the test can find it (and end it).
    pub group_path: PathBuf,
    /// The test's stop request: once this file exists, a model not started yet never starts.
    pub stop_path: PathBuf,
    /// Groups the run writes when it completes (`--env.total_steps`).
    pub total_groups: u32,
    /// Set in the child's environment: its processes are found by them wherever they went.
    pub marks: ModelMarks,
    /// What its log keeps at most.
    pub log_limit: rl_process::LogLimit,
    /// Where rl's environment runner counts the groups made, when the model runs through it.
    pub groups_path: Option<PathBuf>,
    /// Groups without signal after which the model is ended (`no signal`); 0: never.
    pub no_signal_groups: u64,
}

impl std::fmt::Debug for ModelJob {
    /// The environment's values are keys: only their names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("ModelJob")
            .field("model", &self.model)
            .field("program", &self.program)
            .field("args", &self.args)
            .field("working_dir", &self.working_dir)
            .field("env", &env)
            .field("env_remove", &self.env_remove)
            .field("log_path", &self.log_path)
            .field("output_path", &self.output_path)
            .field("group_path", &self.group_path)
            .field("stop_path", &self.stop_path)
            .field("total_groups", &self.total_groups)
            .field("marks", &self.marks)
            .field("log_limit", &self.log_limit)
            .field("groups_path", &self.groups_path)
            .field("no_signal_groups", &self.no_signal_groups)
            .finish()
    }
}

impl std::fmt::Display for ModelJob {
    /// The command as a person would type it (the key is not in it: it never is).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.program.display())?;
        for arg in &self.args {
            write!(f, " {arg}")?;
        }
        Ok(())
    }
}

pub fn model_job(plan: &PreflightPlan, index: usize, model: &str, test_dir: &Path) -> ModelJob {
    let folder = PreflightFolder::at(test_dir);
    let ModelFiles {
        stem,
        log_path,
        output_path,
        group_path,
        groups_path,
        items_path,
    } = folder.model(index, model);
    // A package-style environment (relative imports of its siblings, or imports through its
    // top package) runs as a module of its package, as in a run.
    let package = rl_config::run_module(plan.kind, &plan.env_file);
    let env_file = plan.env_file.to_string_lossy().into_owned();
    // Through rl's runner when the plan has one (the held-out items need it).
    let runner = plan
        .held_out
        .as_ref()
        .map(|held_out| held_out.programs.clone())
        .or_else(|| plan.runner.clone());
    let mut args = match (&runner, &package) {
        (Some(_), _) => vec!["-m".to_owned(), rl_python::ENV_RUNNER.to_owned(), env_file],
        (None, Some(package)) => vec!["-m".to_owned(), package.name.clone()],
        (None, None) => vec![env_file],
    };
    args.push("process".to_owned());
    let mut flag = |name: &str, value: String| {
        args.push(format!("--{name}"));
        args.push(value);
    };
    flag("env.total_steps", plan.steps.to_string());
    flag("env.group_size", plan.group_size.to_string());
    flag("env.use_wandb", plan.use_wandb.to_string());
    flag(
        "env.data_path_to_save_groups",
        output_path.to_string_lossy().into_owned(),
    );
    for (field, value) in &plan.env_args {
        flag(&format!("env.{field}"), value.clone());
    }
    flag("openai.base_url", plan.endpoint.base_url.clone());
    flag("openai.model_name", model.to_owned());
    flag("openai.server_type", "openai".to_owned());
    flag("openai.health_check", "false".to_owned());
    flag("openai.api_key", "None".to_owned());

    let mut env: Vec<(String, String)> = plan
        .child_environment
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let key = plan
        .endpoint
        .key
        .clone()
        .unwrap_or_else(|| NO_KEY_PLACEHOLDER.to_owned());
    // The keys the operator allows environments, as a run's environment gets them; the
    // endpoint's key, which the test's client reads, wins its variable.
    env.extend(
        plan.environment_keys
            .iter()
            .filter(|(name, _)| name != CHILD_KEY_VARIABLE)
            .map(|(name, key)| (name.clone(), key.0.clone())),
    );
    env.push((CHILD_KEY_VARIABLE.to_owned(), key));
    if let Some(programs) = &runner {
        env.push(
            PythonLauncher::new(programs, &plan.child_environment)
                .python_path(Imports::WithOperators),
        );
        // Read by `rl_env` before it imports atroposlib (a verifiers Python has none).
        env.push((
            rl_settings::KIND_VARIABLE.to_owned(),
            plan.kind.as_str().to_owned(),
        ));
        if let Some(package) = &package {
            env.push((MODULE_VARIABLE.to_owned(), package.name.clone()));
            env.push((
                ROOT_VARIABLE.to_owned(),
                package.root.to_string_lossy().into_owned(),
            ));
        }
        env.push((
            rl_process::GROUPS_FILE_VARIABLE.to_owned(),
            groups_path.to_string_lossy().into_owned(),
        ));
    }
    if let Some(held_out) = &plan.held_out {
        env.extend(rl_python::items_variables(
            rl_python::Items::HeldOut,
            held_out.slice,
        ));
        env.push((
            rl_python::ITEMS_REPORT_VARIABLE.to_owned(),
            items_path.to_string_lossy().into_owned(),
        ));
    } else if runner.is_some() {
        // Every item: a slice of nothing.
        env.extend(rl_python::items_variables(
            rl_python::Items::Training,
            rl_settings::HeldOut {
                fraction: 0.0,
                seed: 0,
            },
        ));
    } else if let Some(package) = &package {
        // `python -m` finds the module from its root; the file's own folder comes next, as a
        // script has it.
        let folders = std::iter::once(package.root.as_path()).chain(plan.env_file.parent());
        env.push(rl_python::python_path_of(folders, &plan.child_environment));
    }
    if plan.use_wandb {
        // The SDK keeps its run files in the test's folder, not in the working tree.
        env.push((
            "WANDB_DIR".to_owned(),
            test_dir.to_string_lossy().into_owned(),
        ));
        if let Some(key) = &plan.wandb_key {
            env.push((WANDB_KEY_VARIABLE.to_owned(), key.0.clone()));
        }
    }
    // Every key it is handed is set in `env`: of what it inherits, it keeps no key rl knows,
    // none of rl's own secrets, and not the endpoint's key under its own name.
    let env_remove = rl_settings::withheld_from_child(&[])
        .into_iter()
        .chain(std::iter::once(plan.endpoint.key_variable.clone()))
        .filter(|name| !env.iter().any(|(set, _)| set == name))
        // Never a package another process's environment named.
        .chain(
            [MODULE_VARIABLE, ROOT_VARIABLE]
                .into_iter()
                .filter(|_| package.is_none() || runner.is_none())
                .map(str::to_owned),
        )
        .collect();
    ModelJob {
        model: model.to_owned(),
        program: plan.python.clone(),
        args,
        working_dir: plan.working_dir.clone(),
        env,
        env_remove,
        log_path,
        output_path,
        group_path,
        stop_path: folder.stop(),
        groups_path: runner.as_ref().map(|_| groups_path),
        no_signal_groups: plan.no_signal_groups,
        total_groups: plan.steps,
        marks: ModelMarks {
            test_dir: test_dir.to_owned(),
            model: stem,
        },
        log_limit: plan.log_limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(use_wandb: bool) -> PreflightPlan {
        PreflightPlan {
            environment: "arithmetic@arithmetic_env.py".to_owned(),
            env_file: "/tree/envs/arithmetic_env.py".into(),
            kind: rl_settings::EnvironmentKind::Atropos,
            python: "/venv/bin/python".into(),
            working_dir: "/tree".into(),
            models: vec!["a/b".to_owned()],
            endpoint: crate::plan::Endpoint {
                base_url: "http://127.0.0.1:9/v1".to_owned(),
                key_variable: "MY_KEY".to_owned(),
                key: Some("sk-endpoint-key".to_owned()),
            },
            steps: 3,
            group_size: 16,
            use_wandb,
            wandb_key: Some(crate::plan::Key("wandb-key-value".to_owned())),
            environment_keys: Vec::new(),
            env_args: vec![("tokenizer_name".to_owned(), "/tok".to_owned())],
            child_environment: std::collections::BTreeMap::new(),
            concurrency: 4,
            timeout: std::time::Duration::from_secs(600),
            correct_rule: crate::analysis::CorrectRule::TopScore,
            verdict_policy: crate::verdict::VerdictPolicy::default(),
            server: None,
            held_out: None,
            log_limit: rl_process::LogLimit::default(),
            runner: None,
            no_signal_groups: 0,
        }
    }

    #[test]
    fn the_command_carries_no_key_and_the_environment_only_the_endpoints() {
        let job = model_job(
            &plan(false),
            0,
            "a/b",
            Path::new("/home/preflight/0badc0de"),
        );
        assert_eq!(
            job.to_string(),
            "/venv/bin/python /tree/envs/arithmetic_env.py process --env.total_steps 3 \
             --env.group_size 16 --env.use_wandb false --env.data_path_to_save_groups \
             /home/preflight/0badc0de/01-a_b.jsonl --env.tokenizer_name /tok \
             --openai.base_url http://127.0.0.1:9/v1 --openai.model_name a/b \
             --openai.server_type openai --openai.health_check false --openai.api_key None"
        );
        assert_eq!(
            job.env,
            vec![("OPENAI_API_KEY".to_owned(), "sk-endpoint-key".to_owned())]
        );
        for name in [
            "MY_KEY",
            "WANDB_API_KEY",
            "TINKER_API_KEY",
            "OPENROUTER_API_KEY",
        ] {
            assert!(job.env_remove.iter().any(|n| n == name), "{name}");
        }
        assert!(!format!("{job:?}").contains("sk-endpoint-key"));
    }

    /// As a run's environment: the keys the operator allows environments, and no other; the
    /// endpoint's key keeps the variable the test's client reads.
    #[test]
    fn the_environment_gets_the_keys_allowed_environments_and_no_other() {
        let mut plan = plan(false);
        plan.environment_keys = vec![
            (
                "OPENROUTER_API_KEY".to_owned(),
                crate::plan::Key("sk-or-allowed".to_owned()),
            ),
            (
                "OPENAI_API_KEY".to_owned(),
                crate::plan::Key("sk-openai-allowed".to_owned()),
            ),
        ];
        let job = model_job(&plan, 0, "a/b", Path::new("/t"));
        let env: std::collections::BTreeMap<_, _> = job.env.iter().cloned().collect();
        assert_eq!(env["OPENROUTER_API_KEY"], "sk-or-allowed");
        assert_eq!(env["OPENAI_API_KEY"], "sk-endpoint-key");
        assert_eq!(
            job.env
                .iter()
                .filter(|(name, _)| name == "OPENAI_API_KEY")
                .count(),
            1
        );
        for name in ["WANDB_API_KEY", "TINKER_API_KEY", "MY_KEY"] {
            assert!(job.env_remove.iter().any(|n| n == name), "{name}");
        }
        for name in ["OPENROUTER_API_KEY", "OPENAI_API_KEY"] {
            assert!(!job.env_remove.iter().any(|n| n == name), "{name}");
        }
    }

    #[test]
    fn with_wandb_the_children_get_its_key_and_the_tests_folder() {
        let job = model_job(&plan(true), 0, "a/b", Path::new("/home/preflight/0badc0de"));
        assert!(
            job.args
                .windows(2)
                .any(|w| w == ["--env.use_wandb", "true"])
        );
        let env: std::collections::BTreeMap<_, _> = job.env.iter().cloned().collect();
        assert_eq!(env["WANDB_DIR"], "/home/preflight/0badc0de");
        assert_eq!(env["WANDB_API_KEY"], "wandb-key-value");
        assert!(!job.env_remove.iter().any(|n| n == "WANDB_API_KEY"));
    }

    #[test]
    fn held_out_items_run_the_environment_through_rl_env_with_the_slice() {
        let mut plan = plan(false);
        plan.child_environment
            .insert("PYTHONPATH".to_owned(), "/theirs".to_owned());
        plan.held_out = Some(crate::plan::HeldOutItems {
            programs: "/home/python/abc".into(),
            slice: rl_settings::HeldOut {
                fraction: 0.25,
                seed: 7,
            },
        });
        let job = model_job(&plan, 1, "run:0badc0de", Path::new("/t"));
        assert_eq!(
            job.args[..4],
            ["-m", "rl_env", "/tree/envs/arithmetic_env.py", "process"]
        );
        let env: std::collections::BTreeMap<_, _> = job.env.iter().cloned().collect();
        assert_eq!(env["PYTHONPATH"], "/home/python/abc:/theirs");
        assert_eq!(env["RL_ITEMS"], "held-out");
        assert_eq!(env["RL_HELD_OUT_FRACTION"], "0.25");
        assert_eq!(env["RL_HELD_OUT_SEED"], "7");
        assert_eq!(env["RL_ITEMS_REPORT"], "/t/02-run_0badc0de.items.json");
    }

    /// An Atropos-shaped package whose environment imports a sibling relatively.
    fn package_plan() -> (tempfile::TempDir, std::path::PathBuf, PreflightPlan) {
        let dir = tempfile::tempdir().unwrap();
        let environments = std::fs::canonicalize(dir.path())
            .unwrap()
            .join("environments");
        let package = environments.join("vowels");
        std::fs::create_dir_all(&package).unwrap();
        std::fs::write(package.join("__init__.py"), "").unwrap();
        std::fs::write(package.join("scoring.py"), "").unwrap();
        std::fs::write(
            package.join("vowels_env.py"),
            "from .scoring import vowel_share\n",
        )
        .unwrap();
        let mut plan = plan(false);
        plan.env_file = package.join("vowels_env.py");
        plan.child_environment
            .insert("PYTHONPATH".to_owned(), "/theirs".to_owned());
        (dir, environments, plan)
    }

    #[test]
    fn a_package_style_environment_runs_as_a_module_of_its_package() {
        let (_dir, environments, plan) = package_plan();
        let job = model_job(&plan, 0, "a/b", Path::new("/t"));
        assert_eq!(job.args[..3], ["-m", "vowels.vowels_env", "process"]);
        let env: std::collections::BTreeMap<_, _> = job.env.iter().cloned().collect();
        let environments = environments.display();
        assert_eq!(
            env["PYTHONPATH"],
            format!("{environments}:{environments}/vowels:/theirs")
        );
        assert!(!env.contains_key(MODULE_VARIABLE));
        assert!(job.env_remove.iter().any(|n| n == MODULE_VARIABLE));
    }

    #[test]
    fn through_rl_env_the_package_is_named_to_the_runner() {
        let (_dir, environments, mut plan) = package_plan();
        plan.held_out = Some(crate::plan::HeldOutItems {
            programs: "/home/python/abc".into(),
            slice: rl_settings::HeldOut {
                fraction: 0.25,
                seed: 7,
            },
        });
        let job = model_job(&plan, 0, "a/b", Path::new("/t"));
        let file = plan.env_file.to_string_lossy().into_owned();
        assert_eq!(job.args[..4], ["-m", "rl_env", file.as_str(), "process"]);
        let env: std::collections::BTreeMap<_, _> = job.env.iter().cloned().collect();
        assert_eq!(env["PYTHONPATH"], "/home/python/abc:/theirs");
        assert_eq!(env[MODULE_VARIABLE], "vowels.vowels_env");
        assert_eq!(env[ROOT_VARIABLE], environments.to_string_lossy());
        assert!(!job.env_remove.iter().any(|n| n == MODULE_VARIABLE));
    }

    #[test]
    fn with_the_runner_every_model_runs_through_rl_env_and_counts_its_groups() {
        let mut through = plan(false);
        through.runner = Some("/home/python/abc".into());
        through.no_signal_groups = 32;
        let job = model_job(&through, 1, "a/b", Path::new("/t"));
        assert_eq!(
            job.args[..3],
            ["-m", "rl_env", "/tree/envs/arithmetic_env.py"]
        );
        let env: std::collections::BTreeMap<_, _> = job.env.iter().cloned().collect();
        assert_eq!(env["RL_GROUPS_FILE"], "/t/02-a_b.groups.json");
        assert_eq!(env["RL_ITEMS"], "training");
        assert_eq!(env["RL_HELD_OUT_FRACTION"], "0");
        assert_eq!(job.groups_path, Some("/t/02-a_b.groups.json".into()));
        assert_eq!(job.no_signal_groups, 32);
        assert_eq!(
            model_job(&plan(false), 1, "a/b", Path::new("/t")).groups_path,
            None
        );
    }
}
