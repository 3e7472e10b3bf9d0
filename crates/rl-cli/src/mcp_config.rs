//! `rl mcp --print-config CLIENT`: the snippet that connects an MCP client to this `rl`, with
//! the absolute path of the running binary and of the state directory (clients start servers
//! with a bare environment, so nothing is left to `PATH` or `HOME`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::ValueEnum;
use serde_json::{Map, Value, json};

use crate::context::Context;
use crate::output;

/// The MCP clients whose configuration format is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum McpClient {
    /// Claude Desktop: `claude_desktop_config.json`.
    ClaudeDesktop,
    /// Claude Code: `.mcp.json` in a project (or `claude mcp add-json rl '<the entry>'`).
    ClaudeCode,
    /// Cursor: `~/.cursor/mcp.json`, or `.cursor/mcp.json` in a project.
    Cursor,
    /// VS Code: `.vscode/mcp.json` in a workspace.
    Vscode,
    /// Codex CLI: `~/.codex/config.toml`.
    Codex,
}

/// What the client is told to start: `command args…` with `env`.
struct Server {
    command: PathBuf,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
}

pub(crate) fn print(context: &Context, client: McpClient) -> anyhow::Result<()> {
    let command = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot tell where this rl binary is")?;
    let mut env = vec![("RL_HOME", text(&context.home()?))];
    // Folders given on this command line go with the server, as it will not be given them.
    if let Some(root) = context.root_override() {
        env.push(("RL_TINKER_ATROPOS_ROOT", text(&std::path::absolute(root)?)));
    }
    if let Some(dir) = context.envs_dir_override() {
        env.push(("RL_ENVIRONMENTS_DIR", text(&std::path::absolute(dir)?)));
    }
    let server = Server {
        command,
        args: vec!["mcp".to_owned()],
        env,
    };
    output::line(snippet(client, &server))
}

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn snippet(client: McpClient, server: &Server) -> String {
    let env: Map<String, Value> = server
        .env
        .iter()
        .map(|(name, value)| ((*name).to_owned(), Value::from(value.as_str())))
        .collect();
    let entry = json!({
        "command": text(&server.command),
        "args": server.args,
        "env": env,
    });
    let pretty = |value: Value| serde_json::to_string_pretty(&value).unwrap_or_default();
    match client {
        McpClient::ClaudeDesktop | McpClient::ClaudeCode | McpClient::Cursor => {
            pretty(json!({"mcpServers": {"rl": entry}}))
        }
        McpClient::Vscode => {
            let mut entry = entry;
            if let Some(object) = entry.as_object_mut() {
                object.insert("type".to_owned(), Value::from("stdio"));
            }
            pretty(json!({"servers": {"rl": entry}}))
        }
        McpClient::Codex => {
            // TOML strings: JSON's escaping is a valid TOML basic string.
            let quoted = |value: &str| Value::from(value).to_string();
            let args: Vec<String> = server.args.iter().map(|arg| quoted(arg)).collect();
            let env: Vec<String> = server
                .env
                .iter()
                .map(|(name, value)| format!("{name} = {}", quoted(value)))
                .collect();
            format!(
                "[mcp_servers.rl]\ncommand = {}\nargs = [{}]\nenv = {{ {} }}",
                quoted(&text(&server.command)),
                args.join(", "),
                env.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> Server {
        Server {
            command: PathBuf::from("/opt/rl \"x\"/bin/rl"),
            args: vec!["mcp".to_owned()],
            env: vec![("RL_HOME", "/home/me/.rl".to_owned())],
        }
    }

    #[test]
    fn each_client_gets_its_own_shape() {
        let desktop: Value =
            serde_json::from_str(&snippet(McpClient::ClaudeDesktop, &server())).unwrap();
        assert_eq!(
            desktop["mcpServers"]["rl"],
            json!({"command": "/opt/rl \"x\"/bin/rl", "args": ["mcp"], "env": {"RL_HOME": "/home/me/.rl"}})
        );
        let vscode: Value = serde_json::from_str(&snippet(McpClient::Vscode, &server())).unwrap();
        assert_eq!(vscode["servers"]["rl"]["type"], "stdio");
        let codex: toml::Value = toml::from_str(&snippet(McpClient::Codex, &server())).unwrap();
        assert_eq!(
            codex["mcp_servers"]["rl"]["command"].as_str(),
            Some("/opt/rl \"x\"/bin/rl")
        );
        assert_eq!(
            codex["mcp_servers"]["rl"]["env"]["RL_HOME"].as_str(),
            Some("/home/me/.rl")
        );
    }
}
