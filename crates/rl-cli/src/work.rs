//! `rl work`: the detached worker of a long tool call (a pre-flight, a comparison) started
//! without waiting. It reads its order on standard input, plans and runs the test, and names
//! the test on standard output, one JSON line, as soon as its folder exists (or says why it
//! cannot, `{"error": ...}`); the caller reads that line and answers. The test then runs to its
//! end here, whatever becomes of the caller; its folder is where anyone follows it.

use std::io::Write as _;
use std::sync::{Arc, Mutex};

use rl_preflight::Progress;
use rl_tools::WorkOrder;

use crate::context::{Context, runtime};

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
    let named = Mutex::new(false);
    let progress = Arc::new(move |event: Progress| {
        if let Progress::Created { test_id, .. } = event
            && let Ok(mut named) = named.lock()
            && !*named
        {
            say(&serde_json::json!({ "test_id": test_id }));
            *named = true;
        }
    });
    runtime()?.block_on(tools.run_long_call(&order.call, planned, progress))?;
    Ok(())
}

/// One line on standard output. The caller stops reading after the first: a write that fails
/// then is no loss.
fn say(value: &serde_json::Value) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{value}");
    let _ = stdout.flush();
}
