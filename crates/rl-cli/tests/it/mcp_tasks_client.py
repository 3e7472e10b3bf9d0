"""The official MCP Python SDK (`mcp` 2.3.0) following rl's long tool calls over stdio, in the
four ways a client built on it can (issue 31).

Usage: python mcp_tasks_client.py MODE RL_BINARY TOOL ARGUMENTS_JSON [BOUND_SECONDS]

`RL_BINARY mcp` gets this process's environment (the Rust test sets RL_HOME and the rest).
MODE is one of:

  poll      the low-level `ClientSession` over `stdio_client` with default options: the call
            answers at once with a test_id, which is asked again every poll_after_seconds (at
            most POLL_CAP_SECONDS) until its status is no longer running.
  progress  the same session, the call made with `"wait": true` and a progress callback: every
            `notifications/progress` of the request is recorded.
  task      the high-level `mcp.Client` (mode "auto": 2026-07-28 against rmcp) declaring the
            MCP tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`): the call becomes a
            task, polled with `tasks/get` until it is terminal. The SDK has no tasks client; the
            small `Tasks` extension below resolves the task through its ClientExtension hook.
  cancel    as task, but once the task is working and its statusMessage names the test,
            `tasks/cancel`; then the task is polled to its end and the tool asked for the test
            by its id until it is no longer running.

Prints ONE JSON line on stdout, the summary for the Rust test to assert on; a failure is said
in it (`failure`, with the traceback) and the exit status is 1. Every wait is bounded: each
request by CALL_SECONDS, the whole exchange by BOUND_SECONDS (default 300).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
# Each request that should answer at once (a tool call without wait, tasks/get, tasks/cancel).
CALL_SECONDS = 60
# The longest wait between two polls, whatever the server suggests.
POLL_CAP_SECONDS = 3.0
# A task's states that end it.
TERMINAL = ("completed", "failed", "cancelled")
# A test's id, as the started answer and the progress messages name it.
TEST_ID = re.compile(r"\b([0-9a-f]{8})\b")


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def answer_of(result: types.CallToolResult) -> Any:
    """The JSON value a tool answered: its structured content, else its one text block."""
    if result.structured_content is not None:
        return result.structured_content
    texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
    if len(texts) != 1:
        raise RuntimeError(f"a tool result without one JSON text block: {result!r}")
    return json.loads(texts[0])


def checked(result: types.CallToolResult) -> Any:
    """The answer of a call that must have succeeded."""
    answer = answer_of(result)
    if result.is_error:
        raise RuntimeError(f"the tool answered an error: {json.dumps(answer)}")
    return answer


def poll_wait(answer: Any) -> float:
    """How long to wait before asking again: what the answer says, capped."""
    try:
        seconds = float(answer.get("poll_after_seconds") or 1)
    except (TypeError, ValueError):
        seconds = 1.0
    return min(max(seconds, 0.0), POLL_CAP_SECONDS)


# ---- SEP-2663 task shapes as rmcp 3.9 sends them (flat, ttlMs / pollIntervalMs) ----
class TaskHandle(types.Result):
    """`tools/call` answered with a task (CreateTaskResult)."""

    model_config = {**types.Result.model_config, "extra": "allow"}
    result_type: Literal["task"]
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskParams(types.RequestParams):
    task_id: str


class GetTaskRequest(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"


class CancelTaskRequest(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


class DetailedTask(types.Result):
    """`tasks/get`: the task, with its tool result (or error) once terminal."""

    model_config = {**types.Result.model_config, "extra": "allow"}
    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskAck(types.Result):
    model_config = {**types.Result.model_config, "extra": "allow"}


class Tasks(ClientExtension):
    """The tasks extension: a task answer is followed with tasks/get to its end, what it shows
    on the way recorded in `summary`; with `cancel`, the task is cancelled once it names its test."""

    identifier = TASKS_EXTENSION

    def __init__(self, summary: dict[str, Any], deadline: float, cancel: bool) -> None:
        self.summary = summary
        self.deadline = deadline
        self.cancel = cancel
        self.called_at_ms = now_ms()

    def claims(self):
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self.resolve)]

    def seen(self, status: str, message: str | None) -> None:
        statuses = self.summary["statuses"]
        if not statuses or statuses[-1] != status:
            statuses.append(status)
        if message is not None and message not in self.summary["status_messages"]:
            self.summary["status_messages"].append(message)

    async def resolve(self, handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
        summary = self.summary
        summary["created"] = handle.model_dump(by_alias=True, mode="json", exclude_none=True)
        summary["created_ms"] = now_ms() - self.called_at_ms
        self.seen(handle.status, handle.status_message)
        params = TaskParams(task_id=handle.task_id)
        interval = min((handle.poll_interval_ms or 1000) / 1000, POLL_CAP_SECONDS)
        task = None
        while task is None or task.status not in TERMINAL:
            if time.monotonic() + interval > self.deadline:
                raise TimeoutError(f"the task is still {task.status if task else handle.status}")
            await anyio.sleep(interval)
            task = await ctx.session.send_request(
                GetTaskRequest(params=params), DetailedTask, request_read_timeout_seconds=CALL_SECONDS
            )
            summary["task_polls"] += 1
            self.seen(task.status, task.status_message)
            if task.status_message and summary.get("test_id") is None:
                named = TEST_ID.search(task.status_message)
                if named:
                    summary["test_id"] = named.group(1)
            if self.cancel and task.status == "working" and summary.get("test_id") and "cancel_ack" not in summary:
                ack = await ctx.session.send_request(
                    CancelTaskRequest(params=params), TaskAck, request_read_timeout_seconds=CALL_SECONDS
                )
                summary["cancel_ack"] = ack.model_dump(by_alias=True, mode="json", exclude_none=True)
                summary["cancelled_at_ms"] = now_ms() - self.called_at_ms
        summary["final_status"] = task.status
        summary["final_ms"] = now_ms() - self.called_at_ms
        if task.error is not None:
            summary["task_error"] = task.error
        if task.status == "completed":
            summary["task_result"] = task.result
            return types.CallToolResult.model_validate(task.result or {})
        # Not the tool's answer: the call ends as an error the summary explains.
        return types.CallToolResult.model_validate(
            {"content": [{"type": "text", "text": json.dumps({"task": task.status})}], "isError": True}
        )


async def poll(session: ClientSession, tool: str, arguments: Any, deadline: float, summary: dict[str, Any]) -> None:
    async def call(call_arguments: Any) -> Any:
        started = now_ms()
        with anyio.fail_after(CALL_SECONDS):
            result = await session.call_tool(tool, call_arguments)
        ms = now_ms() - started
        summary["max_call_ms"] = max(summary.get("max_call_ms", 0), ms)
        return checked(result), ms

    answer, summary["first_ms"] = await call(arguments)
    summary["first"] = answer
    summary["polls"] = 0
    while isinstance(answer, dict) and answer.get("status") == "running":
        wait = poll_wait(answer)
        if time.monotonic() + wait > deadline:
            raise TimeoutError(f"still running: {json.dumps(answer)}")
        await anyio.sleep(wait)
        answer, _ = await call({"test_id": answer["test_id"]})
        summary["polls"] += 1
    summary["final"] = answer


async def waited(session: ClientSession, tool: str, arguments: Any, deadline: float, summary: dict[str, Any]) -> None:
    notifications = summary["notifications"]
    started = now_ms()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notifications.append({"progress": progress, "total": total, "message": message, "at_ms": now_ms() - started})

    with anyio.fail_after(max(deadline - time.monotonic(), 1)):
        result = await session.call_tool(tool, {**arguments, "wait": True}, progress_callback=on_progress)
    summary["final_ms"] = now_ms() - started
    summary["final"] = checked(result)


async def as_task(params: StdioServerParameters, tool: str, arguments: Any, deadline: float, summary: dict[str, Any], cancel: bool) -> None:
    summary.update(statuses=[], status_messages=[], task_polls=0)

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            summary["stream_errors"].append(repr(message))

    tasks = Tasks(summary, deadline, cancel)
    async with Client(params, extensions=[tasks], message_handler=on_message) as client:
        summary["protocol_version"] = client.protocol_version
        capabilities = client.server_capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
        summary["server_declares_tasks"] = TASKS_EXTENSION in (capabilities.get("extensions") or {})
        tasks.called_at_ms = now_ms()
        with anyio.fail_after(max(deadline - time.monotonic(), 1)):
            result = await client.call_tool(tool, arguments)
        summary["is_error"] = bool(result.is_error)
        summary["result"] = answer_of(result)
        if not cancel:
            return
        # The test the cancelled task followed, asked of the tool by its id (no task for that).
        test_id = summary.get("test_id")
        if not test_id:
            raise RuntimeError("the task never named its test")
        answer = None
        while answer is None or answer.get("status") == "running":
            if answer is not None:
                if time.monotonic() + 1 > deadline:
                    raise TimeoutError(f"the test is still running after the cancel: {json.dumps(answer)}")
                await anyio.sleep(1)
            with anyio.fail_after(CALL_SECONDS):
                answer = checked(await client.call_tool(tool, {"test_id": test_id}))
            summary["test_polls"] = summary.get("test_polls", 0) + 1
        summary["test_after_cancel"] = answer


async def low_level(params: StdioServerParameters, mode: str, tool: str, arguments: Any, deadline: float, summary: dict[str, Any]) -> None:
    async def on_message(message: Any) -> None:
        # A line on the server's stdout that is not JSON-RPC arrives here as an exception.
        if isinstance(message, Exception):
            summary["stream_errors"].append(repr(message))

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            with anyio.fail_after(CALL_SECONDS):
                init = await session.initialize()
            summary["protocol_version"] = init.protocol_version
            if mode == "poll":
                await poll(session, tool, arguments, deadline, summary)
            else:
                await waited(session, tool, arguments, deadline, summary)


async def main(argv: list[str]) -> int:
    if len(argv) not in (4, 5) or argv[0] not in ("poll", "progress", "task", "cancel"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, rl_binary, tool, arguments_json = argv[:4]
    bound = float(argv[4]) if len(argv) == 5 else 300.0
    arguments = json.loads(arguments_json)
    deadline = time.monotonic() + bound
    summary: dict[str, Any] = {"mode": mode, "stream_errors": [], "notifications": []}
    if mode != "progress":
        del summary["notifications"]
    params = StdioServerParameters(command=rl_binary, args=["mcp"], env=dict(os.environ), cwd=os.getcwd())
    failed = False
    try:
        # The whole exchange, the session's closing included.
        with anyio.fail_after(bound + CALL_SECONDS):
            if mode in ("poll", "progress"):
                await low_level(params, mode, tool, arguments, deadline, summary)
            else:
                await as_task(params, tool, arguments, deadline, summary, cancel=mode == "cancel")
    except BaseException as error:  # said in the summary; the Rust test shows it
        summary["failure"] = "".join(traceback.format_exception(error))
        failed = True
    print(json.dumps(summary), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
