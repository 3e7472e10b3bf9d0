"""A real MCP client (the official `mcp` Python SDK) driving `rl mcp` over stdio.

Usage: python mcp_client.py <path of the rl binary>

Launches `rl mcp` with this process's environment (RL_HOME and the rest are set by the Rust
test), walks an agent's workflow through the tools, checks what the protocol promises (every
tool listed with an object schema, every answer one JSON text block) and prints a JSON summary
of every answer on stdout, the last line, for the Rust test to assert on. Every wait is bounded.
"""

import json
import os
import sys
import traceback

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

# Whole session, and each request: far above what the local stack needs.
SESSION_SECONDS = 180
CALL_SECONDS = 45


def answer(result):
    """One tool result as plain JSON: the parsed text block, structured content, isError."""
    texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
    value = None
    if len(texts) == 1:
        try:
            value = json.loads(texts[0])
        except ValueError:
            value = None
    return {
        "is_error": bool(result.is_error),
        "content_blocks": len(result.content),
        "text_blocks": len(texts),
        "one_line": len(texts) == 1 and "\n" not in texts[0],
        "value": value,
        "structured": result.structured_content,
    }


async def scenario(rl_binary, summary):
    stream_errors = summary["stream_errors"]

    async def on_message(message):
        # A line on the server's stdout that is not JSON-RPC arrives here as an exception.
        if isinstance(message, Exception):
            stream_errors.append(repr(message))

    # The whole environment: the Rust test has set RL_HOME and the tree, and removed every key.
    env = dict(os.environ)
    params = StdioServerParameters(command=rl_binary, args=["mcp"], env=env, cwd=os.getcwd())
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=CALL_SECONDS, message_handler=on_message) as session:
            with anyio.fail_after(CALL_SECONDS):
                init = await session.initialize()
            summary["server"] = {
                "name": init.server_info.name,
                "version": init.server_info.version,
                "protocol_version": init.protocol_version,
                "tools_capability": init.capabilities.tools is not None,
                "instructions": init.instructions,
            }

            with anyio.fail_after(CALL_SECONDS):
                listed = await session.list_tools()
            tools = {tool.name: tool for tool in listed.tools}
            for name, tool in tools.items():
                assert tool.input_schema.get("type") == "object", f"{name}: {tool.input_schema}"
                assert tool.description, f"{name} has no description"
            summary["tools"] = {name: tool.input_schema for name, tool in tools.items()}

            calls = summary["calls"]

            async def call(step, tool, arguments):
                with anyio.fail_after(CALL_SECONDS):
                    try:
                        result = await session.call_tool(tool, arguments)
                    except Exception as error:  # a protocol error: the Rust test fails on it
                        calls[step] = {"protocol_error": repr(error)}
                        return None
                calls[step] = answer(result)
                return calls[step]

            await call("list_environments", "rl_list_environments", {})
            await call("list_environments_without_arguments", "rl_list_environments", None)
            await call("install", "rl_install_environment", {"name": "arithmetic"})
            await call("install_published", "rl_install_environment", {"name": "some-package==1.0.0"})
            await call("select_unknown", "rl_select_environment", {"name": "no_such_environment"})
            await call("select", "rl_select_environment", {"name": "arithmetic"})
            await call("current_config", "rl_get_current_config", {})
            await call("edit", "rl_edit_config", {"field": "eval_items", "value": "3"})
            await call("edit_bad_value", "rl_edit_config", {"field": "eval_items", "value": "lots"})
            await call("edit_trainer", "rl_edit_config", {"field": "learning_rate", "value": "0.0002"})
            await call("current_config_edited", "rl_get_current_config", {})
            await call("stop_unknown_test", "rl_stop_test", {"test_id": "deadbeef"})
            await call("wait_too_short", "rl_wait_training", {"run_id": "deadbeef", "timeout_seconds": 1})
            await call("malformed_arguments", "rl_check_status", {"run_id": 5})
            await call("unexpected_argument", "rl_list_runs", {"verbose": True})
            await call("unknown_tool", "rl_no_such_tool", {})
            await call("status_unknown_run", "rl_check_status", {"run_id": "deadbeef"})

            started = await call("start", "rl_start_training", {})
            value = (started or {}).get("value")
            run_id = value.get("run_id") if isinstance(value, dict) else None
            if run_id:
                summary["run_id"] = run_id
                try:
                    await call("status_first", "rl_check_status", {"run_id": run_id})
                    await call("status_second", "rl_check_status", {"run_id": run_id})
                    # The way on the limit names: a wait, not a shell.
                    await call("wait_step", "rl_wait_training", {"run_id": run_id, "timeout_seconds": 30})
                    await call("list_runs", "rl_list_runs", {})
                finally:
                    # Whatever failed above, the run must not outlive the test.
                    await call("stop", "rl_stop_training", {"run_id": run_id})
                # An ended run is read without limit, and waited on without waiting.
                await call("status_ended", "rl_check_status", {"run_id": run_id})
                await call("wait_ended", "rl_wait_training", {"run_id": run_id, "until": "finished"})


async def main(rl_binary):
    summary = {"calls": {}, "stream_errors": []}
    try:
        with anyio.fail_after(SESSION_SECONDS):
            await scenario(rl_binary, summary)
    except BaseException as error:  # reported in the summary; the Rust test shows it
        summary["failure"] = "".join(traceback.format_exception(error))
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
