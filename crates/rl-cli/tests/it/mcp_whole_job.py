"""The agent's whole job over MCP alone (issue 55), with the official `mcp` Python SDK.

Usage: python mcp_whole_job.py <path of the rl binary> <environment name>

"Make this model better at my environment, within this budget, and hand it over": from a home
whose operator wrote only config.toml (the local engine and a price) and a folder of
environments, the client finds the environment, installs what it needs when the list says so,
selects and configures it (a trainer setting, read back with its origin), pre-flights it against
the base model the run will train, trains under a cost cap, follows the run to its end with
rl_wait_training (never refused by the status limit), compares it with the base (a verdict and
its interval), exports the merged model, serves the checkpoint and asks it a chat completion
through the official `openai` client, then stops the server. Nothing but MCP: no shell, no
file read. It prints a JSON summary of every answer as its last line for the Rust test to
assert on; every wait is bounded.
"""

import json
import os
import sys
import time
import traceback

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp_client import answer  # the walk's reading of a tool result, beside this file

# The whole job on the tiny model and a 2-core machine: minutes; a busy CI machine, more.
SESSION_SECONDS = 1500
CALL_SECONDS = 60
# A pre-flight, a comparison or an install waited on in the call.
LONG_CALL_SECONDS = 600
# The run followed by waits of this length (rl_wait_training's own default is 50).
WAIT_SECONDS = 50
# The agent's budget for the run, in the operator's currency.
BUDGET = 20


async def job(rl_binary, name, summary):
    params = StdioServerParameters(command=rl_binary, args=["mcp"], env=dict(os.environ), cwd=os.getcwd())
    calls = summary["calls"]
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=LONG_CALL_SECONDS) as session:
            with anyio.fail_after(CALL_SECONDS):
                await session.initialize()

            async def call(step, tool, arguments, seconds=CALL_SECONDS):
                with anyio.fail_after(seconds):
                    result = await session.call_tool(tool, arguments)
                calls[step] = answer(result)
                return calls[step]["value"] or {}

            listed = await call("list", "rl_list_environments", {})
            entry = next((env for env in listed.get("environments", []) if env.get("name") == name), None)
            if entry is None:
                raise RuntimeError(f"{name} is not listed: {listed}")
            if entry.get("install_first"):
                await call("install", "rl_install_environment", {"name": name}, LONG_CALL_SECONDS)
                await call("list_installed", "rl_list_environments", {})
            await call("select", "rl_select_environment", {"name": name})
            await call("edit_trainer", "rl_edit_config", {"field": "kl_coef", "value": "0.05"})
            await call("config", "rl_get_current_config", {})

            await call(
                "preflight_base",
                "rl_test_inference",
                {"models": ["base"], "num_steps": 1, "group_size": 2, "wait": True},
                LONG_CALL_SECONDS,
            )

            started = await call("start", "rl_start_training", {"max_cost": BUDGET})
            run_id = started.get("run_id")
            if not run_id:
                raise RuntimeError(f"no run started: {started}")
            summary["run_id"] = run_id
            try:
                waits = []
                deadline = time.monotonic() + SESSION_SECONDS
                while time.monotonic() < deadline:
                    waited = await call(
                        "wait",
                        "rl_wait_training",
                        {"run_id": run_id, "until": "finished", "timeout_seconds": WAIT_SECONDS},
                        WAIT_SECONDS + CALL_SECONDS,
                    )
                    waits.append({"status": waited.get("status"), "rate_limited": waited.get("rate_limited", False)})
                    if waited.get("status") in ("completed", "failed", "stopped", "capped", "lost"):
                        break
                summary["waits"] = waits
            finally:
                status = await call("status_end", "rl_check_status", {"run_id": run_id})
                if status.get("status") not in ("completed", "failed", "stopped", "capped", "lost"):
                    await call("stop", "rl_stop_training", {"run_id": run_id})

            await call(
                "compare",
                "rl_compare_training",
                {"run_id": run_id, "num_steps": 3, "group_size": 2, "wait": True},
                LONG_CALL_SECONDS,
            )
            await call(
                "export",
                "rl_export_checkpoint",
                {"run_id": run_id, "merged": True, "name": f"{name}-handed-over"},
                LONG_CALL_SECONDS,
            )

            served = await call("serve", "rl_serve_checkpoint", {"run_id": run_id})
            serve_id = served.get("serve_id")
            if not serve_id:
                raise RuntimeError(f"nothing served: {served}")
            try:
                ready = None
                deadline = time.monotonic() + LONG_CALL_SECONDS
                while time.monotonic() < deadline:
                    listing = await call("served", "rl_list_served", {})
                    ready = next((s for s in listing.get("served", []) if s.get("serve_id") == serve_id), None)
                    if ready is None or ready.get("state") == "ready":
                        break
                    await anyio.sleep(2)
                if ready is None or ready.get("state") != "ready":
                    raise RuntimeError(f"the server never got ready: {ready}")
                from openai import OpenAI

                client = OpenAI(base_url=ready["base_url"], api_key="anything", timeout=CALL_SECONDS, max_retries=0)
                model = ready["models"][0]
                completion = await anyio.to_thread.run_sync(
                    lambda: client.chat.completions.create(
                        model=model, messages=[{"role": "user", "content": "Write some digits."}], max_tokens=8
                    )
                )
                summary["chat"] = {"model": completion.model, "content": completion.choices[0].message.content}
            finally:
                await call("stop_serving", "rl_stop_serving", {"serve_id": serve_id})
            await call("served_after", "rl_list_served", {})


async def main(rl_binary, name):
    summary = {"calls": {}}
    try:
        with anyio.fail_after(SESSION_SECONDS):
            await job(rl_binary, name, summary)
    except BaseException as error:  # reported in the summary; the Rust test shows it
        summary["failure"] = "".join(traceback.format_exception(error))
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
