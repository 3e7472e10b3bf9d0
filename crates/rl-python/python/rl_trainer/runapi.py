"""The client of atroposlib's run-api (the trajectory API): register, take batches, read status.

Connection errors and 5xx answers are retried with a bounded backoff for at most
`unreachable_secs`; other answers (4xx, an error status in the body) fail at once.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import httpx


class RunApiError(Exception):
    """run-api refused, answered nonsense, or stayed unreachable."""


class BatchTimeout(RunApiError):
    """No batch arrived within tinker.batch_timeout_secs."""


def _retryable_status(code: int) -> bool:
    return code in (408, 429) or 500 <= code < 600


class RunApi:
    def __init__(
        self,
        base_url: str,
        say: Callable[[str], None],
        unreachable_secs: float = 60.0,
        request_timeout: float = 30.0,
        transport: Optional[httpx.AsyncBaseTransport] = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.say = say
        self.unreachable_secs = unreachable_secs
        # No connection is kept between requests: run-api's server (uvicorn) closes one idle for
        # 5 s, httpx reuses one idle for under 5 s, and on a busy machine a poll then goes out on
        # a connection being closed ("Server disconnected without sending a response"), which
        # for GET /batch cannot be told from a lost answer. A new loopback connection per
        # request costs next to nothing.
        self.client = httpx.AsyncClient(
            timeout=request_timeout,
            transport=transport,
            trust_env=False,
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    async def close(self) -> None:
        await self.client.aclose()

    async def _request(
        self, method: str, path: str, payload: Optional[dict] = None, consumes: bool = False
    ) -> Any:
        """One request, with bounded retries of transient failures. A request that `consumes`
        (GET /batch takes the batch off run-api's queue) is sent again only when it never
        reached the server: after a lost answer the batch may be gone, and asking again would
        train on the next one, one step out of line with run-api."""
        first_failure: Optional[float] = None
        attempt = 0
        while True:
            try:
                response = await self.client.request(method, self.base_url + path, json=payload)
                if _retryable_status(response.status_code):
                    raise _Transient(f"HTTP {response.status_code}: {response.text[:200]}")
                if response.status_code >= 400:
                    raise RunApiError(f"{method} {path} answered HTTP {response.status_code}: {response.text[:300]}")
                try:
                    return response.json()
                except ValueError:
                    raise RunApiError(f"{method} {path} answered something that is not JSON: {response.text[:200]!r}") from None
            except (httpx.TransportError, _Transient) as e:
                if consumes and isinstance(e, httpx.TransportError) and not isinstance(e, httpx.ConnectError):
                    raise RunApiError(
                        f"{method} {path} lost its answer ({type(e).__name__}: {e}); run-api may "
                        "have handed out the batch already, so it is not asked again"
                    ) from None
                now = time.monotonic()
                if first_failure is None:
                    first_failure = now
                if now - first_failure >= self.unreachable_secs:
                    raise RunApiError(
                        f"run-api at {self.base_url} unreachable for {now - first_failure:.0f} s "
                        f"({method} {path}: {type(e).__name__}: {e})"
                    ) from None
                delay = min(2.0 ** attempt, 5.0, max(0.1, self.unreachable_secs - (now - first_failure)))
                attempt += 1
                await asyncio.sleep(delay)

    async def register(self, payload: Dict[str, Any]) -> Any:
        answer = await self._request("POST", "/register", payload)
        if not isinstance(answer, dict):
            raise RunApiError(f"POST /register answered {answer!r}")
        return answer.get("uuid")

    async def next_batch(self, timeout_secs: float = 0.0, poll_secs: float = 0.1, log_every: float = 30.0) -> Tuple[List[Any], float]:
        """Poll GET /batch until it holds a batch; (batch, seconds waited). Every 0.1 s: on
        loopback a poll costs run-api next to nothing, and a step's wait is then the batch's,
        not up to a second of polling on top (measured: a 1 s poll added ~16 % per step)."""
        start = time.monotonic()
        last_log = start
        while True:
            answer = await self._request("GET", "/batch", consumes=True)
            if not isinstance(answer, dict):
                raise RunApiError(f"GET /batch answered {str(answer)[:200]!r}")
            if answer.get("status") == "error":
                raise RunApiError(f"GET /batch: {answer.get('message') or answer}")
            batch = answer.get("batch")
            if batch:
                if not isinstance(batch, list):
                    raise RunApiError(f"GET /batch answered a batch that is not a list: {str(batch)[:200]!r}")
                return batch, time.monotonic() - start
            now = time.monotonic()
            waited = now - start
            if timeout_secs > 0 and waited >= timeout_secs:
                raise BatchTimeout(f"no batch from run-api within {timeout_secs:g} s (tinker.batch_timeout_secs)")
            if now - last_log >= log_every:
                self.say(f"waiting for a batch from run-api ({waited:.0f} s)")
                last_log = now
            delay = poll_secs
            if timeout_secs > 0:
                delay = min(delay, max(0.0, timeout_secs - waited))
            await asyncio.sleep(delay)

    async def status(self) -> Optional[Dict[str, Any]]:
        """GET /status once (no retries); None when run-api does not answer."""
        try:
            response = await self.client.get(self.base_url + "/status", timeout=2.0)
            data = response.json()
            return data if isinstance(data, dict) else None
        except (httpx.HTTPError, ValueError):
            return None


class _Transient(Exception):
    pass
