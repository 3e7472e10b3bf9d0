"""Request and response shapes of the inference the trainer serves (pure; no SDK, no server).

* POST /generate in SGLang's native shape, as atroposlib 0.4.0's `SGLangServer` (behind its
  `ManagedServer`) calls it: `{"input_ids": [...], "sampling_params": {"n", "max_new_tokens",
  "temperature", "stop", ...}, "return_logprob": true}` -> one object (n = 1) or a list of
  objects with `text`, `output_ids` and `meta_info` {`output_token_logprobs`: [[logprob,
  token_id, text-or-null], ...], `finish_reason`: {"type": "stop"|"length", ...},
  `prompt_tokens`, `completion_tokens`}.
* POST /v1/chat/completions and /v1/completions, OpenAI-shaped (`n` honoured). `stream: true`
  (with `stream_options.include_usage`) is parsed here; the whole answer is then framed as
  Server-Sent Events by `streaming.py` (sampling is not incremental).
  A chat request with `return_token_ids: true` (vLLM's extension; verifiers 0.3's legacy
  client sends it through `extra_body`, so at the top level) also gets top-level
  `prompt_token_ids` and `choices[i].token_ids`; `return_tokens_as_token_ids: true` spells each
  logprobs token `token_id:<id>` (vLLM's spelling). `tools`, `tool_choice` and a history of
  tool calls and results are checked in `tools.py`; tool calls are parsed out of the answer
  there too.
* POST /tokenize and /v1/chat/completions/tokens, vLLM's, as verifiers 0.3's
  `OpenAIChatCompletionsTokenClient` calls them (`parse_tokenize`, `parse_chat(with_tokens=True)`).
* POST /inference/v1/generate, vLLM's token-in/token-out route as verifiers 0.4's
  `TrainClient` calls it through `renderers.client.generate` (renderers 0.1.12):
  `{"model", "token_ids": [...], "sampling_params": {vLLM SamplingParams names}}` ->
  `{"request_id", "prompt_token_ids", "choices": [{"index", "token_ids", "logprobs":
  {"content": [{"token": "token_id:<id>", "logprob"}]}, "finish_reason"}], "usage"}`, one
  finite logprob per completion token (renderers refuses anything else).

Bad bodies raise `RequestError` (HTTP 400 with an OpenAI-shaped error).
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .errors import RequestError, error_body  # noqa: F401 - error_body: the server's
from .tools import answer_message, chat_message, parse_tool_choice, parse_tools

MAX_N = 128




@dataclass
class SamplingSpec:
    """What the caller asked of the sampler, before it is mapped onto Tinker's SamplingParams."""

    max_tokens: Optional[int] = None  # None: the policy's default for this prompt
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    seed: Optional[int] = None
    stop: List[str] = field(default_factory=list)
    stop_token_ids: List[int] = field(default_factory=list)
    ignore_eos: bool = False


@dataclass
class Sample:
    tokens: List[int]
    logprobs: List[float]
    stop_reason: str  # "stop" | "length"


# --------------------------------------------------------------------------- field readers


def _require_object(body: Any) -> dict:
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    return body


def _int(obj: dict, key: str, default: Optional[int], lo: Optional[int] = None, hi: Optional[int] = None, param: Optional[str] = None) -> Optional[int]:
    value = obj.get(key)
    name = param or key
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not value.is_integer()):
        raise RequestError(f"{name} must be an integer", name)
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = f"{lo if lo is not None else '-inf'}..{hi if hi is not None else 'inf'}"
        raise RequestError(f"{name} must be in {bounds}, got {value}", name)
    return value


def _float(obj: dict, key: str, default: float, lo: float, hi: float, param: Optional[str] = None) -> float:
    value = obj.get(key)
    name = param or key
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(f"{name} must be a number", name)
    value = float(value)
    if not (lo <= value <= hi):
        raise RequestError(f"{name} must be in [{lo:g}, {hi:g}], got {value:g}", name)
    return value


def _bool(obj: dict, key: str, default: bool, param: Optional[str] = None) -> bool:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise RequestError(f"{param or key} must be true or false", param or key)
    return value


def _stop_strings(value: Any, name: str) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return [s for s in value if s]
    raise RequestError(f"{name} must be a string or a list of strings", name)


def _token_ids(value: Any, name: str, vocab_size: Optional[int] = None, allow_empty: bool = True) -> List[int]:
    if value is None:
        value = []
    if not isinstance(value, list):
        raise RequestError(f"{name} must be a list of token ids", name)
    out = []
    for t in value:
        if isinstance(t, bool) or not isinstance(t, int) or t < 0 or (vocab_size is not None and t >= vocab_size):
            limit = f" below {vocab_size}" if vocab_size is not None else ""
            raise RequestError(f"{name} must hold token ids (integers >= 0{limit})", name)
        out.append(t)
    if not out and not allow_empty:
        raise RequestError(f"{name} must not be empty", name)
    return out


def _openai_spec(body: dict, vocab_size: Optional[int]) -> SamplingSpec:
    max_tokens = _int(body, "max_completion_tokens", None, lo=1)
    if max_tokens is None:
        max_tokens = _int(body, "max_tokens", None, lo=1)
    return SamplingSpec(
        max_tokens=max_tokens,
        temperature=_float(body, "temperature", 1.0, 0.0, 2.0),
        top_p=_float(body, "top_p", 1.0, 0.0, 1.0),
        top_k=_int(body, "top_k", -1, lo=-1),
        seed=_int(body, "seed", None),
        stop=_stop_strings(body.get("stop"), "stop"),
        stop_token_ids=_token_ids(body.get("stop_token_ids"), "stop_token_ids", vocab_size),
        ignore_eos=_bool(body, "ignore_eos", False),
    )


def _stream_fields(body: dict) -> Tuple[bool, bool]:
    """(stream, include_usage). `stream_options` without `stream` is refused, as OpenAI does."""
    stream = _bool(body, "stream", False)
    options = body.get("stream_options")
    if options is None:
        return stream, False
    if not stream:
        raise RequestError("stream_options is only allowed when stream is true", "stream_options")
    if not isinstance(options, dict):
        raise RequestError("stream_options must be an object", "stream_options")
    return stream, _bool(options, "include_usage", False, param="stream_options.include_usage")


# --------------------------------------------------------------------------- /generate (SGLang)


@dataclass
class GenerateRequest:
    input_ids: Optional[List[int]]
    text: Optional[str]
    n: int
    spec: SamplingSpec
    return_logprob: bool
    return_text_in_logprobs: bool


def parse_generate(body: Any, vocab_size: Optional[int] = None) -> GenerateRequest:
    body = _require_object(body)
    input_ids = body.get("input_ids")
    text = body.get("text")
    if input_ids is not None:
        if isinstance(input_ids, list) and input_ids and isinstance(input_ids[0], list):
            raise RequestError("batched input_ids (a list of lists) are not supported; send one prompt per request", "input_ids")
        input_ids = _token_ids(input_ids, "input_ids", vocab_size, allow_empty=False)
        text = None
    elif isinstance(text, str) and text:
        pass
    elif text is not None:
        raise RequestError("text must be a non-empty string (batched text is not supported)", "text")
    else:
        raise RequestError("input_ids (or text) is required", "input_ids")

    params = body.get("sampling_params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RequestError("sampling_params must be an object", "sampling_params")
    p = lambda k: f"sampling_params.{k}"  # noqa: E731
    seed = _int(params, "sampling_seed", None, param=p("sampling_seed"))
    if seed is None:
        seed = _int(params, "seed", None, param=p("seed"))
    spec = SamplingSpec(
        max_tokens=_int(params, "max_new_tokens", 128, lo=1, param=p("max_new_tokens")),
        temperature=_float(params, "temperature", 1.0, 0.0, 100.0, param=p("temperature")),
        top_p=_float(params, "top_p", 1.0, 0.0, 1.0, param=p("top_p")),
        top_k=_int(params, "top_k", -1, lo=-1, param=p("top_k")),
        seed=seed,
        stop=_stop_strings(params.get("stop"), p("stop")),
        stop_token_ids=_token_ids(params.get("stop_token_ids"), p("stop_token_ids"), vocab_size),
        ignore_eos=_bool(params, "ignore_eos", False, param=p("ignore_eos")),
    )
    if spec.top_k == 0:
        spec.top_k = -1
    return GenerateRequest(
        input_ids=input_ids,
        text=text,
        n=_int(params, "n", 1, lo=1, hi=MAX_N, param=p("n")),
        spec=spec,
        return_logprob=_bool(body, "return_logprob", False),
        return_text_in_logprobs=_bool(body, "return_text_in_logprobs", False),
    )


def finish_reason(sample: Sample, spec: SamplingSpec, stop_ids: Sequence[int]) -> dict:
    """SGLang's meta_info.finish_reason (atroposlib reads its "type")."""
    if sample.stop_reason == "length":
        return {"type": "length", "length": len(sample.tokens)}
    reason: Dict[str, Any] = {"type": "stop"}
    if sample.tokens and sample.tokens[-1] in stop_ids:
        reason["matched"] = sample.tokens[-1]
    return reason


def generate_response(
    request: GenerateRequest,
    prompt_len: int,
    samples: Sequence[Sample],
    decode: Callable[[List[int]], str],
    decode_token: Callable[[int], str],
    stop_ids: Sequence[int] = (),
) -> Union[dict, List[dict]]:
    """One object per sample; a lone object when n == 1, as SGLang answers."""
    rid = uuid.uuid4().hex
    out = []
    for i, s in enumerate(samples):
        meta: Dict[str, Any] = {
            "id": f"{rid}-{i}",
            "finish_reason": finish_reason(s, request.spec, stop_ids),
            "prompt_tokens": prompt_len,
            "completion_tokens": len(s.tokens),
            "cached_tokens": 0,
        }
        if request.return_logprob:
            meta["output_token_logprobs"] = [
                [float(lp), int(t), decode_token(t) if request.return_text_in_logprobs else None]
                for lp, t in zip(s.logprobs, s.tokens)
            ]
        out.append({"text": decode(s.tokens), "output_ids": list(s.tokens), "meta_info": meta})
    return out[0] if request.n == 1 and len(out) == 1 else out


# --------------------------------------------------------------------------- OpenAI chat


@dataclass
class ChatRequest:
    messages: List[Dict[str, Any]]
    n: int
    spec: SamplingSpec
    logprobs: bool
    model: Optional[str]
    return_token_ids: bool = False
    tokens_as_ids: bool = False
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage
    tools: Optional[List[dict]] = None  # checked (`tools.parse_tools`), rendered by the template
    tool_choice: str = "auto"  # "auto" | "none" (calls are then never parsed out)
    # /v1/chat/completions/tokens: the prompt's token ids, sampled from as given (the messages
    # are not rendered).
    prompt_ids: Optional[List[int]] = None


def _content_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type", "text") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                raise RequestError(f"{where}: only text content parts are supported", "messages")
        return "".join(parts)
    raise RequestError(f"{where}: content must be a string or a list of text parts", "messages")


def parse_chat(body: Any, vocab_size: Optional[int] = None, with_tokens: bool = False) -> ChatRequest:
    """`with_tokens`: the body is vLLM's /v1/chat/completions/tokens, whose `tokens` is the
    prompt (verifiers 0.3's token client stitches it from the turns before)."""
    body = _require_object(body)
    stream, include_usage = _stream_fields(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list", "messages")
    clean = [chat_message(m, i, _content_text) for i, m in enumerate(messages)]
    _bool(body, "parallel_tool_calls", True)  # every call is parsed out either way
    model = body.get("model")
    return ChatRequest(
        messages=clean,
        n=_int(body, "n", 1, lo=1, hi=MAX_N),
        spec=_openai_spec(body, vocab_size),
        logprobs=_bool(body, "logprobs", False),
        model=model if isinstance(model, str) else None,
        return_token_ids=_bool(body, "return_token_ids", False),
        tokens_as_ids=_bool(body, "return_tokens_as_token_ids", False),
        stream=stream,
        include_usage=include_usage,
        tools=parse_tools(body.get("tools")),
        tool_choice=parse_tool_choice(body.get("tool_choice")),
        prompt_ids=_token_ids(body.get("tokens"), "tokens", vocab_size, allow_empty=False) if with_tokens else None,
    )


@dataclass
class TokenizeRequest:
    """vLLM's POST /tokenize: chat messages (the template applied) or a plain prompt, with
    vLLM's default special tokens (none added to a chat, the tokenizer's to a prompt)."""

    messages: Optional[List[Dict[str, Any]]]
    prompt: Optional[str]
    tools: Optional[List[dict]]
    add_generation_prompt: bool


def parse_tokenize(body: Any) -> TokenizeRequest:
    body = _require_object(body)
    messages = body.get("messages")
    chat = messages is not None
    if _bool(body, "add_special_tokens", not chat) != (not chat):
        raise RequestError(f"add_special_tokens must be {str(not chat).lower()} here (the rl trainer tokenizes as it samples)", "add_special_tokens")
    if chat:
        if not isinstance(messages, list) or not messages:
            raise RequestError("messages must be a non-empty list", "messages")
        if _bool(body, "continue_final_message", False):
            raise RequestError("continue_final_message is not supported by the rl trainer", "continue_final_message")
        return TokenizeRequest(
            messages=[chat_message(m, i, _content_text) for i, m in enumerate(messages)],
            prompt=None,
            tools=parse_tools(body.get("tools")),
            add_generation_prompt=_bool(body, "add_generation_prompt", True),
        )
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise RequestError("messages (a list) or prompt (a string) is required", "messages")
    return TokenizeRequest(None, prompt, None, False)


def token_id_text(token: int) -> str:
    """vLLM's spelling of a token in logprobs when tokens are returned as ids (what
    renderers' generate client checks each entry against)."""
    return f"token_id:{int(token)}"


def _usage(prompt_tokens: int, samples: Sequence[Sample]) -> dict:
    completion = sum(len(s.tokens) for s in samples)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion, "total_tokens": prompt_tokens + completion}


def chat_response(
    request: ChatRequest,
    model: str,
    prompt: Sequence[int],
    samples: Sequence[Sample],
    decode: Callable[[List[int]], str],
    decode_token: Callable[[int], str],
    call_format: Optional[str] = None,
) -> dict:
    """`prompt`: the prompt's token ids (the chat template applied), returned when asked.
    `call_format`: how the template writes a tool call (`tools.ToolSupport`); with the
    request's tools, calls are parsed out of each answer (`finish_reason` `tool_calls` when it
    stopped of itself). The token ids answered are the sampled ones whatever the parse."""
    spell = token_id_text if request.tokens_as_ids else decode_token
    parse_as = call_format if request.tools and request.tool_choice == "auto" else None
    choices = []
    for i, s in enumerate(samples):
        message = answer_message(decode(s.tokens), parse_as)
        called = bool(message.get("tool_calls")) and s.stop_reason == "stop"
        choice: Dict[str, Any] = {
            "index": i,
            "message": message,
            "finish_reason": "tool_calls" if called else s.stop_reason,
            "logprobs": None,
        }
        if request.logprobs:
            choice["logprobs"] = {
                "content": [
                    {"token": spell(t), "logprob": float(lp), "bytes": None, "top_logprobs": []}
                    for t, lp in zip(s.tokens, s.logprobs)
                ]
            }
        if request.return_token_ids:
            choice["token_ids"] = [int(t) for t in s.tokens]
        choices.append(choice)
    response: Dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model or model,
        "choices": choices,
        "usage": _usage(len(prompt), samples),
    }
    if request.return_token_ids:
        response["prompt_token_ids"] = [int(t) for t in prompt]
    return response


# --------------------------------------------------------------------------- OpenAI completions


@dataclass
class CompletionRequest:
    prompts: List[Union[str, List[int]]]
    n: int
    spec: SamplingSpec
    logprobs: Optional[int]
    model: Optional[str]
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage


def parse_completions(body: Any, vocab_size: Optional[int] = None) -> CompletionRequest:
    body = _require_object(body)
    stream, include_usage = _stream_fields(body)
    if body.get("echo"):
        raise RequestError("echo is not supported by the rl trainer", "echo")
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        prompts: List[Union[str, List[int]]] = [prompt]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        prompts = list(prompt)
    elif isinstance(prompt, list) and prompt and all(isinstance(p, int) and not isinstance(p, bool) for p in prompt):
        prompts = [_token_ids(prompt, "prompt", vocab_size, allow_empty=False)]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, list) for p in prompt):
        prompts = [_token_ids(p, "prompt", vocab_size, allow_empty=False) for p in prompt]
    else:
        raise RequestError("prompt must be a string, a list of strings, or token ids", "prompt")
    if any(isinstance(p, str) and not p for p in prompts):
        raise RequestError("prompt must not be empty", "prompt")
    model = body.get("model")
    return CompletionRequest(
        prompts=prompts,
        n=_int(body, "n", 1, lo=1, hi=MAX_N),
        spec=_openai_spec(body, vocab_size),
        logprobs=_int(body, "logprobs", None, lo=0, hi=20),
        model=model if isinstance(model, str) else None,
        stream=stream,
        include_usage=include_usage,
    )


def completions_response(
    request: CompletionRequest,
    model: str,
    prompt_lens: Sequence[int],
    samples_per_prompt: Sequence[Sequence[Sample]],
    decode: Callable[[List[int]], str],
    decode_token: Callable[[int], str],
) -> dict:
    choices = []
    for samples in samples_per_prompt:
        for s in samples:
            choice: Dict[str, Any] = {
                "index": len(choices),
                "text": decode(s.tokens),
                "finish_reason": s.stop_reason,
                "logprobs": None,
            }
            if request.logprobs is not None:
                pieces = [decode_token(t) for t in s.tokens]
                offsets, at = [], 0
                for piece in pieces:
                    offsets.append(at)
                    at += len(piece)
                choice["logprobs"] = {
                    "tokens": pieces,
                    "token_logprobs": [float(lp) for lp in s.logprobs],
                    "top_logprobs": None,
                    "text_offset": offsets,
                }
            choices.append(choice)
    prompt_tokens = sum(prompt_lens)
    completion_tokens = sum(len(s.tokens) for samples in samples_per_prompt for s in samples)
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": request.model or model,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


# --------------------------------------------------------------------------- /inference/v1/generate (vLLM)


@dataclass
class TokenGenerateRequest:
    token_ids: List[int]
    n: int
    spec: SamplingSpec
    model: Optional[str]


def parse_token_generate(body: Any, vocab_size: Optional[int] = None) -> TokenGenerateRequest:
    """vLLM's SamplingParams names under `sampling_params`; keys rl does not use (renderers
    sends `skip_special_tokens`, `routed_experts_prompt_start`, verifiers passes a sampling
    config's extra keys through) are ignored. `logprobs` (a top-k count) is checked but the
    sampled token's logprob is always returned: it is what training needs."""
    body = _require_object(body)
    if body.get("features") or body.get("content_parts"):
        raise RequestError("multimodal input (features, content_parts) is not supported by the rl trainer", "features")
    token_ids = body.get("token_ids")
    if isinstance(token_ids, list) and token_ids and isinstance(token_ids[0], list):
        raise RequestError("batched token_ids (a list of lists) are not supported; send one prompt per request", "token_ids")
    token_ids = _token_ids(token_ids, "token_ids", vocab_size, allow_empty=False)
    params = body.get("sampling_params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RequestError("sampling_params must be an object", "sampling_params")
    p = lambda k: f"sampling_params.{k}"  # noqa: E731
    max_tokens = _int(params, "max_tokens", None, lo=1, param=p("max_tokens"))
    if max_tokens is None:
        max_tokens = _int(params, "max_completion_tokens", None, lo=1, param=p("max_completion_tokens"))
    spec = SamplingSpec(
        max_tokens=max_tokens,
        temperature=_float(params, "temperature", 1.0, 0.0, 100.0, param=p("temperature")),
        top_p=_float(params, "top_p", 1.0, 0.0, 1.0, param=p("top_p")),
        top_k=_int(params, "top_k", -1, lo=-1, param=p("top_k")),
        seed=_int(params, "seed", None, param=p("seed")),
        stop=_stop_strings(params.get("stop"), p("stop")),
        stop_token_ids=_token_ids(params.get("stop_token_ids"), p("stop_token_ids"), vocab_size),
        ignore_eos=_bool(params, "ignore_eos", False, param=p("ignore_eos")),
    )
    if spec.top_k == 0:  # vLLM: 0 (like -1) means no top-k
        spec.top_k = -1
    _int(params, "logprobs", None, lo=0, param=p("logprobs"))
    model = body.get("model")
    return TokenGenerateRequest(
        token_ids=token_ids,
        n=_int(params, "n", 1, lo=1, hi=MAX_N, param=p("n")),
        spec=spec,
        model=model if isinstance(model, str) else None,
    )


def token_generate_response(request: TokenGenerateRequest, samples: Sequence[Sample]) -> dict:
    """One choice per sample. A logprob that is missing or not finite is the sampler's fault
    (ValueError, answered 500): renderers refuses such an answer, and training on it would be
    wrong."""
    choices = []
    for i, s in enumerate(samples):
        if len(s.logprobs) != len(s.tokens):
            raise ValueError(f"the sampler gave {len(s.logprobs)} logprobs for {len(s.tokens)} tokens")
        if not all(math.isfinite(lp) for lp in s.logprobs):
            raise ValueError("the sampler gave a logprob that is not finite")
        choices.append(
            {
                "index": i,
                "token_ids": [int(t) for t in s.tokens],
                "logprobs": {
                    "content": [{"token": token_id_text(t), "logprob": float(lp)} for t, lp in zip(s.tokens, s.logprobs)]
                },
                "finish_reason": s.stop_reason,
            }
        )
    return {
        "request_id": f"gen-{uuid.uuid4().hex}",
        "prompt_token_ids": list(request.token_ids),
        "choices": choices,
        "usage": _usage(len(request.token_ids), samples),
    }


# --------------------------------------------------------------------------- stops


def tinker_stop(spec: SamplingSpec, eos_ids: Sequence[int], token_text: Callable[[int], str]) -> Union[List[int], List[str], None]:
    """Tinker's `stop` is token ids OR strings, never both: token ids (the tokenizer's
    end-of-sequence unless ignore_eos, plus stop_token_ids) when no stop string is asked for,
    else strings (the asked ones plus the text of those tokens; the engine matches stop
    strings on text decoded with special tokens kept)."""
    ids: List[int] = []
    for t in list(spec.stop_token_ids) + ([] if spec.ignore_eos else list(eos_ids)):
        if t not in ids:
            ids.append(t)
    if not spec.stop:
        return ids or None
    strings = list(spec.stop)
    for t in ids:
        text = token_text(t)
        if text and text not in strings:
            strings.append(text)
    return strings
