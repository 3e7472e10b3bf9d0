//! Where `rl` finds its state and settings, with the command line's overrides applied.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context as _;
use rl_config::{ConfigService, Settings};

pub(crate) struct Context {
    home: Option<PathBuf>,
    root: Option<PathBuf>,
    envs_dir: Option<PathBuf>,
}

impl Context {
    pub(crate) fn new(
        home: Option<PathBuf>,
        root: Option<PathBuf>,
        envs_dir: Option<PathBuf>,
    ) -> Self {
        Self {
            home,
            root,
            envs_dir,
        }
    }

    pub(crate) fn home(&self) -> anyhow::Result<PathBuf> {
        if let Some(home) = &self.home {
            return Ok(home.clone());
        }
        rl_config::default_home(&process_environment())
            .context("no state directory: set RL_HOME or HOME, or pass --home")
    }

    /// Operator settings, then `--root` / `--envs-dir`; with no tree configured anywhere, the
    /// current folder is taken as the tinker-atropos tree.
    pub(crate) fn settings(&self) -> anyhow::Result<Settings> {
        let mut settings = Settings::load(&self.home()?, std::env::vars())?;
        if let Some(root) = &self.root {
            settings.tinker_atropos_root = Some(root.clone());
            settings.environments_dir = None;
        }
        if let Some(dir) = &self.envs_dir {
            settings.environments_dir = Some(dir.clone());
        }
        if settings.tinker_atropos_root.is_none() && settings.environments_dir.is_none() {
            settings.tinker_atropos_root = Some(PathBuf::from("."));
        }
        Ok(settings)
    }

    pub(crate) fn service(&self) -> anyhow::Result<ConfigService> {
        Ok(ConfigService::open(&self.home()?, self.settings()?)?)
    }
}

pub(crate) fn process_environment() -> BTreeMap<String, String> {
    std::env::vars().collect()
}
