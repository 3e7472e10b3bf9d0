"""Whether the Tinker API's host can be reached, and if not why, said in one line.

The SDK (tinker 0.38.0) says only "Connection error." (`APIConnectionError`, the httpx error
as its `__cause__`) and retries a lost connection for up to 5 minutes (`InternalClientHolder.
execute_with_retries`, MAX_WAIT_TIME = 300 s, each try with httpx's own 10 retries), so a
service that cannot be reached kept a run "starting" for six minutes. The trainer asks the
host once, bounded, before the SDK's first call, and turns a connection failure into the host,
port, the kind of failure (DNS, connection refused, TLS, timeout) and the setting that names
the address.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import urllib.parse
from typing import Mapping, Optional

import httpx

from .config import CONTRACT

#: The SDK's default service (tinker 0.38.0, `tinker/lib/base_url.py`, DEFAULT_BASE_URL), as
#: rl's settings name it (`rl_settings::HOSTED_TINKER_URL`, in the contract).
HOSTED_TINKER_URL = CONTRACT["constants"]["hosted_tinker_url"]
#: The route asked: any HTTP answer counts as reached (the hosted service and the local
#: engine answer it with 200).
HEALTH_PATH = "/api/v1/healthz"
#: The probe's bound: resolution, connection, TLS and the answer together.
PROBE_SECS = 10.0


class ServiceUnreachable(Exception):
    """The Tinker API's host could not be reached; the message says which, why, and where it
    is set."""


class SessionFailed(Exception):
    """The Tinker API's host answers, but the SDK's session was not created in time."""


def service_setting(config_url: Optional[str], environ: Mapping[str, str]) -> str:
    """The setting that names the Tinker API the trainer talks to."""
    if config_url:
        return "tinker.base_url in the run config (rl writes [locked.tinker] base_url of its config.toml there)"
    if (environ.get("TINKER_BASE_URL") or "").strip():
        return "TINKER_BASE_URL in the trainer's environment"
    return "the Tinker SDK's default (the hosted Tinker); [locked.tinker] base_url in rl's config.toml names another"


def authority(url: str) -> str:
    """`host:port` of `url`, the scheme's port when it names none."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = "?"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _chain(error: BaseException):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def failure_kind(error: BaseException) -> str:
    """DNS, connection refused, TLS, timeout or network error: what `error` (an httpx or SDK
    error, its causes walked) says of a connection."""
    text = ""
    for link in _chain(error):
        if isinstance(link, socket.gaierror):
            return "DNS"
        if isinstance(link, ConnectionRefusedError):
            return "connection refused"
        if isinstance(link, ssl.SSLError):
            return "TLS"
        if isinstance(link, (TimeoutError, socket.timeout, httpx.TimeoutException)):
            return "timeout"
        if type(link).__name__ in ("APITimeoutError", "RequestTimeout"):
            return "timeout"
        text += " " + str(link).lower()
    if any(s in text for s in ("name or service not known", "temporary failure in name resolution", "nodename nor servname", "getaddrinfo")):
        return "DNS"
    if "connection refused" in text:
        return "connection refused"
    if "ssl" in text or "certificate" in text or "tls" in text:
        return "TLS"
    if "timed out" in text or "timeout" in text:
        return "timeout"
    return "network error"


def seen(error: BaseException) -> str:
    """What the deepest cause of `error` says (the OS's words, under httpx's and the SDK's)."""
    said = type(error).__name__
    for link in _chain(error):
        message = " ".join(str(link).split())
        if message and message != "Connection error.":
            said = message[:200]
    return said


def unreachable(url: str, setting: str, error: BaseException, waited: Optional[float] = None) -> ServiceUnreachable:
    """The one message for a Tinker API that could not be reached."""
    kind = failure_kind(error)
    said = f"no answer within {waited:g} s" if kind == "timeout" and waited else seen(error)
    return ServiceUnreachable(
        f"the Tinker service at {url} could not be reached: {authority(url)}, {kind} ({said}); "
        f"its address is {setting}"
    )


async def probe(url: str, timeout: float = PROBE_SECS, transport: Optional[httpx.AsyncBaseTransport] = None) -> Optional[BaseException]:
    """None when `url`'s host answers an HTTP request (any status) within `timeout`, else the
    error met. Proxies are used as the SDK's httpx client uses them (from the environment)."""
    async def ask() -> None:
        async with httpx.AsyncClient(timeout=timeout, transport=transport) as client:
            await client.get(url.rstrip("/") + HEALTH_PATH)

    try:
        # httpx bounds each phase (connect, read) by `timeout`; the whole is bounded here.
        await asyncio.wait_for(ask(), timeout)
        return None
    except asyncio.TimeoutError:
        return TimeoutError(f"no answer within {timeout:g} s")
    except (httpx.TransportError, OSError) as e:
        return e
