"""A hosted run's checkpoints through the Tinker service's REST API, with the official SDK:

    python -m rl_trainer.hosted list TRAINING_RUN_ID [TRAINING_RUN_ID ...]
    python -m rl_trainer.hosted keep PATH [PATH ...] (--ttl-seconds N | --forever)
    python -m rl_trainer.hosted export STATE_PATH --out FILE [--max-bytes N]

`list` prints what the service says of each training run's checkpoints (path, size, expiry);
`keep` sets (or, with `--forever`, removes) the expiry of each `tinker://` path; `export`
downloads a saved training state (`tinker://RUN/weights/NAME`, what `save_state` writes: the
service exports no sampler weights) as the SDK's `tinker checkpoint download` does: the state is
loaded into a new training run and saved as temporary external weights (the PEFT adapter
files), each file is fetched from its signed URL, then the temporary export is deleted and the
session closed. FILE is a plain tar of those files by their names, written whole or not at all,
holding at most `--max-bytes` of files. The key is TINKER_API_KEY from the environment, never an
argument; TINKER_BASE_URL names another service (the SDK's own variable).

The SDK's clients wait for the service without end as they are made (a host that accepts the
connection and never answers held `list` and `keep` until rl's 300 s limit): each is made, and
each call of `list` and `keep` made, in a worker thread given RL_TINKER_ANSWER_SECS (default 30)
to answer; past it the command fails naming the address it could not reach. The threads are
daemons and the process ends with `os._exit`, so none of them holds it.

Prints one JSON object on success (`export`: path, out, bytes of files, their names). Exit
codes: 0 done, 1 the service refused or failed (the last line on stderr says why), 2 bad
arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
from datetime import datetime, timedelta, timezone

EXIT_FAILED = 1
EXIT_USAGE = 2
#: The service answers within this; loading a state or writing its files, within WORK; a
#: download's every read, within DOWNLOAD.
REQUEST_TIMEOUT_SECS = 120
WORK_TIMEOUT_SECS = 600
DOWNLOAD_TIMEOUT_SECS = 1800
CHUNK = 1 << 20
#: The temporary export lives this long unless deleted (the shortest the service takes) ...
EXPORT_TTL_SECS = 3600
#: ... and its URLs are signed again this long before they expire.
RESIGN_BEFORE = timedelta(minutes=5)
#: How long the service may take to answer as a client is made, or a listing's or an expiry's
#: call (seconds; the variable, when set, instead).
ANSWER_TIMEOUT_SECS = 30
ANSWER_VARIABLE = "RL_TINKER_ANSWER_SECS"


class Unanswered(RuntimeError):
    """The service did not answer within the bound."""


def say(message: str) -> None:
    print(f"rl_trainer.hosted: {message}", file=sys.stderr, flush=True)


def one_line(error: Exception) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:500]}"


def tinker_path(text: str) -> str:
    parts = text[len("tinker://"):].split("/") if text.startswith("tinker://") else []
    if len(parts) != 3 or not all(parts) or parts[1] not in ("weights", "sampler_weights"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a tinker://RUN/weights|sampler_weights/NAME path")
    return text


def state_path(text: str) -> str:
    if tinker_path(text).split("/")[3] != "weights":
        raise argparse.ArgumentTypeError(
            f"{text!r} is sampler weights: the hosted service exports saved training states "
            "(tinker://RUN/weights/NAME, what save_state writes), not sampler weights"
        )
    return text


def safe_name(name: str) -> str:
    """An exported file's name as a tar member: relative, without `..`, `.` or empty parts."""
    parts = name.split("/") if isinstance(name, str) else [""]
    if not all(parts) or ".." in parts or "." in parts:
        raise RuntimeError(f"the export holds a file with an unsafe name: {name!r}")
    return name


def credentials() -> dict:
    key = (os.environ.get("TINKER_API_KEY") or "").strip()
    if not key:
        raise RuntimeError("TINKER_API_KEY is not set")
    return {"api_key": key, "base_url": (os.environ.get("TINKER_BASE_URL") or "").strip() or None}


def answer_timeout(environ=os.environ) -> float:
    """The bound on each answer: RL_TINKER_ANSWER_SECS, else ANSWER_TIMEOUT_SECS."""
    text = (environ.get(ANSWER_VARIABLE) or "").strip()
    if not text:
        return ANSWER_TIMEOUT_SECS
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 86400:
        raise ValueError(f"{ANSWER_VARIABLE} is {text!r}: a number of seconds above 0 (at most a day)")
    return seconds


def service_address(base_url) -> str:
    """Where the SDK goes for `base_url` (`None`: TINKER_BASE_URL, else its default)."""
    try:
        from tinker.lib.base_url import resolve_base_url
    except ImportError:  # an SDK before it was public: its default is the hosted Tinker
        return base_url or os.environ.get("TINKER_BASE_URL") or "the hosted Tinker (the SDK's default address)"
    return resolve_base_url(base_url)


def answered(call, what: str, base_url, seconds: float):
    """`call()`'s result (or its exception), run in a daemon thread given `seconds`: the SDK
    waits on the service without end as it makes a client. Past the bound: `Unanswered`, naming
    the address; the thread is left to the process's end."""
    outcome = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as error:  # handed to the caller as it is
            outcome["error"] = error

    worker = threading.Thread(target=run, name=f"rl-hosted-{what}", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise Unanswered(
            f"the Tinker service at {service_address(base_url)} did not answer within {seconds:g} s "
            f"({what}); check that it is up and reachable from here (a proxy or firewall may hold the "
            f"connection), or allow it longer with {ANSWER_VARIABLE}"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def rest_client(access: dict, seconds: float):
    import tinker

    return answered(lambda: tinker.RestClient(**access), "connecting", access["base_url"], seconds)


def listed(args) -> dict:
    access, seconds = credentials(), args.answer_secs
    rest = rest_client(access, seconds)
    checkpoints = []
    for run in args.runs:
        answer = answered(
            lambda run=run: rest.list_checkpoints(run).result(),
            f"listing {run}'s checkpoints",
            access["base_url"],
            seconds,
        )
        for checkpoint in answer.checkpoints:
            expires = getattr(checkpoint, "expires_at", None)
            checkpoints.append(
                {
                    "tinker_path": checkpoint.tinker_path,
                    "size_bytes": getattr(checkpoint, "size_bytes", None),
                    "expires_at": expires.isoformat() if expires is not None else None,
                }
            )
    return {"checkpoints": checkpoints}


def keep(args) -> dict:
    access, seconds = credentials(), args.answer_secs
    rest = rest_client(access, seconds)
    ttl = None if args.forever else args.ttl_seconds
    for path in args.paths:
        answered(
            lambda path=path: rest.set_checkpoint_ttl_from_tinker_path(path, ttl).result(),
            f"setting {path}'s expiry",
            access["base_url"],
            seconds,
        )
    return {"kept": args.paths, "ttl_seconds": ttl}


class SignedUrls:
    """An external weights export's download URL per file, signed again (and the export kept
    alive as long) when they are about to expire."""

    def __init__(self, rest, path: str):
        self.rest, self.path = rest, path
        self.sign()
        if not self.urls:
            raise RuntimeError(f"the export {path} holds no files")
        self.names = sorted(safe_name(name) for name in self.urls)

    def sign(self) -> None:
        answer = self.rest.get_external_weights_urls(self.path).result(timeout=REQUEST_TIMEOUT_SECS)
        self.rest.set_checkpoint_ttl_from_tinker_path(self.path, EXPORT_TTL_SECS).result(timeout=REQUEST_TIMEOUT_SECS)
        expires = answer.expires  # naive means UTC
        self.urls, self.expires = dict(answer.urls), expires if expires.tzinfo else expires.replace(tzinfo=timezone.utc)

    def open(self, name: str):
        if datetime.now(timezone.utc) >= self.expires - RESIGN_BEFORE:
            self.sign()
        if name not in self.urls:
            raise RuntimeError(f"the export {self.path} no longer holds {name!r}")
        return urllib.request.urlopen(self.urls[name], timeout=DOWNLOAD_TIMEOUT_SECS)


def write_tar(out: str, names: list, open_file, max_bytes: int) -> int:
    """Writes `out` as a plain tar of each name's bytes (`open_file(name)`: a stream), at most
    `max_bytes` of them in all, whole or not at all; returns their total size."""
    names = [safe_name(name) for name in names]
    part, total = out + ".part", 0
    try:
        with tarfile.open(part, "w", format=tarfile.PAX_FORMAT) as tar:
            for name in names:
                with tempfile.TemporaryFile(dir=os.path.dirname(os.path.abspath(out))) as spool:
                    with open_file(name) as stream:
                        while chunk := stream.read(CHUNK):
                            total += len(chunk)
                            if total > max_bytes:
                                raise RuntimeError(f"the export is larger than {max_bytes} bytes")
                            spool.write(chunk)
                    member = tarfile.TarInfo(name)
                    member.size, member.mtime = spool.tell(), int(time.time())
                    spool.seek(0)
                    tar.addfile(member, spool)
        os.replace(part, out)
    finally:
        if os.path.exists(part):
            os.unlink(part)
    return total


def export(args) -> dict:
    import tinker

    access, seconds = credentials(), args.answer_secs
    service = answered(lambda: tinker.ServiceClient(**access), "connecting", access["base_url"], seconds)
    rest = rest_client(access, seconds)
    status = "errored"
    try:
        training = service.create_training_client_from_state(
            args.path, user_metadata={"created_by": "rl checkpoints export"}
        ).result(timeout=WORK_TIMEOUT_SECS)
        saved = training.save_weights_external("rl-export", ttl_seconds=EXPORT_TTL_SECS)
        exported = saved.result(timeout=WORK_TIMEOUT_SECS).path
        try:
            urls = SignedUrls(rest, exported)
            written = write_tar(args.out, urls.names, urls.open, args.max_bytes)
        finally:
            try:
                rest.delete_checkpoint_from_tinker_path(exported).result(timeout=REQUEST_TIMEOUT_SECS)
            except Exception as e:
                say(f"the temporary export {exported} was not deleted ({one_line(e)}); it expires within an hour")
        status = "success"
    finally:
        try:
            service.close(status).result(timeout=REQUEST_TIMEOUT_SECS)
        except Exception as e:
            say(f"the session was not closed: {one_line(e)}")
    return {"path": args.path, "out": args.out, "bytes": written, "files": urls.names}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl_trainer.hosted", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    runs = commands.add_parser("list")
    runs.add_argument("runs", nargs="+")
    kept = commands.add_parser("keep")
    kept.add_argument("paths", nargs="+", type=tinker_path)
    how_long = kept.add_mutually_exclusive_group(required=True)
    how_long.add_argument("--ttl-seconds", type=int)
    how_long.add_argument("--forever", action="store_true")
    fetched = commands.add_parser("export")
    fetched.add_argument("path", metavar="STATE_PATH", type=state_path)
    fetched.add_argument("--out", required=True)
    fetched.add_argument("--max-bytes", type=int, default=8 << 30)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else 0
    if args.command == "keep" and not args.forever and args.ttl_seconds <= 0:
        say("--ttl-seconds must be above 0")
        return EXIT_USAGE
    if args.command == "export" and args.max_bytes <= 0:
        say("--max-bytes must be above 0")
        return EXIT_USAGE
    try:
        args.answer_secs = answer_timeout()
    except ValueError as e:
        say(str(e))
        return EXIT_USAGE
    try:
        result = {"list": listed, "keep": keep, "export": export}[args.command](args)
    except Unanswered as e:
        say(str(e))
        return EXIT_FAILED
    except Exception as e:  # the service's refusal or a broken connection: said once, plainly
        say(f"failed: {one_line(e)}")
        return EXIT_FAILED
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The SDK's heartbeat thread must not keep the process alive.
    os._exit(code)
