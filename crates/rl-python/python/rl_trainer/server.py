"""The inference the trainer serves to the environment, from the current sampling client; or,
given several named policies (`rl_trainer.checkpoints`), from the one a request's `model` names.

Routes: GET /health, GET /v1/models, POST /v1/chat/completions, POST /v1/completions,
POST /generate (SGLang's native shape; atroposlib's ManagedServer calls it) and
POST /inference/v1/generate (vLLM's token-in/token-out shape; verifiers 0.4's train client
calls it, at the server's root: it strips `/v1` from the base URL it is given), and vLLM's
POST /tokenize (root) and POST /v1/chat/completions/tokens (a chat sampled from the token ids
it gives), which verifiers 0.3's token client stitches a multi-turn rollout's prompts with
(`tools.py`: tools on the chat routes). Answers 503
until the trainer is initialized (a sampling client exists and run-api knows the trainer),
400 with an OpenAI-shaped error for bad bodies, 500 when sampling fails. The OpenAI routes
answer `stream: true` with Server-Sent Events (`streaming.py`) once the whole answer is
sampled, so every failure is still an HTTP status before the stream starts.

Every sample served by a policy that keeps a memory (the training one) is recorded there with
the version of the weights that drew it (`draw`, `samples.py`): what the run's
`max_steps_off_policy` and its length stops read.

The app is served by uvicorn inside the trainer's own event loop (`serve`), with uvicorn's
signal handling disabled: the trainer decides how signals end the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from typing import Any, List, Mapping, Optional, Sequence, Union

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .sampling import (
    RequestError,
    Sample,
    SamplingSpec,
    chat_response,
    completions_response,
    error_body,
    generate_response,
    parse_chat,
    parse_completions,
    parse_generate,
    parse_token_generate,
    parse_tokenize,
    token_generate_response,
)
from .samples import SampleMemory
from .streaming import chat_chunks, completion_chunks, sse_body
from .tools import ToolSupport


class Policy:
    """What the server needs of the trainer (the real one is `engine.TinkerPolicy`)."""

    model_name: str = "policy"
    sampler_path: Optional[str] = None
    max_token_length: int = 0  # the run's token limit (0: unknown)
    # The training policy's: every sample served is recorded here with the version of the
    # weights sampled from (the optimizer steps they had; the trainer sets both).
    samples: Optional[SampleMemory] = None
    weights_version: Optional[int] = None

    @property
    def initialized(self) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def vocab_size(self) -> Optional[int]:  # pragma: no cover - interface
        return None

    def encode(self, text: str) -> List[int]:  # pragma: no cover - interface
        raise NotImplementedError

    def chat_tokens(self, messages: List[dict], tools: Optional[List[dict]] = None, add_generation_prompt: bool = True) -> List[int]:  # pragma: no cover - interface
        raise NotImplementedError

    def tool_support(self) -> ToolSupport:  # pragma: no cover - interface
        return ToolSupport()

    def decode(self, tokens: Sequence[int]) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def token_text(self, token: int) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def stop_ids(self, spec: SamplingSpec) -> List[int]:  # pragma: no cover - interface
        return []

    async def sample(self, prompt: List[int], n: int, spec: SamplingSpec) -> List[Sample]:  # pragma: no cover
        raise NotImplementedError


def _error(status: int, message: str, kind: str, param: Optional[str] = None) -> JSONResponse:
    return JSONResponse(status_code=status, content=error_body(message, kind, param))


def _event_stream(chunks: List[dict]) -> StreamingResponse:
    events = sse_body(chunks)

    async def send():
        for event in events:
            yield event

    return StreamingResponse(send(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


async def draw(policy: Policy, prompt: List[int], n: int, spec: SamplingSpec) -> List[Sample]:
    """`policy.sample`, each sample recorded in its memory. The weights' version is read once
    the samples are back, with no await between: a swap during the request makes it newer than
    the sampler's, never older, so an age read from it is never more than the true one."""
    samples = await policy.sample(prompt, n, spec)
    if policy.samples is not None:
        policy.samples.record_all(samples, policy.weights_version)
    return samples


def create_app(served: Union[Policy, Mapping[str, Policy]]) -> FastAPI:
    """One policy answers every request; several are chosen by the request's `model` (the
    native `/generate` names none, so it needs one policy)."""
    policies = dict(served) if isinstance(served, Mapping) else {served.model_name: served}
    app = FastAPI(title="rl trainer inference", docs_url=None, redoc_url=None, openapi_url=None)

    def policy_for(body: Any) -> Policy:
        if len(policies) == 1:
            return next(iter(policies.values()))
        name = body.get("model") if isinstance(body, dict) else None
        if isinstance(name, str) and name in policies:
            return policies[name]
        raise RequestError(f"model {name!r} is not served here; these are: {', '.join(policies)}", "model", 404)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException):
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return _error(exc.status_code, str(exc.detail), kind)

    async def body_of(request: Request) -> Any:
        raw = await request.body()
        try:
            return json.loads(raw or b"null")
        except (ValueError, UnicodeDecodeError):
            raise RequestError("the request body is not valid JSON") from None

    async def handle(request: Request, work) -> Response:
        """`work` answers a JSON object, or a whole Response (a stream)."""
        if not all(policy.initialized for policy in policies.values()):
            return _error(503, "the trainer is not initialized yet (no sampling client)", "service_unavailable")
        try:
            body = await body_of(request)
            answer = await work(policy_for(body), body)
            return answer if isinstance(answer, Response) else JSONResponse(answer)
        except RequestError as e:
            kind = "not_found_error" if e.status == 404 else "invalid_request_error"
            return _error(e.status, e.message, kind, e.param)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the sampler failed
            return _error(500, f"sampling failed: {type(e).__name__}: {e}", "server_error")

    @app.get("/health")
    async def health():
        return {"status": "ok", "trainer_initialized": all(policy.initialized for policy in policies.values())}

    @app.get("/v1/models")
    async def models():
        return {
            "object": "list",
            "data": [
                {
                    "id": policy.model_name,
                    "object": "model",
                    "owned_by": "rl-trainer",
                    "root": policy.sampler_path,
                }
                for policy in policies.values()
            ],
        }

    async def generate(policy, body):
        req = parse_generate(body, policy.vocab_size)
        prompt = req.input_ids if req.input_ids is not None else policy.encode(req.text)
        samples = await draw(policy, prompt, req.n, req.spec)
        return generate_response(req, len(prompt), samples, policy.decode, policy.token_text, policy.stop_ids(req.spec))

    def call_format_of(policy, tools) -> Optional[str]:
        """How the policy's template writes a tool call (None: unknown); tools its template
        does not render are refused."""
        if not tools:
            return None
        support = policy.tool_support()
        if not support.renders_tools:
            raise RequestError(
                "the model's chat template does not render tools, so the model would never see them: "
                "this model cannot be given tools",
                "tools",
            )
        return support.call_format

    async def chat(policy, body, with_tokens=False):
        req = parse_chat(body, policy.vocab_size, with_tokens)
        call_format = call_format_of(policy, req.tools)
        prompt = req.prompt_ids if with_tokens else policy.chat_tokens(req.messages, req.tools)
        samples = await draw(policy, prompt, req.n, req.spec)
        answer = chat_response(req, policy.model_name, prompt, samples, policy.decode, policy.token_text, call_format)
        return _event_stream(chat_chunks(answer, req.include_usage)) if req.stream else answer

    async def chat_from_tokens(policy, body):
        return await chat(policy, body, with_tokens=True)

    async def tokenize(policy, body):
        req = parse_tokenize(body)
        if req.messages is not None:
            call_format_of(policy, req.tools)  # tools the template cannot render are refused here too
            tokens = policy.chat_tokens(req.messages, req.tools, req.add_generation_prompt)
        else:
            tokens = policy.encode(req.prompt)
        return {"count": len(tokens), "max_model_len": int(policy.max_token_length or 0), "tokens": [int(t) for t in tokens]}

    async def token_generate(policy, body):
        req = parse_token_generate(body, policy.vocab_size)
        samples = await draw(policy, req.token_ids, req.n, req.spec)
        return token_generate_response(req, samples)

    async def completions(policy, body):
        req = parse_completions(body, policy.vocab_size)
        prompts = [p if isinstance(p, list) else policy.encode(p) for p in req.prompts]
        results = await asyncio.gather(*(draw(policy, p, req.n, req.spec) for p in prompts))
        answer = completions_response(
            req, policy.model_name, [len(p) for p in prompts], results, policy.decode, policy.token_text
        )
        return _event_stream(completion_chunks(answer, req.include_usage)) if req.stream else answer

    @app.post("/generate")
    async def generate_route(request: Request):
        return await handle(request, generate)

    @app.post("/inference/v1/generate")
    async def token_generate_route(request: Request):
        return await handle(request, token_generate)

    @app.post("/v1/chat/completions")
    async def chat_route(request: Request):
        return await handle(request, chat)

    @app.post("/v1/chat/completions/tokens")
    async def chat_tokens_route(request: Request):
        return await handle(request, chat_from_tokens)

    @app.post("/tokenize")
    async def tokenize_route(request: Request):
        return await handle(request, tokenize)

    @app.post("/v1/completions")
    async def completions_route(request: Request):
        return await handle(request, completions)

    return app


def bind_socket(host: str, port: int) -> socket.socket:
    """The listening socket, bound before serving so a taken port is our error, not uvicorn's
    sys.exit."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.setblocking(False)
    return sock


class InferenceServer:
    """uvicorn in the current event loop, without its signal handlers."""

    def __init__(self, app: FastAPI, sock: socket.socket):
        import uvicorn

        class _Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self):  # the trainer owns SIGTERM/SIGINT
                yield

        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2)
        self.server = _Server(config)
        self.sock = sock

    async def serve(self) -> None:
        await self.server.serve(sockets=[self.sock])

    def stop(self) -> None:
        self.server.should_exit = True
