"""A hosted run's checkpoints through the Tinker service's REST API, with the official SDK:

    python -m rl_trainer.hosted list TRAINING_RUN_ID [TRAINING_RUN_ID ...]
    python -m rl_trainer.hosted keep PATH [PATH ...] (--ttl-seconds N | --forever)
    python -m rl_trainer.hosted archive PATH --out FILE [--max-bytes N]

`list` prints what the service says of each training run's checkpoints (path, size, expiry);
`keep` sets (or, with `--forever`, removes) the expiry of each `tinker://` path; `archive`
downloads a sampler checkpoint's archive (the PEFT adapter files, a tar; gzipped on the local engine) into FILE, written
whole or not at all. The key is TINKER_API_KEY from the environment, never an argument;
TINKER_BASE_URL names another service (the SDK's own variable).

Prints one JSON object on success. Exit codes: 0 done, 1 the service refused or failed (the
last line on stderr says why), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request

EXIT_FAILED = 1
EXIT_USAGE = 2
#: The service answers within this; a download may take longer and has its own bound.
REQUEST_TIMEOUT_SECS = 120
DOWNLOAD_TIMEOUT_SECS = 1800
CHUNK = 1 << 20


def say(message: str) -> None:
    print(f"rl_trainer.hosted: {message}", file=sys.stderr, flush=True)


def tinker_path(text: str) -> str:
    parts = text[len("tinker://"):].split("/") if text.startswith("tinker://") else []
    if len(parts) != 3 or not all(parts) or parts[1] not in ("weights", "sampler_weights"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a tinker://RUN/weights|sampler_weights/NAME path")
    return text


def rest_client():
    import tinker

    key = (os.environ.get("TINKER_API_KEY") or "").strip()
    if not key:
        raise RuntimeError("TINKER_API_KEY is not set")
    base_url = (os.environ.get("TINKER_BASE_URL") or "").strip() or None
    service = tinker.ServiceClient(base_url=base_url, api_key=key) if base_url else tinker.ServiceClient(api_key=key)
    return service.create_rest_client()


def listed(args) -> dict:
    rest = rest_client()
    checkpoints = []
    for run in args.runs:
        answer = rest.list_checkpoints(run).result(timeout=REQUEST_TIMEOUT_SECS)
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
    rest = rest_client()
    ttl = None if args.forever else args.ttl_seconds
    for path in args.paths:
        rest.set_checkpoint_ttl_from_tinker_path(path, ttl).result(timeout=REQUEST_TIMEOUT_SECS)
    return {"kept": args.paths, "ttl_seconds": ttl}


def archive(args) -> dict:
    rest = rest_client()
    answer = rest.get_checkpoint_archive_url_from_tinker_path(args.path).result(timeout=REQUEST_TIMEOUT_SECS)
    part = args.out + ".part"
    written = 0
    try:
        with urllib.request.urlopen(answer.url, timeout=DOWNLOAD_TIMEOUT_SECS) as response, open(part, "wb") as out:
            while True:
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                written += len(chunk)
                if written > args.max_bytes:
                    raise RuntimeError(f"the archive is larger than {args.max_bytes} bytes")
                out.write(chunk)
        os.replace(part, args.out)
    finally:
        if os.path.exists(part):
            os.unlink(part)
    return {"path": args.path, "out": args.out, "bytes": written}


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
    fetched = commands.add_parser("archive")
    fetched.add_argument("path", type=tinker_path)
    fetched.add_argument("--out", required=True)
    fetched.add_argument("--max-bytes", type=int, default=8 << 30)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else 0
    if args.command == "keep" and not args.forever and args.ttl_seconds <= 0:
        say("--ttl-seconds must be above 0")
        return EXIT_USAGE
    try:
        result = {"list": listed, "keep": keep, "archive": archive}[args.command](args)
    except Exception as e:  # the service's refusal or a broken connection: said once, plainly
        message = " ".join(str(e).split())[:500]
        say(f"failed: {type(e).__name__}: {message}")
        return EXIT_FAILED
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The SDK's heartbeat thread must not keep the process alive.
    os._exit(code)
