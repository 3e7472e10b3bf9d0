#!/usr/bin/env python3
"""What rl's trainer's per-step accounting (issue 34) costs, measured on a batch of a given shape.

Run with the Python of the test venv and rl's Python packages on the path:

    PYTHONPATH=crates/rl-python/python target/python-venv/bin/python \
        xtask/python/accounting_cost.py --groups 8 --group-size 8 \
        --prompt-tokens 30 --completion-tokens 16 [--iterations 1000] [--repeats 5] [--json-out FILE]

The trainer's functions are imported from rl_trainer, not copied, and called as
`Trainer.train_step` (loop.py) calls them once per step (the only lines restated here are the
three `time.monotonic()` readings `Tinker.train` takes around the engine's calls: it cannot be
called without an engine), on a run-api batch of `--groups`
groups of `--group-size` completions, each `--prompt-tokens` prompt tokens then
`--completion-tokens` completion tokens (every group trained: the most datums to count).

One step's accounting is, in the order train_step does it:
* the anatomy: `StepClock()`, `clock.add("wait", ...)`, the four `clock.part(...)` blocks
  (logprobs, rollouts, save, sampler_update) around nothing, the three `time.monotonic()`
  readings and the dict `Tinker.train` (engine.py) adds around forward_backward and
  optim_step, the two `clock.add` of their seconds, and `clock.metrics(tokens)`;
* the counting: `datum_tokens` for each rollout row (`rollout_rows` calls it per completion),
  `token_counts(prepared, sequences)`, the running totals' update and `metrics.update`;
* the writing: `json.dumps` of the accounting's keys on their own (the metrics row's as one
  object, each rollout row's `trained_tokens` as a one-key object): more than they add to
  the rows they share (the file writes and fsyncs happen with or without them).

Each part is timed over `--iterations` steps, `--repeats` times; the figure is the median
repeat (the lowest is printed beside it). Prints one JSON object (and writes it to --json-out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable, Dict, List

from rl_trainer.batch import PROMPT_MASK, aligned_sequences, datum_tokens, prepare_batch, token_counts
from rl_trainer.loop import StepClock
from rl_trainer.records import TOKEN_TOTALS, rollout_rows


def parse_args(argv: List[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--prompt-tokens", type=int, default=30)
    p.add_argument("--completion-tokens", type=int, default=16)
    p.add_argument("--iterations", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json-out")
    return p.parse_args(argv)


def batch_of(groups: int, size: int, prompt: int, completion: int) -> List[Dict[str, Any]]:
    """A run-api batch: tokens, masks (-100 over the prompt), distinct scores (no group is
    skipped) and the sampler's logprobs."""
    out = []
    for g in range(groups):
        tokens, masks, logprobs = [], [], []
        for i in range(size):
            seq = [(g * 131 + i * 17 + t) % 1000 + 1 for t in range(prompt + completion)]
            tokens.append(seq)
            masks.append([PROMPT_MASK] * prompt + seq[prompt:])
            logprobs.append([1.0] * prompt + [-0.5 - 0.01 * t for t in range(completion)])
        out.append({"tokens": tokens, "masks": masks, "scores": [float(i) for i in range(size)], "inference_logprobs": logprobs})
    return out


def median_and_best(run: Callable[[], None], iterations: int, repeats: int) -> Dict[str, float]:
    """Seconds per call of `run`: the median and the lowest of `repeats` timings of
    `iterations` calls each."""
    per_call = []
    for _ in range(repeats):
        began = time.perf_counter()
        for _ in range(iterations):
            run()
        per_call.append((time.perf_counter() - began) / iterations)
    return {"median": statistics.median(per_call), "best": min(per_call)}


def main(argv: List[str] | None = None) -> int:
    args = parse_args(argv)
    prepared = prepare_batch(batch_of(args.groups, args.group_size, args.prompt_tokens, args.completion_tokens), 1 << 20)
    sequences = aligned_sequences(prepared)
    if len(sequences) != args.groups * args.group_size:
        raise SystemExit(f"expected every completion trained, got {len(sequences)} datums")
    totals = dict.fromkeys(TOKEN_TOTALS, 0)
    tokens = token_counts(prepared, sequences)

    def anatomy() -> None:
        clock = StepClock()
        clock.add("wait", 0.25)
        for part in ("logprobs", "rollouts"):
            with clock.part(part):
                pass
        # Tinker.train's timing statements.
        started = time.monotonic()
        fb_done = time.monotonic()
        secs = {"forward_backward": fb_done - started, "optim": time.monotonic() - fb_done}
        for part in ("forward_backward", "optim"):
            clock.add(part, secs[part])
        for part in ("save", "sampler_update"):
            with clock.part(part):
                pass
        clock.metrics(tokens)

    def counting() -> None:
        for group in prepared.groups:
            for seq in group.sequences:
                datum_tokens(group, seq)
        counted = token_counts(prepared, sequences)
        metrics: Dict[str, Any] = {}
        metrics.update(counted)
        for key in TOKEN_TOTALS:
            totals[key] += counted[key[: -len("_total")]]
        metrics.update(totals)

    # What the accounting's keys add to the rows written: serialised on their own (the
    # metrics row's keys as a row of their own, each rollout row's `trained_tokens` as a
    # one-key object), which costs more than they add to the rows they share.
    clock = StepClock()
    metrics_keys = {**tokens, **totals, **clock.metrics(tokens)}
    rollout_keys = [{"trained_tokens": row["trained_tokens"]} for row in rollout_rows(prepared, lambda ids: "")]

    def writing() -> None:
        json.dumps(metrics_keys, ensure_ascii=False)
        for keys in rollout_keys:
            json.dumps(keys, ensure_ascii=False)

    parts = {
        "anatomy": median_and_best(anatomy, args.iterations, args.repeats),
        "counting": median_and_best(counting, args.iterations, args.repeats),
        "writing": median_and_best(writing, args.iterations, args.repeats),
    }
    report = {
        "shape": {
            "groups": args.groups,
            "group_size": args.group_size,
            "prompt_tokens": args.prompt_tokens,
            "completion_tokens": args.completion_tokens,
            "datums": len(sequences),
        },
        "iterations": args.iterations,
        "repeats": args.repeats,
        "parts": parts,
        "seconds_per_step": sum(p["median"] for p in parts.values()),
        "seconds_per_step_best": sum(p["best"] for p in parts.values()),
        "python": sys.version.split()[0],
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
