//! The fixture OpenAI-compatible server (`fixtures/openai-server`), for the demo and the bench.

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::Context;

use crate::display;

pub(crate) const SERVER: &str = "fixtures/openai-server/openai_server.py";

/// `openai_server.py --port 0`, killed when dropped.
pub(crate) struct FixtureServer {
    child: Child,
    pub(crate) base_url: String,
}

impl FixtureServer {
    pub(crate) fn start(root: &Path, python: &Path) -> anyhow::Result<Self> {
        let mut command = Command::new(python);
        command
            .arg(root.join(SERVER))
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let child = command
            .spawn()
            .with_context(|| format!("cannot start `{}`", display(&command)))?;
        // From here on, an error drops the server, which kills it.
        let mut server = Self {
            child,
            base_url: String::new(),
        };
        let stdout = server
            .child
            .stdout
            .take()
            .context("the fixture server's output is not piped")?;
        let mut first = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut first)
            .context("cannot read the fixture server's first line")?;
        first
            .trim()
            .strip_prefix("listening on ")
            .with_context(|| format!("the fixture server said {first:?}, not `listening on URL`"))?
            .clone_into(&mut server.base_url);
        Ok(server)
    }

    pub(crate) fn stop(mut self) -> anyhow::Result<()> {
        self.child
            .kill()
            .context("cannot kill the fixture server")?;
        self.child
            .wait()
            .context("cannot collect the fixture server")?;
        Ok(())
    }
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        // Already collected after `stop`: both calls then fail harmlessly.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
