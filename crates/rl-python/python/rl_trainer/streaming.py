"""A whole OpenAI answer framed as the Server-Sent Events a `stream: true` request expects
(pure; no server).

The trainer's sampling is not incremental: the whole answer is sampled first, then sent as
a stream, so the events are a re-framing of the non-streamed answer (`sampling.chat_response`,
`sampling.completions_response`) and can never disagree with it.

Chat (`chat.completion.chunk`, as OpenAI and vLLM send it), per choice in index order: a role
chunk (`delta: {"role": "assistant", "content": ""}`), a content chunk (`delta.content`, with
the choice's `logprobs` and, when asked, vLLM's `token_ids`), when the answer called tools a
chunk with them whole (`delta.tool_calls`: `index`, `id`, `type`, `function.name`,
`function.arguments`), a finish chunk (`delta: {}`, `finish_reason`); then, when `stream_options.include_usage`, a chunk with `choices: []` and
the `usage` (every other chunk then carries `usage: null`, as OpenAI's do); then
`data: [DONE]`. vLLM's `prompt_token_ids`, when asked, rides on the first chunk.

Verifiers 0.4's chat program (`harnesses/utils/core.py`, the OpenAI SDK's
`AsyncChatCompletionStream`) fails a stream whose choices end without `finish_reason`, and its
interception server (`interception/server.py` `_collect_stream`) fails one without the
`[DONE]` sentinel: both are always sent.

Completions (`text_completion` chunks, as OpenAI's legacy route streams them): one chunk per
choice holding its whole `text`, `logprobs` and `finish_reason`; the usage chunk; `[DONE]`.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List

DONE_EVENT = b"data: [DONE]\n\n"


def sse_event(payload: Any) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode("utf-8") + b"\n\n"


def sse_body(chunks: Iterable[dict]) -> List[bytes]:
    """The events of a stream: each chunk, then the DONE sentinel."""
    return [sse_event(chunk) for chunk in chunks] + [DONE_EVENT]


def _head(response: dict, kind: str, include_usage: bool) -> Dict[str, Any]:
    """What every chunk of `response`'s stream carries: OpenAI's chunks say `usage: null`
    until the last when usage is asked for."""
    head: Dict[str, Any] = {
        "id": response["id"],
        "object": kind,
        "created": response["created"],
        "model": response["model"],
    }
    if include_usage:
        head["usage"] = None
    return head


def _usage_chunk(head: dict, response: dict) -> dict:
    return {**head, "choices": [], "usage": response.get("usage")}


def chat_chunks(response: dict, include_usage: bool) -> List[dict]:
    """`response`: a `chat.completion` object as `sampling.chat_response` builds it."""
    head = _head(response, "chat.completion.chunk", include_usage)
    chunks: List[dict] = []
    for choice in response["choices"]:
        index = choice["index"]
        message = choice.get("message") or {}
        role = {"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        chunks.append({**head, "choices": [role]})
        content = {"index": index, "delta": {"content": message.get("content") or ""}, "logprobs": choice.get("logprobs"), "finish_reason": None}
        if "token_ids" in choice:
            content["token_ids"] = choice["token_ids"]
        if content["delta"]["content"] or content["logprobs"] is not None or content.get("token_ids"):
            chunks.append({**head, "choices": [content]})
        if message.get("tool_calls"):
            calls = [{"index": k, **call} for k, call in enumerate(message["tool_calls"])]
            chunks.append({**head, "choices": [{"index": index, "delta": {"tool_calls": calls}, "logprobs": None, "finish_reason": None}]})
        finish = {"index": index, "delta": {}, "logprobs": None, "finish_reason": choice["finish_reason"]}
        chunks.append({**head, "choices": [finish]})
    if "prompt_token_ids" in response and chunks:
        chunks[0]["prompt_token_ids"] = response["prompt_token_ids"]
    if include_usage:
        chunks.append(_usage_chunk(head, response))
    return chunks


def completion_chunks(response: dict, include_usage: bool) -> List[dict]:
    """`response`: a `text_completion` object as `sampling.completions_response` builds it."""
    head = _head(response, "text_completion", include_usage)
    chunks = [
        {
            **head,
            "choices": [
                {
                    "index": choice["index"],
                    "text": choice["text"],
                    "logprobs": choice.get("logprobs"),
                    "finish_reason": choice["finish_reason"],
                }
            ],
        }
        for choice in response["choices"]
    ]
    if include_usage:
        chunks.append(_usage_chunk(head, response))
    return chunks
