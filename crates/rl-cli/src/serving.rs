//! `rl checkpoints serve|served|stop`: a run's checkpoints served as an OpenAI-compatible
//! endpoint on loopback, in the foreground (Ctrl-C ends it) or detached (`--detach`: a process
//! of its own that `rl checkpoints stop` ends), and the settings a client needs.

use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use rl_tools::{HostedEndpoint, ServeEnd, ServePlan, ServedView, ServingStarted};

use crate::context::{Context, interrupted, runtime};
use crate::output;

/// A detached server has this long to load its checkpoints (the engine compiles on a CPU).
const DETACHED_READY_LIMIT: Duration = Duration::from_secs(900);

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Checkpoints of one run: RUN_ID (its last saved state), RUN_ID@STEP, RUN_ID@best or
    /// RUN_ID@base (the base model); each served under its name `run:RUN_ID@…`.
    #[arg(required = true, value_name = "RUN[@STEP|@best|@base]")]
    models: Vec<String>,
    /// The loopback port (default: a free one).
    #[arg(long)]
    port: Option<u16>,
    /// Serve from a process of its own and return once it is ready; `rl checkpoints stop
    /// SERVE_ID` ends it.
    #[arg(long)]
    detach: bool,
    /// Print what CLIENT needs to use the endpoint (with the key's name, never its value).
    #[arg(long, value_name = "CLIENT")]
    print_config: Option<Client>,
    /// The id a detached server was given by the process that started it.
    #[arg(long, hide = true, conflicts_with = "detach")]
    serve_id: Option<String>,
}

/// The clients `--print-config` knows.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Client {
    /// Environment variables the `openai` SDKs and most agent frameworks read.
    Env,
    /// The official `openai` Python client.
    OpenaiPython,
    /// A `curl` request.
    Curl,
}

pub(crate) fn serve(context: &Context, args: &ServeArgs, as_json: bool) -> anyhow::Result<()> {
    let tools = context.tools()?;
    let models: Vec<String> = args.models.iter().map(|model| named(model)).collect();
    if args.detach {
        return match detach(&tools, &models, args.port)? {
            ServingStarted::Local(served) => {
                print_served(&served, args.print_config, as_json, true)
            }
            ServingStarted::Hosted(endpoint) => print_hosted(&endpoint, args.print_config, as_json),
        };
    }
    let plan = tools.serve_plan(&models, args.port, args.serve_id.as_deref())?;
    let local = match plan {
        ServePlan::Hosted(endpoint) => return print_hosted(&endpoint, args.print_config, as_json),
        ServePlan::Local(local) => local,
    };
    let print_config = args.print_config;
    // The signal handlers are the runtime's: made inside it, before the server starts.
    let ended = runtime()?.block_on(async {
        tools
            .serve(
                local,
                |served| {
                    // A failure to print is the caller's pipe gone: the server goes on.
                    let _ = print_served(served, print_config, as_json, false);
                },
                interrupted(),
            )
            .await
    })?;
    match ended {
        ServeEnd::Stopped => Ok(()),
        ServeEnd::ServerExited { log_tail } => {
            anyhow::bail!("the model server exited by itself; the end of its log:\n{log_tail}")
        }
    }
}

pub(crate) fn served(context: &Context, as_json: bool) -> anyhow::Result<()> {
    let up = context.tools()?.served()?;
    if as_json {
        return output::json(&up);
    }
    if up.served.is_empty() {
        return output::line(
            "nothing is served; `rl checkpoints serve RUN@STEP` serves a checkpoint",
        );
    }
    let mut table = output::table(&[
        "serve id",
        "state",
        "models",
        "base url",
        "owner pid",
        "since",
    ]);
    for served in &up.served {
        table.add_row([
            output::cell(&served.serve_id),
            output::cell(served.state),
            output::cell(served.models.join(", ")),
            output::cell(&served.base_url),
            output::cell(served.owner_pid.to_string()),
            output::cell(&served.started_at),
        ]);
    }
    output::line(table)
}

pub(crate) fn stop(context: &Context, serve_id: &str, as_json: bool) -> anyhow::Result<()> {
    let stopped = context.tools()?.stop_serving(serve_id)?;
    if as_json {
        return output::json(&stopped);
    }
    output::line(format!(
        "stopped {} ({}){}",
        stopped.serve_id,
        stopped.models.join(", "),
        if stopped.ended_by == "forced" {
            ": its owner did not answer, rl ended its processes"
        } else {
            ""
        }
    ))
}

/// `RUN_ID@4` and `run:RUN_ID@4` alike.
fn named(model: &str) -> String {
    if model.starts_with(rl_tools::RUN_PREFIX) {
        model.to_owned()
    } else {
        format!("{}{model}", rl_tools::RUN_PREFIX)
    }
}

/// Starts serving from a process of its own and waits until it is ready.
fn detach(
    tools: &rl_tools::Tools,
    models: &[String],
    port: Option<u16>,
) -> anyhow::Result<ServingStarted> {
    let started = tools.start_serving(models, port)?;
    let ServingStarted::Local(served) = &started else {
        return Ok(started);
    };
    let deadline = Instant::now() + DETACHED_READY_LIMIT;
    loop {
        match tools.served_one(&served.serve_id)? {
            Some(now) if now.is_ready() => return Ok(ServingStarted::Local(now)),
            Some(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(500)),
            Some(_) => anyhow::bail!(
                "server {} is not ready after {} s; it goes on loading (`rl checkpoints served`), \
                 or `rl checkpoints stop {}` ends it",
                served.serve_id,
                DETACHED_READY_LIMIT.as_secs(),
                served.serve_id
            ),
            None => anyhow::bail!(
                "server {} ended before it was ready; its messages are in {}",
                served.serve_id,
                tools.served_dir().join("detached.log").display()
            ),
        }
    }
}

fn print_served(
    served: &ServedView,
    client: Option<Client>,
    as_json: bool,
    detached: bool,
) -> anyhow::Result<()> {
    if as_json {
        return output::json(served);
    }
    output::line(format!(
        "serving {} at {} (serve id {}; any API key is accepted)",
        served.models.join(", "),
        served.base_url,
        served.serve_id
    ))?;
    if let Some(client) = client {
        output::line(config_for(
            client,
            &served.base_url,
            &served.models[0],
            None,
        ))?;
    }
    output::line(if detached {
        format!("stop it with: rl checkpoints stop {}", served.serve_id)
    } else {
        "Ctrl-C stops it".to_owned()
    })
}

fn print_hosted(
    endpoint: &HostedEndpoint,
    client: Option<Client>,
    as_json: bool,
) -> anyhow::Result<()> {
    if as_json {
        return output::json(endpoint);
    }
    output::line(format!(
        "run {} trained at a Tinker service, which serves its checkpoints itself: point an \
         OpenAI-compatible client at {} with the key in {}",
        endpoint.run_id, endpoint.base_url, endpoint.key_variable
    ))?;
    for model in &endpoint.models {
        output::line(format!("  {}: model {}", model.name, model.model))?;
    }
    if let (Some(client), Some(first)) = (client, endpoint.models.first()) {
        output::line(config_for(
            client,
            &endpoint.base_url,
            &first.model,
            Some(endpoint.key_variable),
        ))?;
    }
    Ok(())
}

/// What `client` needs, the key named by its variable (`key_variable`) or a placeholder.
fn config_for(client: Client, base_url: &str, model: &str, key_variable: Option<&str>) -> String {
    match client {
        Client::Env => {
            let key =
                key_variable.map_or_else(|| "unused".to_owned(), |name| format!("\"${name}\""));
            format!(
                "export OPENAI_BASE_URL={base_url}\nexport OPENAI_API_KEY={key}\nexport OPENAI_MODEL={model}"
            )
        }
        Client::OpenaiPython => {
            let key = key_variable.map_or_else(
                || "\"unused\"".to_owned(),
                |name| format!("os.environ[\"{name}\"]"),
            );
            format!(
                "import os\nfrom openai import OpenAI\nclient = OpenAI(base_url=\"{base_url}\", \
                 api_key={key})\nclient.chat.completions.create(model=\"{model}\", \
                 messages=[{{\"role\": \"user\", \"content\": \"Hello\"}}])"
            )
        }
        Client::Curl => {
            let auth = key_variable
                .map(|name| format!(" -H \"Authorization: Bearer ${name}\""))
                .unwrap_or_default();
            format!(
                "curl -s {base_url}/chat/completions -H 'Content-Type: application/json'{auth} \
                 -d '{{\"model\": \"{model}\", \"messages\": [{{\"role\": \"user\", \"content\": \
                 \"Hello\"}}]}}'"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_named_with_or_without_the_prefix() {
        assert_eq!(named("0badc0de@4"), "run:0badc0de@4");
        assert_eq!(named("run:0badc0de@base"), "run:0badc0de@base");
    }

    #[test]
    fn configs_name_the_key_and_never_hold_it() {
        let hosted = config_for(
            Client::Env,
            "https://x/v1",
            "tinker://m/s",
            Some("TINKER_API_KEY"),
        );
        assert!(
            hosted.contains("OPENAI_API_KEY=\"$TINKER_API_KEY\""),
            "{hosted}"
        );
        let local = config_for(
            Client::OpenaiPython,
            "http://127.0.0.1:9/v1",
            "run:0badc0de@4",
            None,
        );
        assert!(
            local.contains("base_url=\"http://127.0.0.1:9/v1\""),
            "{local}"
        );
        assert!(local.contains("model=\"run:0badc0de@4\""), "{local}");
        let curl = config_for(Client::Curl, "https://x/v1", "m", Some("TINKER_API_KEY"));
        assert!(curl.contains("Bearer $TINKER_API_KEY"), "{curl}");
    }
}
