"""Tools on the OpenAI chat route (pure; no SDK, no server).

What verifiers 0.3's legacy `ToolEnv` sends (`OpenAIChatCompletionsClient`): `tools` as
`[{"type": "function", "function": {"name", "description", "parameters", "strict"}}]`, and a
history with assistant messages carrying `tool_calls` (`[{"id", "type": "function",
"function": {"name", "arguments": <JSON string>}}]`, `content` possibly null) and `tool`
messages (`tool_call_id`, `content`). It reads back `choices[0].message.tool_calls` (`id`,
`function.name`, `function.arguments` as a string) and `finish_reason`.

* The request's tools and history are checked here (`parse_tools`, `chat_message`) and
  rendered by the model's own chat template (the policy's `chat_tokens`). A tool call's
  `arguments` string that holds a JSON object is handed to the template as that object, as vLLM
  and transformers do (templates write it with `tojson`).
* How the model writes a call is read from its template, never assumed (`ToolSupport.of`): a
  probe call rendered in an assistant turn must parse back, exactly, as a Hermes/Qwen
  `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` block. Any other template: the
  generated text is answered as content, unparsed. A template that does not render the tools
  at all cannot be given tools: the request is refused (the model would never see them).
* Calls are parsed out of the generated text (`answer_message`): all of them or none (one
  block that is not such JSON, or a block left open, answers the whole text as content).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from .errors import RequestError

HERMES = "hermes"
MAX_TOOLS = 128
# The JSON size of a request's `tools`: far above any real tool list, far below what would
# make a prompt nobody can sample from.
MAX_TOOLS_BYTES = 256 * 1024
# OpenAI's rule for a function's name.
FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
TOOL_CALL_OPEN = "<tool_call>"
TOOL_CHOICES = ("auto", "none")

# --------------------------------------------------------------------------- the request


def parse_tools(value: Any) -> Optional[List[dict]]:
    """The request's `tools`, checked (None: no tools)."""
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise RequestError("tools must be a list of tool objects", "tools")
    if len(value) > MAX_TOOLS:
        raise RequestError(f"tools holds {len(value)} tools; at most {MAX_TOOLS} are accepted", "tools")
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError):
        raise RequestError("tools must be JSON", "tools") from None
    if size > MAX_TOOLS_BYTES:
        raise RequestError(f"tools is {size} bytes of JSON; at most {MAX_TOOLS_BYTES} are accepted", "tools")
    return [_tool(tool, f"tools[{i}]") for i, tool in enumerate(value)]


def _tool(tool: Any, where: str) -> dict:
    if not isinstance(tool, dict) or tool.get("type", "function") != "function":
        raise RequestError(f'{where} must be an object with "type": "function"', "tools")
    function = tool.get("function")
    if not isinstance(function, dict):
        raise RequestError(f"{where}.function must be an object", "tools")
    name = function.get("name")
    if not isinstance(name, str) or not FUNCTION_NAME.match(name):
        raise RequestError(f"{where}.function.name must be 1-64 letters, digits, '_', '-' or '.'", "tools")
    clean: Dict[str, Any] = {"name": name}
    description = function.get("description")
    if description is not None:
        if not isinstance(description, str):
            raise RequestError(f"{where}.function.description must be a string", "tools")
        clean["description"] = description
    parameters = function.get("parameters")
    if parameters is not None:
        if not isinstance(parameters, dict):
            raise RequestError(f"{where}.function.parameters must be a JSON Schema object", "tools")
        clean["parameters"] = parameters
    strict = function.get("strict")
    if strict is not None:
        if not isinstance(strict, bool):
            raise RequestError(f"{where}.function.strict must be true or false", "tools")
        clean["strict"] = strict
    return {"type": "function", "function": clean}


def parse_tool_choice(value: Any) -> str:
    """`auto` (the default) or `none`; forcing a call (`required`, a named function) needs
    constrained decoding, which the trainer's sampler does not do."""
    if value is None:
        return "auto"
    if value in TOOL_CHOICES:
        return value
    raise RequestError(
        "tool_choice must be \"auto\" or \"none\": the rl trainer cannot force a tool call", "tool_choice"
    )


def chat_message(message: Any, i: int, content_text: Callable[[Any, str], str]) -> dict:
    """One history message as the chat template takes it: role and text content, an
    assistant's `tool_calls`, a tool message's `tool_call_id`, and `name` and
    `reasoning_content` when they are strings."""
    where = f"messages[{i}]"
    if not isinstance(message, dict) or not isinstance(message.get("role"), str) or not message["role"]:
        raise RequestError(f"{where} must be an object with a role", "messages")
    clean: Dict[str, Any] = {"role": message["role"], "content": content_text(message.get("content"), where)}
    for key in ("name", "tool_call_id", "reasoning_content"):
        value = message.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise RequestError(f"{where}.{key} must be a string", "messages")
        clean[key] = value
    calls = message.get("tool_calls")
    if calls is not None:
        if message["role"] != "assistant":
            raise RequestError(f"{where}: only an assistant message has tool_calls", "messages")
        if not isinstance(calls, list):
            raise RequestError(f"{where}.tool_calls must be a list", "messages")
        if calls:
            clean["tool_calls"] = [_history_call(call, f"{where}.tool_calls[{k}]") for k, call in enumerate(calls)]
    return clean


def _history_call(call: Any, where: str) -> dict:
    if not isinstance(call, dict) or call.get("type", "function") != "function":
        raise RequestError(f'{where} must be an object with "type": "function"', "messages")
    function = call.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise RequestError(f"{where}.function must be an object with a name", "messages")
    arguments = function.get("arguments")
    if arguments is None:
        arguments = {}
    elif isinstance(arguments, str):
        arguments = _json_object(arguments, arguments)
    elif not isinstance(arguments, dict):
        raise RequestError(f"{where}.function.arguments must be a JSON string or an object", "messages")
    clean: Dict[str, Any] = {"type": "function", "function": {"name": function["name"], "arguments": arguments}}
    if call.get("id") is not None:
        if not isinstance(call["id"], str):
            raise RequestError(f"{where}.id must be a string", "messages")
        clean["id"] = call["id"]
    return clean


def _json_object(text: str, otherwise: Any) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return otherwise
    return value if isinstance(value, dict) else otherwise


# --------------------------------------------------------------------------- the template


# The made-up tool and conversation a template is probed with (`ToolSupport.of`, and
# `rl_verifiers.tool_rendering`, which compares two renderings of them).
PROBE_TOOL_NAME, PROBE_ARGUMENTS = "rl_probe_tool", {"rl_probe_argument": 7}
PROBE_TOOL = {"type": "function", "function": {"name": PROBE_TOOL_NAME, "description": "probe", "parameters": {"type": "object", "properties": {}}}}
PROBE_MESSAGES = [{"role": "user", "content": "rl probe"}]


@dataclass(frozen=True)
class ToolSupport:
    """What a chat template does with tools: whether it renders them into the prompt, and the
    format of a call it writes in an assistant turn (HERMES, or None: unknown)."""

    renders_tools: bool = False
    call_format: Optional[str] = None

    @staticmethod
    def of(render: Callable[[List[dict], Optional[List[dict]], bool], str]) -> "ToolSupport":
        """`render(messages, tools, add_generation_prompt)`: the template as text. Probed with
        a made-up tool and one call of it."""
        name, arguments, tool, user = PROBE_TOOL_NAME, PROBE_ARGUMENTS, PROBE_TOOL, PROBE_MESSAGES
        call = {"role": "assistant", "content": "", "tool_calls": [{"id": "call_probe", "type": "function", "function": {"name": name, "arguments": arguments}}]}
        try:
            bare = render(user, None, False)
            with_tools = render(user, [tool], False)
        except Exception:  # noqa: BLE001 - a template that cannot take the probe takes no tools
            return ToolSupport()
        if with_tools == bare or name not in with_tools:
            return ToolSupport()
        try:
            turn = render(user + [call], [tool], False)
        except Exception:  # noqa: BLE001 - the template cannot write a call back
            return ToolSupport(renders_tools=True)
        if not turn.startswith(with_tools):
            return ToolSupport(renders_tools=True)
        parsed = parse_hermes(turn[len(with_tools):])
        if parsed is not None and [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed[1]] == [(name, arguments)]:
            return ToolSupport(renders_tools=True, call_format=HERMES)
        return ToolSupport(renders_tools=True)


# --------------------------------------------------------------------------- the answer


def parse_hermes(text: str) -> Optional[Tuple[str, List[dict]]]:
    """(the text outside the calls, the calls in OpenAI's shape), or None when `text` holds
    no call or one that is not a whole `<tool_call>{"name": str, "arguments": {...}}</tool_call>`."""
    if TOOL_CALL_OPEN not in text:
        return None
    calls = []
    for block in TOOL_CALL_BLOCK.finditer(text):
        try:
            value = json.loads(block.group(1))
        except ValueError:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
            return None
        arguments = value.get("arguments", {})
        if isinstance(arguments, str):
            arguments = _json_object(arguments, None)
        if not isinstance(arguments, dict):
            return None
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": value["name"], "arguments": json.dumps(arguments, ensure_ascii=False)},
            }
        )
    outside = TOOL_CALL_BLOCK.sub("", text)
    if not calls or TOOL_CALL_OPEN in outside:
        return None
    return outside.strip(), calls


def answer_message(text: str, call_format: Optional[str]) -> dict:
    """The assistant message of a generated `text`: its tool calls parsed out when the
    template's format is known (`call_format`), else the text as it came."""
    parsed = parse_hermes(text) if call_format == HERMES else None
    if parsed is None:
        return {"role": "assistant", "content": text}
    content, calls = parsed
    return {"role": "assistant", "content": content or None, "tool_calls": calls}
