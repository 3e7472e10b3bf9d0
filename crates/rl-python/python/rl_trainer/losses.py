"""rl's loss adapter: the losses rl's local engine (skyrl-tx 0.3.0) lacks or cannot configure,
trained exactly through the one it has (issue 43). Pure: no SDK, no I/O.

skyrl-tx 0.3.0's JAX backend computes `cross_entropy`, `importance_sampling` and `ppo` (its
clip fixed at 0.8..1.2, `loss_fn_config` never read). `cispo`, `dro`, and `ppo` with a run's
own `clip_low`/`clip_high` are linearised, the way Tinker's `forward_backward_custom` does a
custom loss, at the cost of one extra forward pass per step:

* a `forward` pass gives each token's trainer logprob lp (the weights the step then trains);
* the asked loss L's gradient per token, g = dL/dlp, is computed here at those lp;
* `importance_sampling` is sent with advantages A' = -g / r, r = exp(lp - q), q the sampler's
  logprob the datum carries (clipped to [-20, 0], as the engine reads it). Its per-token loss
  is -r*A', whose gradient in lp is -r*A' = g: the asked loss's, token by token. The engine's
  per-sequence normalisation (sum / max(sum(weights), 1e-9), all weights 1) is the same for
  every loss, so the step is the one the asked loss would give.

`cross_entropy` with signed weights would not do: its normaliser would be their signed sum.

Per token (r = exp(lp - q), A the advantage; Tinker's loss pages):
* ppo:   loss -min(r*A, clip(r, low, high)*A); g = -r*A where the unclipped term is the
         minimum (A > 0 and r <= high, or A < 0 and r >= low), else 0 (the clip binds);
* cispo: loss -sg(clip(r, low, high))*lp*A; g = -clip(r, low, high)*A;
* dro:   loss -(lp*A - beta/2*(lp - q)^2); g = -(A - beta*(lp - q)), on completion tokens
         only: a prompt position carries no sampler logprob (rl's datum puts 0.0 there).

A ratio exactly at a bound counts as inside. `train/loss` of an adapted step is the sum over
its tokens of the asked loss's per-token value at the forward pass's logprobs: what Tinker's
`loss:sum` means, and what rl logs for skyrl-tx's own losses (the sum of their
`elementwise_loss`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .batch import AlignedSequence
from .divergence import Bounds

#: The engine's loss the adapter sends.
SURROGATE_LOSS = "importance_sampling"
ADAPTED_LOSSES = ("ppo", "cispo", "dro")

#: Logged as 1 on a step whose train/loss the adapter computed.
LOSS_FROM_ADAPTER = "train/loss_from_adapter"
#: Logged on a step with tokens whose gradient could not be carried (see LOG_RATIO_FLOOR).
DROPPED_TOKENS = "train/adapter_dropped_tokens"

#: Below this lp - q (a ratio under e^-60), A' = -g/r no longer fits the engine's float32 with
#: room to spare: such a token (or one whose logprob is not finite) is sent with A' = 0 and
#: counted in DROPPED_TOKENS.
LOG_RATIO_FLOOR = -60.0


@dataclass(frozen=True)
class LocalDefaults:
    """What holds on the local engine where the run sets nothing (the contract's constants):
    skyrl-tx's own ppo clip, and rl's adapter's cispo clip and dro beta."""

    ppo_clip: Bounds
    cispo_clip: Bounds
    dro_beta: float

    @staticmethod
    def of(constants: Mapping[str, Any]) -> "LocalDefaults":
        return LocalDefaults(
            ppo_clip=tuple(float(x) for x in constants["local_engine_ppo_clip"]),  # type: ignore[arg-type]
            cispo_clip=tuple(float(x) for x in constants["local_adapter_cispo_clip"]),  # type: ignore[arg-type]
            dro_beta=float(constants["local_adapter_dro_beta"]),
        )

    @property
    def clips(self) -> Dict[str, Bounds]:
        return {"ppo": self.ppo_clip, "cispo": self.cispo_clip}


@dataclass(frozen=True)
class Adapter:
    """The loss the adapter trains, with the bounds or beta it applies."""

    loss: str
    bounds: Optional[Bounds] = None  # ppo, cispo
    beta: Optional[float] = None  # dro

    def describe(self) -> str:
        what = f"beta {self.beta:g}" if self.loss == "dro" else f"clip {self.bounds[0]:g}..{self.bounds[1]:g}"
        return (
            f"loss {self.loss} ({what}) is trained through rl's loss adapter on the local engine "
            f"(skyrl-tx's {SURROGATE_LOSS} with per-token advantages; one extra forward pass per step)"
        )


def local_adapter(
    loss: str, clip_low: Optional[float], clip_high: Optional[float], dro_beta: Optional[float],
    bounds: Optional[Bounds], defaults: LocalDefaults,
) -> Optional[Adapter]:
    """The adapter a run on the local engine needs, None when skyrl-tx computes the loss
    itself (importance_sampling; ppo without clip_low and clip_high). `bounds` are the ones
    `divergence.clip_bounds` says are in effect: the one rule for them."""
    if loss == "cispo" or (loss == "ppo" and (clip_low is not None or clip_high is not None)):
        if bounds is None:
            raise ValueError(f"loss {loss} on the local engine needs its clip bounds")
        return Adapter(loss, bounds=(float(bounds[0]), float(bounds[1])))
    if loss == "dro":
        return Adapter(loss, beta=float(dro_beta if dro_beta is not None else defaults.dro_beta))
    return None


def ratio(lp: float, q: float) -> float:
    # exp overflows past ~709; lp <= 0 and q >= -20 keep it far below anyway.
    return math.exp(min(lp - q, 700.0))


def token_terms(adapter: Adapter, lp: float, q: float, a: float) -> Tuple[float, float]:
    """(the loss, its gradient in lp) of one trained token under the adapter's loss."""
    if adapter.loss == "dro":
        beta = float(adapter.beta)
        d = lp - q
        return -(lp * a - 0.5 * beta * d * d), -(a - beta * d)
    low, high = adapter.bounds
    r = ratio(lp, q)
    clipped = min(max(r, low), high)
    if adapter.loss == "cispo":
        return -clipped * lp * a, -clipped * a
    if adapter.loss == "ppo":
        binds = (a > 0.0 and r > high) or (a < 0.0 and r < low)
        return -min(r * a, clipped * a), 0.0 if binds or a == 0.0 else -r * a
    raise ValueError(f"the adapter has no loss {adapter.loss!r}")


@dataclass
class Linearised:
    """One step's asked loss as importance_sampling advantages."""

    advantages: List[List[float]] = field(default_factory=list)  # A' per sequence, per target
    logprobs: List[List[float]] = field(default_factory=list)  # the forward pass's, per sequence
    loss: float = 0.0  # the asked loss's sum over the step's tokens
    dropped: int = 0

    def metrics(self) -> Dict[str, float]:
        out: Dict[str, float] = {LOSS_FROM_ADAPTER: 1}
        if self.dropped:
            out[DROPPED_TOKENS] = self.dropped
        return out


def linearise(adapter: Adapter, sequences: Sequence[AlignedSequence], logprobs: Sequence[Sequence[float]]) -> Linearised:
    """A' = -g/r per trained target (0 elsewhere) from the forward pass's `logprobs` (one per
    target of each sequence), and the asked loss's value there."""
    if len(logprobs) != len(sequences):
        raise ValueError(f"the forward pass answered {len(logprobs)} sequences for {len(sequences)}")
    out = Linearised(logprobs=[list(map(float, lps)) for lps in logprobs])
    for seq, lps in zip(sequences, out.logprobs):
        if len(lps) != len(seq.target_tokens):
            raise ValueError(f"the forward pass answered {len(lps)} logprobs for {len(seq.target_tokens)} targets")
        sent = [0.0] * len(lps)
        for j, (lp, q, a, trained) in enumerate(zip(lps, seq.logprobs, seq.advantages, seq.trained)):
            if not trained:
                continue
            loss, gradient = token_terms(adapter, lp, q, a)
            out.loss += loss
            if not math.isfinite(lp) or lp - q < LOG_RATIO_FLOOR:
                out.dropped += 1
                continue
            sent[j] = -gradient / ratio(lp, q)
        out.advantages.append(sent)
    return out
