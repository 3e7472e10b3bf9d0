"""How far the trained weights are from the sampler's and from the base model's, per step, and
the KL penalty to the base model (issue 43). Pure: no SDK, no I/O.

* The importance ratio of a trained token is exp(trainer logprob - sampler logprob): the
  trainer's logprob is forward_backward's (`loss_fn_outputs[i]["logprobs"]`, before the
  optimizer step), the sampler's the one the datum carries (clipped to [-20, 0], as the engine
  reads it). `train/ratio_mean` is its mean over the step's trained tokens.
* `train/clip_fraction` (ppo, cispo): the share of those tokens whose ratio lies outside the
  clip bounds in effect. They are known when the engine is rl's local one (skyrl-tx 0.3.0's own
  ppo clips at its fixed 0.8..1.2; ppo with the run's bounds and cispo go through rl's adapter,
  `losses.py`, at the run's bounds, else its defaults) or when the run sets both `clip_low` and
  `clip_high`; the hosted service's own defaults are not documented in its SDK (tinker
  0.38.0), so without both bounds there the fraction is not logged (said at start). With the
  adapter the trainer logprobs are its forward pass's (the weights the step trained).
* The KL penalty (`kl_coef`, as the Tinker cookbook's `incorporate_kl_penalty`): with
  d = logp - logp_base per trained token (logp the sampler's, logp_base the base weights'),
  each token's advantage gains kl_coef * (mean(d) - d), the mean over the step's trained
  tokens; `train/kl_base` is mean(d), the sampled-token estimate of KL(policy || base).
  The base logprobs are clipped to [-20, 0] as the sampler's are.
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .batch import LOGPROB_FLOOR, AlignedSequence

#: Set to `1` by rl for a trainer on its local engine (rl_python::LOCAL_ENGINE_VARIABLE).
LOCAL_ENGINE_VARIABLE = "RL_LOCAL_ENGINE"
CLIPPED_LOSSES = ("ppo", "cispo")

RATIO_MEAN = "train/ratio_mean"
CLIP_FRACTION = "train/clip_fraction"
KL_BASE = "train/kl_base"

Bounds = Tuple[float, float]


def clip_bounds(
    loss: str, clip_low: Optional[float], clip_high: Optional[float], local_engine: bool, local_clips: Mapping[str, Bounds]
) -> Tuple[Optional[Bounds], Optional[str]]:
    """The ratio bounds the loss is clipped at, else None and why they are not known (None
    too for a loss that clips nothing). On the local engine (`local_clips`: ppo's the engine's
    own, cispo's rl's adapter's) a bound the run sets replaces that loss's default there."""
    if loss not in CLIPPED_LOSSES:
        return None, None
    if local_engine:
        low, high = local_clips[loss]
        return (float(low if clip_low is None else clip_low), float(high if clip_high is None else clip_high)), None
    if clip_low is not None and clip_high is not None:
        return (float(clip_low), float(clip_high)), None
    return None, (
        f"no train/clip_fraction: loss {loss} clips at the engine's own bounds where clip_low or "
        "clip_high is not set, and the Tinker SDK (0.38.0) does not document the service's; set "
        "both to have it logged"
    )


def ratio_stats(
    sequences: Sequence[AlignedSequence], trainer_logprobs: Sequence[Sequence[float]], bounds: Optional[Bounds]
) -> Dict[str, float]:
    """`train/ratio_mean` over the trained tokens, and `train/clip_fraction` when `bounds` are
    known. Empty when no token is trained or the engine answered no logprobs."""
    ratios: List[float] = []
    for seq, trained in zip(sequences, trainer_logprobs):
        for target, sampled, is_trained in zip(trained, seq.logprobs, seq.trained):
            if is_trained and math.isfinite(target):
                # exp overflows past ~709: such a ratio is outside any bound anyway.
                ratios.append(math.exp(min(float(target) - sampled, 700.0)))
    if not ratios:
        return {}
    stats = {RATIO_MEAN: sum(ratios) / len(ratios)}
    if bounds is not None:
        low, high = bounds
        stats[CLIP_FRACTION] = sum(1 for r in ratios if r < low or r > high) / len(ratios)
    return stats


def kl_penalty(sequences: Sequence[AlignedSequence], base_logprobs: Sequence[Sequence[float]], kl_coef: float) -> Dict[str, float]:
    """`train/kl_base` of the step, and with `kl_coef` > 0 each trained token's advantage
    shaped in place. `base_logprobs[i]` is one logprob per token of sequence i (its inputs and
    its last target, 0.0 for the first), as `full_logprobs_from_prompt_logprobs` gives."""
    diffs: List[List[Optional[float]]] = []
    for seq, base in zip(sequences, base_logprobs):
        if len(base) != len(seq.target_tokens) + 1:
            raise ValueError(f"{len(base)} base logprobs for a sequence of {len(seq.target_tokens) + 1} tokens")
        diffs.append(
            [
                sampled - min(0.0, max(LOGPROB_FLOOR, float(b))) if is_trained else None
                for sampled, b, is_trained in zip(seq.logprobs, base[1:], seq.trained)
            ]
        )
    trained = [d for per_seq in diffs for d in per_seq if d is not None]
    if not trained:
        return {}
    mean = sum(trained) / len(trained)
    if kl_coef > 0.0:
        for seq, per_seq in zip(sequences, diffs):
            for j, d in enumerate(per_seq):
                if d is not None:
                    seq.advantages[j] += kl_coef * (mean - d)
    return {KL_BASE: mean}
