"""A finished run's checkpoints served as OpenAI-compatible models, for a pre-flight or a compare.

    PYTHONPATH=<folder holding rl_trainer> python -m rl_trainer.checkpoints --port P \\
        --engine-python ENGINE_PY --engine-dir DIR --base-model PATH --lora-rank R \\
        [--backend-config JSON] --model NAME=STATE_PATH ... [--base NAME]

It starts the local engine (`ENGINE_PY -m rl_engine`) on `DIR` (a copy of the run's engine
folder: its database and checkpoints; a new folder when only `--base` is served) in this
process's group, so that whoever ends the group ends both. A restarted engine has no model
loaded, so each `save_state` path is loaded into a LoRA client of its own and saved again for
sampling: the weights are exactly the run's. `--base` serves the base model itself, through
the same engine and the same code, so that a comparison differs only in the weights. Requests choose a model by their `model` field (server.py), and
`GET /health` answers `trainer_initialized: true` once every model can be sampled.

`--exit-with-parent` ends it (engine included) when the process that started it is gone: what
`rl checkpoints serve` asks, so that killing rl, even with SIGKILL, leaves nothing serving. An
engine that dies while its models are served ends it too (exit 1): nothing answers for it.

Exit codes: 0 after SIGTERM/SIGINT, 1 when the engine or a checkpoint fails, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import types
import urllib.request
from typing import Dict, List, Tuple

EXIT_FAILED = 1
EXIT_USAGE = 2
LOCAL_KEY = "tml-local"


def say(message: str) -> None:
    # Its output is a pipe its owner reads: with the owner killed, nobody does, and a write
    # fails. What it had to say is lost; stopping must not be.
    try:
        print(f"rl_trainer.checkpoints: {message}", file=sys.stderr, flush=True)
    except OSError:
        pass


def model_pairs(values: List[str]) -> List[Tuple[str, str]]:
    pairs = []
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--model {value!r}: expected NAME=STATE_PATH")
        pairs.append((name, path))
    return pairs


def backend_config(text: str, adapters: int, rank: int) -> str:
    """The operator's backend config with room for every served adapter (slot 0 is the
    engine's own) at the run's rank."""
    config = json.loads(text) if text else {}
    if not isinstance(config, dict):
        raise ValueError("--backend-config: expected a JSON object")
    config["max_lora_adapters"] = max(int(config.get("max_lora_adapters", 0)), adapters + 1)
    config["max_lora_rank"] = max(int(config.get("max_lora_rank", 0)), rank)
    return json.dumps(config)


def start_engine(args, port: int, config: str) -> subprocess.Popen:
    programs = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    engine_dir = os.path.abspath(args.engine_dir)
    command = [
        args.engine_python, "-m", "rl_engine",
        "--base-model", args.base_model,
        "--host", "127.0.0.1", "--port", str(port),
        "--database-url", f"sqlite:///{engine_dir}/tinker.db",
        "--checkpoints-base", f"{engine_dir}/checkpoints",
        "--backend-config", config,
    ]
    # A test of the base model alone starts on a new engine folder, not a run's copy.
    os.makedirs(engine_dir, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=programs)
    # Same process group: the group's end is the engine's end.
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, env=env)


class Stopped(Exception):
    """SIGTERM or SIGINT came before the models were served."""


async def wait_engine(process: subprocess.Popen, port: int, limit: float, stopping: asyncio.Event) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if stopping.is_set():
            raise Stopped()
        if process.poll() is not None:
            raise RuntimeError(f"the engine exited with {process.returncode} before it was ready")
        try:
            await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/healthz", timeout=1).read())
            return
        except OSError:
            await asyncio.sleep(0.3)
    raise RuntimeError(f"the engine did not answer within {limit:.0f} s")


#: How often the parent and the engine are looked at.
WATCH_SECS = 1.0


async def watch(parent: int, engine: subprocess.Popen, stopping: asyncio.Event, lost: list) -> None:
    """Sets `stopping` once the parent (a pid, 0: none watched) is gone or the engine has
    exited, saying which in `lost`."""
    while not stopping.is_set():
        if parent and os.getppid() != parent:
            stopping.set()
            say(f"its parent {parent} is gone: stopping")
            return
        if engine.poll() is not None:
            lost.append(f"the engine exited with {engine.returncode}")
            stopping.set()
            return
        await asyncio.sleep(WATCH_SECS)


async def serve(args, engine: subprocess.Popen, engine_port: int, stopping: asyncio.Event) -> None:
    await wait_engine(engine, engine_port, args.engine_ready_timeout, stopping)
    import tinker
    from transformers import AutoTokenizer

    from .engine import Tinker, TinkerPolicy, load_state
    from .server import InferenceServer, bind_socket, create_app

    sock = bind_socket("127.0.0.1", args.port)
    config = types.SimpleNamespace(
        request_timeout_secs=args.request_timeout,
        max_retries=3,
        tinker_base_url=f"http://127.0.0.1:{engine_port}",
        base_model=args.base_model,
        lora_rank=args.lora_rank,
    )
    sdk = Tinker(config, LOCAL_KEY, say)
    sdk.service = await asyncio.to_thread(tinker.ServiceClient, base_url=config.tinker_base_url, api_key=LOCAL_KEY)
    tokenizer = AutoTokenizer.from_pretrained(args.base_model)
    policies: Dict[str, TinkerPolicy] = {}

    def policy(name: str, client, path: str) -> TinkerPolicy:
        served = TinkerPolicy(sdk, name, args.base_model, args.max_token_length)
        served.load(tokenizer)
        served.swap(client, path)
        served.registered = True
        return served

    for index, (name, state) in enumerate(model_pairs(args.model)):
        if stopping.is_set():
            raise Stopped()
        say(f"loading {state} as {name}")
        training = await sdk.service.create_lora_training_client(base_model=args.base_model, rank=args.lora_rank)
        await load_state(training, state, optimizer=False)
        saved = await training.save_weights_for_sampler(f"served_{index}")
        policies[name] = policy(name, await sdk.sampling_client(saved.path), saved.path)
    if args.base:
        client = await sdk.service.create_sampling_client(base_model=args.base_model)
        policies[args.base] = policy(args.base, client, args.base_model)
    server = InferenceServer(create_app(policies), sock)
    task = asyncio.create_task(server.serve())
    say(f"serving {', '.join(policies)} on http://127.0.0.1:{args.port}/v1")
    await stopping.wait()
    server.stop()
    await task


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl_trainer.checkpoints", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--engine-python", required=True)
    parser.add_argument("--engine-dir", required=True)
    parser.add_argument("--base-model", required=True)
    parser.add_argument("--lora-rank", type=int, required=True)
    parser.add_argument("--backend-config", default="")
    parser.add_argument("--model", action="append", default=[], help="NAME=STATE_PATH (a save_state path)")
    parser.add_argument("--base", help="the name to serve the base model as")
    parser.add_argument("--max-token-length", type=int, default=2048)
    parser.add_argument("--engine-ready-timeout", type=float, default=300)
    parser.add_argument("--request-timeout", type=float, default=600)
    parser.add_argument("--exit-with-parent", action="store_true", help="stop when the process that started this one is gone")
    try:
        args = parser.parse_args(argv)
        pairs = model_pairs(args.model)
        if not pairs and not args.base:
            raise ValueError("name at least one --model or --base")
        config = backend_config(args.backend_config, len(pairs), args.lora_rank)
    except ValueError as e:
        say(str(e))
        return EXIT_USAGE
    except SystemExit as e:
        return EXIT_USAGE if e.code else 0

    from .server import bind_socket

    parent = os.getppid() if args.exit_with_parent else 0
    with bind_socket("127.0.0.1", 0) as probe:
        engine_port = probe.getsockname()[1]
    engine = start_engine(args, engine_port, config)
    loop = asyncio.new_event_loop()
    stopping = asyncio.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stopping.set)
    lost: List[str] = []
    watcher = loop.create_task(watch(parent, engine, stopping, lost))
    try:
        loop.run_until_complete(serve(args, engine, engine_port, stopping))
        if lost:
            say(f"failed: {lost[0]}")
            return EXIT_FAILED
        return 0
    except Stopped:
        if lost:
            say(f"failed: {lost[0]}")
            return EXIT_FAILED
        return 0
    except Exception as e:  # the engine or a checkpoint: said once, plainly
        say(f"failed: {type(e).__name__}: {e}")
        return EXIT_FAILED
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, RuntimeError):
            loop.run_until_complete(watcher)
        if engine.poll() is None:
            engine.terminate()
            try:
                engine.wait(timeout=20)
            except subprocess.TimeoutExpired:
                engine.kill()
        loop.close()


if __name__ == "__main__":
    sys.exit(main())
