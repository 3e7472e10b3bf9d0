"""rl's loss adapter against a real local engine (skyrl-tx): from one saved start, one optimizer
step of the adapter's ppo at 0.8..1.2 leaves the same logprobs as the engine's own ppo, and
the adapter's cispo at 0..1e6 the same as its importance_sampling (both have gradient -r*A).
Adam's first step is nearly sign(gradient) per parameter, so what this tells apart is which
tokens pass a gradient and how they weigh against each other, not a common scale of all of
them; the control (the adapter's ppo at 0.9..1.1) must differ.

Not a unittest module (it needs the engine): the test `adapter::...` of rl-python's
integration tests starts the engine and runs this, then reads the JSON it prints:

    python tests/engine_adapter_check.py --base-url http://127.0.0.1:PORT --base-model DIR
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
from typing import Dict, List, Optional

import numpy as np
import tinker
from tinker import types as ttypes

from rl_trainer.batch import LOGPROB_FLOOR, AlignedSequence
from rl_trainer.engine import load_state, tensor_list, train_step
from rl_trainer.losses import Adapter

TIMEOUT = 600.0
LEARNING_RATE = 1e-2
PROMPT = 4
# The sampler's logprob is the start's plus these: ratios exp(-delta) of 1.65, 1.11, 0.95,
# 0.74, 0.55 and 1.35, on both sides of 0.8..1.2.
DELTAS = [-0.5, -0.1, 0.05, 0.3, 0.6, -0.3]
ADVANTAGES = [1.0, -1.0, 0.5, -0.5]


def tokens(i: int) -> List[int]:
    return [(7 + 37 * i + 11 * j) % 500 + 1 for j in range(PROMPT + 12)]


def forward_logprobs(training, sequences: List[List[int]]) -> List[List[float]]:
    datums = [
        ttypes.Datum(
            model_input=ttypes.ModelInput.from_ints(seq[:-1]),
            loss_fn_inputs={"target_tokens": np.asarray(seq[1:], dtype=np.int64)},
        )
        for seq in sequences
    ]
    result = training.forward(datums, "cross_entropy").result(timeout=TIMEOUT)
    return [tensor_list(o.get("logprobs")) for o in result.loss_fn_outputs]


def aligned(seqs: List[List[int]], start: List[List[float]]) -> List[AlignedSequence]:
    out = []
    for i, (seq, lps) in enumerate(zip(seqs, start)):
        trained = [j >= PROMPT - 1 for j in range(len(seq) - 1)]
        sampler = [
            min(0.0, max(LOGPROB_FLOOR, lp + DELTAS[j % len(DELTAS)])) if t else 0.0
            for j, (lp, t) in enumerate(zip(lps, trained))
        ]
        advantage = ADVANTAGES[i % len(ADVANTAGES)]
        out.append(
            AlignedSequence(
                group=0,
                index=i,
                input_tokens=seq[:-1],
                target_tokens=seq[1:],
                logprobs=sampler,
                advantages=[advantage if t else 0.0 for t in trained],
                trained=trained,
            )
        )
    return out


def one_step(training, start_path: str, sequences, loss: str, adapter: Optional[Adapter], seqs) -> Dict:
    load_state(training, start_path, optimizer=True).result(timeout=TIMEOUT)
    fb, _, _, adapted = asyncio.run(train_step(training, sequences, LEARNING_RATE, loss, None, adapter, TIMEOUT))
    if adapted is not None:
        loss_value = adapted.loss
    else:
        loss_value = float(sum(sum(tensor_list(o.get("elementwise_loss"))) for o in fb.loss_fn_outputs))
    return {"after": forward_logprobs(training, seqs), "loss": loss_value}


def max_difference(a: List[List[float]], b: List[List[float]]) -> float:
    return max(abs(x - y) for xs, ys in zip(a, b) for x, y in zip(xs, ys))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--base-model", required=True)
    args = parser.parse_args()
    service = tinker.ServiceClient(base_url=args.base_url, api_key="tml-local")
    training = service.create_lora_training_client(base_model=args.base_model, rank=8, seed=0).result(timeout=TIMEOUT)
    seqs = [tokens(i) for i in range(len(ADVANTAGES))]
    start_path = training.save_state("start").result(timeout=TIMEOUT).path
    start = forward_logprobs(training, seqs)
    sequences = aligned(seqs, start)
    runs = {
        "native_ppo": one_step(training, start_path, sequences, "ppo", None, seqs),
        "adapter_ppo": one_step(training, start_path, sequences, "ppo", Adapter("ppo", bounds=(0.8, 1.2)), seqs),
        "native_is": one_step(training, start_path, sequences, "importance_sampling", None, seqs),
        "adapter_cispo": one_step(training, start_path, sequences, "cispo", Adapter("cispo", bounds=(0.0, 1e6)), seqs),
        # The control: other bounds clip other tokens, and the step differs.
        "adapter_ppo_narrow": one_step(training, start_path, sequences, "ppo", Adapter("ppo", bounds=(0.9, 1.1)), seqs),
    }
    ratios = [math.exp(lp - q) for s, lps in zip(sequences, start) for lp, q, t in zip(lps, s.logprobs, s.trained) if t]
    report = {
        "tokens": len(ratios),
        "outside_ppo_clip": sum(1 for r in ratios if r < 0.8 or r > 1.2),
        "moved_ppo": max_difference(runs["native_ppo"]["after"], start),
        "moved_is": max_difference(runs["native_is"]["after"], start),
        "ppo_vs_is": max_difference(runs["native_ppo"]["after"], runs["native_is"]["after"]),
        "adapter_ppo_vs_native": max_difference(runs["adapter_ppo"]["after"], runs["native_ppo"]["after"]),
        "adapter_cispo_vs_is": max_difference(runs["adapter_cispo"]["after"], runs["native_is"]["after"]),
        "narrow_ppo_vs_native": max_difference(runs["adapter_ppo_narrow"]["after"], runs["native_ppo"]["after"]),
        "loss": {name: run["loss"] for name, run in runs.items()},
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
