"""What the current Tinker SDK asks of a server and skyrl-tx 0.3.0 lacks, added to its app.

Found by running tinker 0.38.0's ServiceClient, LoRA training client, saves, loads and sampling
against the engine and adding what failed, one request at a time (docs/decisions.md):

* `POST /api/v1/client/config` and `/client/dynamic_config`: asked before anything else; the
  answer `{}` leaves every feature flag at the SDK's default (plain API keys, uncompressed
  protobuf, per-request futures).
* `GET /api/v1/samplers/{id}`: the sampler's base model and path, asked when a sampling client
  is created.
* `POST /api/v1/forward_backward` as `application/x-protobuf` (maybe zstd): translated to
  skyrl-tx's JSON `forward_backward` or `forward` (protocol.py).
* `POST /api/v1/retrieve_future` with `Accept: application/x-protobuf`: a forward_backward or
  sampling result re-encoded as the SDK's protobuf.
* `POST /api/v1/asample`: the future carries one `sample_sequence_ids` entry per sample.

Every other request reaches skyrl-tx untouched; a JSON body (SDK 0.16) still works.
"""

from __future__ import annotations

import json
from typing import Awaitable, Callable

from fastapi import HTTPException, Request

from rl_engine import protocol

PROTOBUF = b"application/x-protobuf"
Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


def install(app) -> Callable:
    """Add the routes to skyrl-tx's FastAPI `app` and return the ASGI app to serve."""

    async def client_config() -> dict:
        return {}

    async def sampler(sampler_id: str, request: Request) -> dict:
        from sqlmodel.ext.asyncio.session import AsyncSession
        from tx.tinker.db_models import SamplingSessionDB

        async with AsyncSession(request.app.state.db_engine) as session:
            found = await session.get(SamplingSessionDB, sampler_id)
        if found is None:
            raise HTTPException(status_code=404, detail=f"Sampler not found: {sampler_id}")
        return {
            "sampler_id": sampler_id,
            "base_model": found.base_model or request.app.state.engine_config.base_model,
            "model_path": found.model_path,
        }

    app.add_api_route("/api/v1/client/config", client_config, methods=["POST"])
    app.add_api_route("/api/v1/client/dynamic_config", client_config, methods=["POST"])
    app.add_api_route("/api/v1/samplers/{sampler_id}", sampler, methods=["GET"])
    return CurrentProtocol(app)


async def _read_body(receive: Receive) -> bytes:
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
        if sum(map(len, chunks)) > protocol.MAX_BODY_BYTES:
            raise protocol.Unsupported(f"the body is larger than {protocol.MAX_BODY_BYTES} bytes")
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _headers(scope: Scope) -> dict:
    return {name.lower(): value for name, value in scope.get("headers", [])}


def _replace_headers(headers: list, content_type: bytes, length: int, drop: tuple = ()) -> list:
    kept = [(k, v) for k, v in headers if k.lower() not in (b"content-type", b"content-length", *drop)]
    return kept + [(b"content-type", content_type), (b"content-length", str(length).encode())]


async def _answer(send: Send, status: int, payload: dict) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status, "headers": _replace_headers([], b"application/json", len(body))})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _Buffered:
    """Collects the inner app's answer so it can be rewritten before it is sent."""

    def __init__(self) -> None:
        self.start: dict | None = None
        self.chunks: list[bytes] = []

    async def __call__(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            self.start = message
        elif message["type"] == "http.response.body":
            self.chunks.append(message.get("body", b""))

    async def flush(self, send: Send, rewrite: Callable[[bytes], tuple[bytes, bytes] | None]) -> None:
        if self.start is None:
            return
        body = b"".join(self.chunks)
        start = self.start
        if start["status"] == 200:
            rewritten = rewrite(body)
            if rewritten is not None:
                content_type, body = rewritten
                start = dict(start, headers=_replace_headers(start["headers"], content_type, len(body)))
        await send(start)
        await send({"type": "http.response.body", "body": body, "more_body": False})


class CurrentProtocol:
    """ASGI middleware: the current SDK's bodies in and out of skyrl-tx 0.3.0's JSON routes."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        try:
            if path == "/api/v1/forward_backward" and PROTOBUF in _headers(scope).get(b"content-type", b""):
                return await self._forward_backward(scope, receive, send)
            if path == "/api/v1/retrieve_future" and PROTOBUF in _headers(scope).get(b"accept", b""):
                return await self._retrieve(scope, receive, send)
            if path == "/api/v1/asample":
                return await self._asample(scope, receive, send)
        except protocol.Unsupported as error:
            return await _answer(send, 400, {"detail": str(error)})
        return await self.app(scope, receive, send)

    async def _forward_backward(self, scope: Scope, receive: Receive, send: Send) -> None:
        encoding = _headers(scope).get(b"content-encoding", b"").decode("latin-1").strip().lower()
        body = protocol.decompress(await _read_body(receive), encoding)
        route, translated = protocol.forward_backward_from_proto(body)
        headers = _replace_headers(scope["headers"], b"application/json", len(translated), drop=(b"content-encoding",))
        inner = dict(scope, path=route, raw_path=route.encode(), headers=headers)
        await self.app(inner, _replay(translated, receive), send)

    async def _retrieve(self, scope: Scope, receive: Receive, send: Send) -> None:
        buffered = _Buffered()
        await self.app(scope, receive, buffered)

        def rewrite(body: bytes) -> tuple[bytes, bytes] | None:
            try:
                encoded = protocol.result_to_proto(json.loads(body))
            except ValueError:
                return None
            return None if encoded is None else (PROTOBUF, encoded)

        await buffered.flush(send, rewrite)

    async def _asample(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        try:
            samples = int(json.loads(body).get("num_samples", 1))
        except (ValueError, TypeError, AttributeError):
            samples = 1  # skyrl-tx answers the malformed body itself
        buffered = _Buffered()
        await self.app(scope, _replay(body, receive), buffered)

        def rewrite(answer: bytes) -> tuple[bytes, bytes] | None:
            try:
                future = json.loads(answer)
            except ValueError:
                return None
            return b"application/json", json.dumps(protocol.with_sequence_ids(future, samples)).encode()

        await buffered.flush(send, rewrite)
