"""Evaluation during training: before a new run's first step, every `tinker.eval_every` steps and
at the last, once the step's checkpoint is saved and served, the trainer pauses and asks rl to test that
checkpoint on the run's held-out prompts (`rl runs evaluate`, the same test `rl compare` runs). rl
answers with the `eval/*` numbers, which go into the step's row of metrics.jsonl and to WandB.

rl owns what is tested and how it is scored; the trainer owns only when. An evaluation that
fails is said and counted (`eval/failed`); training goes on.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from typing import Callable, Dict, List, Mapping, Optional

from .config import is_loopback_host

#: The JSON command line of `rl runs evaluate RUN_ID`, set by rl for the trainer it starts.
COMMAND_VARIABLE = "RL_EVALUATE_COMMAND"
#: At most this much of the evaluation's error output is quoted in the trainer's log.
QUOTED_CHARS = 600


def command_from(environ: Mapping[str, str] = os.environ) -> Optional[List[str]]:
    """The evaluation command rl handed over, or None (another launcher, an older rl)."""
    text = environ.get(COMMAND_VARIABLE)
    if not text:
        return None
    try:
        argv = json.loads(text)
    except ValueError:
        return None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a for a in argv):
        return None
    return argv


def loopback_url(host: str, port: int) -> Optional[str]:
    """Where rl reaches the trainer's server from the same machine: its own loopback address,
    or loopback for a server on every address; None for one bound elsewhere only."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    elif not is_loopback_host(host):
        return None
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/v1"


def is_due(step: int, total_steps: int, every: int, last_evaluated: int) -> bool:
    """Whether the checkpoint saved at `step` is evaluated: `every` steps after the last one
    evaluated, and always the last step's. Never with `every` 0."""
    if every <= 0:
        return False
    return step == total_steps or step - last_evaluated >= every


def metrics_of(answer: object) -> Dict[str, float]:
    """The finite numbers under `metrics` of rl's answer, by their `eval/*` names."""
    if not isinstance(answer, dict) or not isinstance(answer.get("metrics"), dict):
        return {}
    out = {}
    for name, value in answer["metrics"].items():
        if isinstance(name, str) and name.startswith("eval/") and isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(float(value)):
                out[name] = float(value)
    return out


def _last_json(text: str) -> object:
    """rl's answer: the whole output (rl prints JSON indented), else its last JSON line."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def _quoted(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= QUOTED_CHARS else "..." + flat[-QUOTED_CHARS:]


async def evaluate(
    command: List[str],
    step: int,
    base_url: str,
    model: str,
    timeout: float,
    say: Callable[[str], None],
) -> Dict[str, float]:
    """Runs the evaluation of the checkpoint served at `base_url` as `model`; its `eval/*`
    numbers, or `{"eval/failed": 1.0}` when it failed (said, with rl's reason)."""
    argv = [*command, "--step", str(step), "--base-url", base_url, "--model", model]
    say(f"step {step}: evaluating the checkpoint on held-out prompts")
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as e:
        say(f"step {step}: evaluation not started: {argv[0]}: {e.strerror or e}")
        return {"eval/failed": 1.0}
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except asyncio.TimeoutError:
        # SIGTERM first: rl then ends its test's processes.
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 20)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
        say(f"step {step}: evaluation cut after {timeout:.0f} s")
        return {"eval/failed": 1.0}
    except asyncio.CancelledError:
        process.terminate()
        raise
    answer = _last_json(out.decode("utf-8", "replace"))
    metrics = metrics_of(answer)
    if process.returncode != 0 or not metrics:
        reason = answer.get("error") if isinstance(answer, dict) else None
        reason = reason or _quoted(err.decode("utf-8", "replace")) or f"exit {process.returncode}"
        say(f"step {step}: evaluation failed: {_quoted(str(reason))}")
        return {"eval/failed": 1.0}
    message = answer.get("message") if isinstance(answer, dict) else None
    say(f"evaluated {message}" if isinstance(message, str) else f"step {step}: evaluated")
    return metrics
