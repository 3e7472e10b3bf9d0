//! `rl work`: the detached worker of a long tool call (a pre-flight, a comparison) started
//! without waiting. It reads its order on standard input, plans and runs the test, and names
//! the test on standard output, one JSON line, as soon as its folder exists (or says why it
//! cannot, `{"error": ...}`); the caller reads that line and answers. The test then runs to its
//! end here, whatever becomes of the caller; its folder is where anyone follows it.

use std::io::Write as _;
use std::sync::{Arc, Mutex};

use rl_preflight::Progress;
use rl_tools::WorkOrder;

use crate::context::{Context, interrupted, runtime};

pub(crate) fn run(context: &Context) -> anyhow::Result<()> {
    let outcome = work(context);
    if let Err(error) = &outcome {
        // The caller may still be reading: tell it, as the one line it waits for.
        say(&serde_json::json!({ "error": format!("{error:#}") }));
    }
    outcome
}

fn work(context: &Context) -> anyhow::Result<()> {
    let order = WorkOrder::read(std::io::stdin().lock())?;
    let context = Context::new(
        Some(context.home()?),
        order.tinker_atropos_root.clone(),
        order.environments_dir.clone(),
    );
    let tools = context.tools()?;
    let planned = tools.long_call_plan(&order.call)?;
    let created: Arc<Mutex<Option<String>>> = Arc::default();
    let recording = created.clone();
    let progress = Arc::new(move |event: Progress| {
        if let Progress::Created { test_id, .. } = event
            && let Ok(mut created) = recording.lock()
            && created.is_none()
        {
            say(&serde_json::json!({ "test_id": test_id }));
            *created = Some(test_id);
        }
    });
    runtime()?.block_on(async {
        let stop = interrupted();
        let run = tools.run_long_call(&order.call, planned, order.estimate.clone(), progress);
        tokio::pin!(run);
        tokio::select! {
            answer = &mut run => answer,
            () = stop => {
                // Told to end (SIGTERM, SIGINT, SIGHUP): the test is stopped as `rl preflight
                // stop` does, its models ended, and this worker writes its report before it
                // goes, so nothing is left to reap.
                let test_id = created.lock().ok().and_then(|created| created.clone());
                if let Some(test_id) = test_id {
                    let stopping = tools.clone();
                    let stopped = tokio::task::spawn_blocking(move || stopping.stop_preflight(&test_id));
                    let (answer, _) = tokio::join!(run, stopped);
                    answer
                } else {
                    tools.model_runner().stop_all();
                    Ok(serde_json::Value::Null)
                }
            }
        }
    })?;
    Ok(())
}

/// One line on standard output. The caller stops reading after the first: a write that fails
/// then is no loss.
fn say(value: &serde_json::Value) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{value}");
    let _ = stdout.flush();
}
