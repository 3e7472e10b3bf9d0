"""A run-api batch turned into what one training step needs: advantages, aligned sequences,
statistics. Pure: no SDK, no I/O, so every rule here is unit-tested.

A batch is a list of groups as atroposlib's run-api hands them out: `tokens`, `masks` (-100 at
prompt positions, the token id elsewhere), `scores`, and optionally `inference_logprobs` (the
sampler's logprob of each token; atroposlib's ManagedServer puts 1.0 at prompt positions) and
`overrides` (per completion; `set_advantage_to_zero`).

A group may also carry `group_overrides` (run-api passes it through) with rl_verifiers'
`rollout_of` (the rollout each completion is a branch of: a multi-turn rollout may give
several) and `rewards` ({name: [value per rollout]}, each named reward/metric).

Rules:
* advantage = (score - group mean) / max(group std, 1.0) (the run's `advantage_norm` may
  choose another divisor, and its `truncated` another score for a truncated completion or
  none of its tokens trained: `shaping.py`): centred, never amplified; with
  `rollout_of`, mean and std are over the rollouts (one score each, which all its completions
  carry), so a rollout of three branches does not weigh three times;
  `overrides[i].set_advantage_to_zero` zeroes completion i;
* a group is skipped when it is malformed (lengths disagree, `rollout_of`/`rewards` do not fit
  the completions), stale (one completion proven sampled more than the run's
  `max_steps_off_policy` optimizer steps ago: `samples.py`), empty (no completion token to
  learn from) or when all its advantages are 0 (nothing to learn); each reason is counted;
* per completion, targets are tokens[1:] for inputs tokens[:-1]; a target is trained on when
  its mask is not -100; the sampler logprob and the advantage are 0.0 at other positions;
  real logprobs are clipped to [-20, 0];
* sequences longer than the trainer's limit are cut to it;
* each named reward is logged as `reward/<name>`: per step, the mean over the groups that carry
  it of the group's mean over its rollouts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .samples import Provenance
from .shaping import Shaping

PROMPT_MASK = -100
LOGPROB_FLOOR = -20.0
ZERO = 1e-12

SKIP_MALFORMED = "malformed"
SKIP_EMPTY = "empty"
SKIP_ZERO_ADVANTAGE = "zero_advantage"
SKIP_TRUNCATED = "truncated"  # every completion with tokens to learn from was masked as truncated
SKIP_STALE = "stale"  # a completion was sampled more than `max_steps_off_policy` steps ago

#: A step's mean reward (of its groups' means); each named reward is `reward/<name>` beside it.
REWARD_MEAN = "reward/mean"


def named_reward_key(name: str) -> str:
    """`reward/<name>`; a reward named `mean` must not take rl's own `reward/mean`."""
    key = f"reward/{name}"
    return f"{REWARD_MEAN}_named" if key == REWARD_MEAN else key


# --------------------------------------------------------------------------- advantages


def group_advantages(
    scores: Sequence[float],
    overrides: Optional[Sequence[Any]] = None,
    rollout_of: Optional[Sequence[int]] = None,
    shaping: Shaping = Shaping(),
) -> List[float]:
    """(score - mean) / max(std, 1) per completion (or the divisor `shaping` chooses), with
    `set_advantage_to_zero` honoured. With `rollout_of` (completion -> rollout, its completions
    sharing one score, as `read_group_overrides` checks), mean and std are over the rollouts'
    scores."""
    if not scores:
        return []
    values = [float(s) for s in scores]
    population = rollout_scores(values, rollout_of) if rollout_of is not None else values
    mean = sum(population) / len(population)
    std = math.sqrt(sum((v - mean) ** 2 for v in population) / len(population))
    scale = shaping.scale(std)
    advantages = [(v - mean) / scale for v in values]
    for i, override in enumerate(overrides or []):
        if i < len(advantages) and isinstance(override, dict) and override.get("set_advantage_to_zero"):
            advantages[i] = 0.0
    return advantages


def rollout_scores(scores: Sequence[float], rollout_of: Sequence[int]) -> List[float]:
    """One score per rollout that has completions (the first of its completions' scores)."""
    first: Dict[int, float] = {}
    for score, rollout in zip(scores, rollout_of):
        first.setdefault(rollout, float(score))
    return list(first.values())


class BadGroupOverrides(ValueError):
    """`group_overrides.rollout_of` / `.rewards` do not fit the group (the reason)."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_group_overrides(group_overrides: Any, scores: Sequence[float]) -> Tuple[Optional[List[int]], Dict[str, List[Optional[float]]]]:
    """(`rollout_of` or None, `rewards` or {}) of a group, checked against its `scores`.
    Rollouts are numbered from 0; one without completions (it failed) may still have named
    values. A named value may be null (not reported for that rollout). Raises
    BadGroupOverrides."""
    if not isinstance(group_overrides, dict):
        return None, {}
    rollout_of = group_overrides.get("rollout_of")
    if rollout_of is not None:
        if not isinstance(rollout_of, list) or not all(_is_int(r) and r >= 0 for r in rollout_of):
            raise BadGroupOverrides("group_overrides.rollout_of is not a list of rollout indices (integers >= 0)")
        if len(rollout_of) != len(scores):
            raise BadGroupOverrides(f"group_overrides.rollout_of has {len(rollout_of)} entries for {len(scores)} completions")
        seen: Dict[int, float] = {}
        for rollout, score in zip(rollout_of, scores):
            if rollout in seen and abs(seen[rollout] - score) > 1e-9 * max(1.0, abs(score)):
                raise BadGroupOverrides(
                    f"the completions of rollout {rollout} carry different scores ({seen[rollout]:g}, {score:g})"
                )
            seen.setdefault(rollout, score)
    rollouts = max(rollout_of) + 1 if rollout_of else len(scores)
    rewards = group_overrides.get("rewards")
    if rewards is None:
        return rollout_of, {}
    if not isinstance(rewards, dict):
        raise BadGroupOverrides("group_overrides.rewards is not an object of name -> [value per rollout]")
    named: Dict[str, List[Optional[float]]] = {}
    for name, values in rewards.items():
        if not name or not isinstance(values, list) or not all(
            v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values
        ):
            raise BadGroupOverrides(f"group_overrides.rewards[{name!r}] is not a list of numbers (or nulls)")
        if len(values) < rollouts or (rollout_of is None and len(values) != rollouts):
            raise BadGroupOverrides(
                f"group_overrides.rewards[{name!r}] has {len(values)} values for {rollouts} rollouts"
            )
        named[name] = [None if v is None else float(v) for v in values]
    if rollout_of is not None and len({len(v) for v in named.values()}) > 1:
        raise BadGroupOverrides("group_overrides.rewards' lists differ in length (one value per rollout each)")
    return rollout_of, named


def named_means(rewards: Dict[str, List[Optional[float]]]) -> Dict[str, float]:
    """Each name's mean over the rollouts that report a finite value for it."""
    means = {}
    for name, values in rewards.items():
        finite = [v for v in values if v is not None and math.isfinite(v)]
        if finite:
            means[name] = sum(finite) / len(finite)
    return means


def all_zero(values: Sequence[float]) -> bool:
    return all(abs(v) <= ZERO for v in values)


# --------------------------------------------------------------------------- preparation


@dataclass
class PreparedSequence:
    """One completion, cut to the trainer's limit. `logprobs` has one entry per token (the
    sampler's logprob of that token; anything at prompt positions) or is None until computed."""

    group: int
    index: int
    tokens: List[int]
    masks: List[int]
    advantage: float
    logprobs: Optional[List[float]]
    truncated: bool
    # The conversation the environment sent with it (ScoredData's `messages`: chat messages,
    # tool calls included), kept for the rollouts file only; None when it sent none.
    messages: Optional[List[Dict[str, Any]]] = None
    # Not trained: truncated, and the run's `truncated` is `mask`.
    masked: bool = False
    # Its advantage came from another score than the environment's: the run's `truncated`
    # (`zero_reward`, `penalty`) lowered it.
    penalised: bool = False
    # Optimizer steps at least between its sampler's weights and the trained ones (`samples.py`);
    # None: unknown (or not measured).
    age: Optional[int] = None

    def has_targets(self) -> bool:
        return any(m != PROMPT_MASK for m in self.masks[1:])

    def trains(self) -> bool:
        return self.has_targets() and not self.masked

    def prompt_length(self) -> int:
        """Tokens before the first completion token (all of them when there is none)."""
        for i, m in enumerate(self.masks):
            if m != PROMPT_MASK:
                return i
        return len(self.masks)


@dataclass
class PreparedGroup:
    index: int
    scores: List[float]
    advantages: List[float]
    sequences: List[PreparedSequence]
    skip: Optional[str] = None
    problem: Optional[str] = None  # why a group is malformed
    recomputed: bool = False  # its logprobs came from compute_logprobs, not the batch
    rollout_of: Optional[List[int]] = None  # the rollout of each completion (group_overrides)
    named: Dict[str, float] = field(default_factory=dict)  # each named reward's mean over rollouts

    @property
    def mean(self) -> Optional[float]:
        """Over the rollouts (one score each) when the completions say whose they are."""
        values = rollout_scores(self.scores, self.rollout_of) if self.rollout_of is not None else self.scores
        return sum(values) / len(values) if values else None


@dataclass
class PreparedBatch:
    groups: List[PreparedGroup]
    completions: int = 0
    truncated: int = 0

    def trained_groups(self) -> List[PreparedGroup]:
        return [g for g in self.groups if g.skip is None]

    def skipped(self, reason: Optional[str] = None) -> int:
        return sum(1 for g in self.groups if g.skip is not None and (reason is None or g.skip == reason))

    def truncation_stats(self) -> Dict[str, float]:
        """`train/truncated_share` of the completions, the share masked for it, and the share
        whose score the run's `truncated` lowered (`train/penalised_share`)."""
        if not self.completions:
            return {}
        sequences = [s for g in self.groups for s in g.sequences]
        masked = sum(1 for s in sequences if s.masked)
        penalised = sum(1 for s in sequences if s.penalised)
        return {
            "train/truncated_share": self.truncated / self.completions,
            "train/masked_share": masked / self.completions,
            "train/penalised_share": penalised / self.completions,
        }

    def sequences_missing_logprobs(self) -> List[PreparedSequence]:
        return [s for g in self.trained_groups() for s in g.sequences if s.logprobs is None]

    def reward_mean(self) -> Optional[float]:
        """Mean of the group means, skipped groups included (those with scores)."""
        means = [g.mean for g in self.groups if g.mean is not None]
        return sum(means) / len(means) if means else None

    def named_reward_means(self) -> Dict[str, float]:
        """`reward/<name>`: each named reward's mean over the groups that carry it (of their
        means over rollouts), skipped groups included as in `reward_mean`. A name that would
        take the key of rl's own `reward/mean` is logged as `reward/mean_named`."""
        per_name: Dict[str, List[float]] = {}
        for group in self.groups:
            for name, value in group.named.items():
                per_name.setdefault(name, []).append(value)
        return {named_reward_key(name): sum(v) / len(v) for name, v in per_name.items()}


def _int_list(value: Any) -> Optional[List[int]]:
    if not isinstance(value, list):
        return None
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
            return None
        out.append(int(v))
    return out


def _float_list(value: Any) -> Optional[List[float]]:
    if not isinstance(value, list):
        return None
    out = []
    for v in value:
        if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        out.append(float(v))
    return out


def _message_lists(value: Any, count: int) -> List[Optional[List[Dict[str, Any]]]]:
    """ScoredData's `messages` (one conversation per completion) as a list of `count`: a
    conversation that is no list of message objects is None, as are all when they do not line
    up with the completions (what to show is never guessed)."""
    if not isinstance(value, list) or len(value) != count:
        return [None] * count
    return [m if isinstance(m, list) and all(isinstance(x, dict) for x in m) else None for m in value]


def _usable_logprobs(logprobs: Optional[List[float]], masks: List[int]) -> bool:
    """Sampler logprobs line up with the tokens and hold a real value (<= 0, finite) at every
    completion position (ManagedServer pads missing ones with the 1.0 prompt sentinel)."""
    if logprobs is None or len(logprobs) != len(masks):
        return False
    for lp, m in zip(logprobs, masks):
        if m != PROMPT_MASK and (not math.isfinite(lp) or lp > 0.0):
            return False
    return True


def _malformed(index: int, scores: List[float], why: str) -> PreparedGroup:
    return PreparedGroup(index=index, scores=scores, advantages=[], sequences=[], skip=SKIP_MALFORMED, problem=why)


def last_completion_run(tokens: Sequence[int], masks: Sequence[int]) -> List[int]:
    """The tokens of the last run of completion positions (the last turn sampled)."""
    end = len(masks)
    while end > 0 and masks[end - 1] == PROMPT_MASK:
        end -= 1
    start = end
    while start > 0 and masks[start - 1] != PROMPT_MASK:
        start -= 1
    return list(tokens[start:end])


def prepare_group(
    index: int, group: Any, max_len: int, shaping: Shaping = Shaping(), provenance: Optional[Provenance] = None
) -> PreparedGroup:
    if not isinstance(group, dict):
        return _malformed(index, [], f"a group is a {type(group).__name__}, not an object")
    scores = _float_list(group.get("scores"))
    if scores is None:
        return _malformed(index, [], "scores is not a list of numbers")
    if not all(math.isfinite(score) for score in scores):
        # A NaN advantage would reach the optimizer and poison every weight it touches.
        return _malformed(index, scores, "a score is NaN or infinite")
    tokens = group.get("tokens") or []
    masks = group.get("masks") or []
    if not isinstance(tokens, list) or not isinstance(masks, list):
        return _malformed(index, scores, "tokens/masks are not lists")
    if len(tokens) != len(scores) or len(masks) != len(scores):
        return _malformed(
            index, scores, f"{len(tokens)} token lists, {len(masks)} mask lists, {len(scores)} scores"
        )
    message_lists = _message_lists(group.get("messages"), len(scores))
    logprob_lists = group.get("inference_logprobs")
    if not isinstance(logprob_lists, list) or len(logprob_lists) != len(scores):
        logprob_lists = [None] * len(scores)
    overrides = group.get("overrides") if isinstance(group.get("overrides"), list) else None
    try:
        rollout_of, rewards = read_group_overrides(group.get("group_overrides"), scores)
    except BadGroupOverrides as e:
        return _malformed(index, scores, str(e))

    sequences = []
    for i, (tok, msk, lps, msgs) in enumerate(zip(tokens, masks, logprob_lists, message_lists)):
        tok = _int_list(tok)
        msk = _int_list(msk)
        if tok is None or msk is None or len(tok) != len(msk):
            return _malformed(index, scores, f"completion {i}: tokens and masks differ in length or type")
        lps = _float_list(lps)
        if not _usable_logprobs(lps, msk):
            lps = None
        # One look-up in the sampler's memory: whether it stopped this sample at its max
        # tokens, and how many steps ago it was drawn.
        drawn = provenance.memory.find(last_completion_run(tok, msk)) if provenance is not None else None
        truncated = len(tok) > max_len or (drawn is not None and drawn.length_stopped)
        if len(tok) > max_len:
            tok, msk = tok[:max_len], msk[:max_len]
            lps = lps[:max_len] if lps is not None else None
        sequences.append(
            PreparedSequence(
                group=index,
                index=i,
                tokens=tok,
                masks=msk,
                advantage=0.0,
                logprobs=lps,
                truncated=truncated,
                messages=msgs,
                masked=not shaping.trains(truncated),
                age=provenance.age(drawn) if provenance is not None else None,
            )
        )
    # The scores the advantages come from (the run's `truncated`); the group's own (logged as
    # its reward) stay as the environment gave them.
    shaped = [shaping.score(score, len(seq.tokens), seq.truncated, max_len) for score, seq in zip(scores, sequences)]
    advantages = group_advantages(shaped, overrides, rollout_of, shaping)
    for seq, advantage, score, used in zip(sequences, advantages, scores, shaped):
        seq.advantage = advantage
        seq.penalised = used < score

    prepared = PreparedGroup(
        index=index,
        scores=scores,
        advantages=advantages,
        sequences=sequences,
        rollout_of=rollout_of,
        named=named_means(rewards),
    )
    if provenance is not None and provenance.stale(s.age for s in sequences):
        prepared.skip = SKIP_STALE
    elif not sequences or not any(s.has_targets() for s in sequences):
        prepared.skip = SKIP_EMPTY
    elif not any(s.trains() for s in sequences):
        prepared.skip = SKIP_TRUNCATED
    elif all_zero([s.advantage for s in sequences if s.trains()]):
        prepared.skip = SKIP_ZERO_ADVANTAGE
    return prepared


def prepare_batch(
    batch: Any, max_len: int, shaping: Shaping = Shaping(), provenance: Optional[Provenance] = None
) -> PreparedBatch:
    """Advantages and cut sequences for every group of a run-api batch; with `provenance`,
    length stops and ages read from the trainer's sampler memory, stale groups dropped."""
    groups = [
        prepare_group(i, g, max_len, shaping, provenance) for i, g in enumerate(batch if isinstance(batch, list) else [])
    ]
    prepared = PreparedBatch(groups=groups)
    prepared.completions = sum(len(g.get("tokens") or []) for g in batch if isinstance(g, dict)) if isinstance(batch, list) else 0
    prepared.truncated = sum(1 for g in groups for s in g.sequences if s.truncated)
    return prepared


def full_logprobs_from_prompt_logprobs(values: Sequence[Optional[float]], length: int) -> List[float]:
    """compute_logprobs' answer as one logprob per token (0.0 where there is none).

    Hosted Tinker answers one value per token, None for the first (nothing predicts it);
    skyrl-tx 0.3.0 answers length - 1 values, leaving the first token out."""
    values = list(values)
    if len(values) == length - 1:
        values = [None] + values
    if len(values) != length:
        raise ValueError(f"compute_logprobs answered {len(values)} values for {length} tokens")
    return [float(v) if v is not None else 0.0 for v in values]


# --------------------------------------------------------------------------- datums


@dataclass
class AlignedSequence:
    """Model input and per-target loss inputs of one completion (plain lists, no tensors)."""

    group: int
    index: int
    input_tokens: List[int]
    target_tokens: List[int]
    logprobs: List[float]
    advantages: List[float]
    trained: List[bool] = field(default_factory=list)  # target positions that are completion tokens

    def sampler_logprobs(self) -> List[float]:
        return [lp for lp, t in zip(self.logprobs, self.trained) if t]


def align(sequence: PreparedSequence) -> AlignedSequence:
    """Targets tokens[1:] for inputs tokens[:-1]; logprob and advantage at completion targets,
    0.0 at prompt targets; logprobs clipped to [-20, 0]."""
    if sequence.logprobs is None:
        raise ValueError(f"group {sequence.group} completion {sequence.index} has no sampler logprobs")
    tokens, masks, lps = sequence.tokens, sequence.masks, sequence.logprobs
    trained = [m != PROMPT_MASK for m in masks[1:]]
    logprobs = [min(0.0, max(LOGPROB_FLOOR, lp)) if t else 0.0 for lp, t in zip(lps[1:], trained)]
    advantages = [sequence.advantage if t else 0.0 for t in trained]
    return AlignedSequence(
        group=sequence.group,
        index=sequence.index,
        input_tokens=list(tokens[:-1]),
        target_tokens=list(tokens[1:]),
        logprobs=logprobs,
        advantages=advantages,
        trained=trained,
    )


def aligned_sequences(prepared: PreparedBatch) -> List[AlignedSequence]:
    """Every completion of the trained groups that has something to learn from."""
    return [align(s) for g in prepared.trained_groups() for s in g.sequences if s.trains()]


def datum_tokens(group: PreparedGroup, sequence: PreparedSequence) -> int:
    """The tokens of `sequence`'s datum (its model input: every token but the last, as
    `align` cuts it), or 0 when it is not trained: the same rule as `aligned_sequences`, per
    completion, so the rollout rows can say it before the datums exist."""
    return len(sequence.tokens) - 1 if group.skip is None and sequence.trains() else 0


# --------------------------------------------------------------------------- statistics


def summary(values: Sequence[float], suffix: str = "") -> Dict[str, float]:
    """logprobs/{mean,std,min,p50}{suffix}; empty when there are no values."""
    if not values:
        return {}
    arr = np.asarray(values, dtype=np.float64)
    return {
        f"logprobs/mean{suffix}": float(arr.mean()),
        f"logprobs/std{suffix}": float(arr.std()),
        f"logprobs/min{suffix}": float(arr.min()),
        f"logprobs/p50{suffix}": float(np.percentile(arr, 50)),
    }


def advantage_stats(prepared: PreparedBatch) -> Dict[str, float]:
    """advantages/{mean,std,sum} over the completions of trained groups; omitted when their
    spread is nil (every group scored alike: GRPO learns nothing)."""
    values = [s.advantage for g in prepared.trained_groups() for s in g.sequences if s.trains()]
    if not values:
        return {}
    arr = np.asarray(values, dtype=np.float64)
    if float(arr.std()) <= 1e-6:
        return {}
    return {
        "advantages/mean": float(arr.mean()),
        "advantages/std": float(arr.std()),
        "advantages/sum": float(arr.sum()),
    }


def training_logprobs(sequences: Sequence[AlignedSequence], outputs: Sequence[Sequence[float]]) -> List[float]:
    """The trainer's logprobs (forward_backward's loss_fn_outputs[i]["logprobs"]) at the
    completion targets of each sequence."""
    values: List[float] = []
    for seq, out in zip(sequences, outputs):
        for lp, t in zip(out, seq.trained):
            if t:
                values.append(float(lp))
    return values


def token_counts(prepared: PreparedBatch, sequences: Sequence[AlignedSequence]) -> Dict[str, int]:
    """tokens/{prompt,sampled,trained} of one step. Prompt and sampled: every completion the
    batch holds, skipped groups included (they were sampled and paid for), as cut to the
    trainer's limit, split at the first completion token as the rollout rows split them (a
    malformed group's completions cannot be read, so count nothing). Trained: the model-input
    tokens of the datums `sequences` become."""
    prompt = sampled = 0
    for group in prepared.groups:
        for seq in group.sequences:
            cut = seq.prompt_length()
            prompt += cut
            sampled += len(seq.tokens) - cut
    trained = sum(len(seq.input_tokens) for seq in sequences)
    return {"tokens/prompt": prompt, "tokens/sampled": sampled, "tokens/trained": trained}


def batch_counts(prepared: PreparedBatch, datums: int) -> Dict[str, int]:
    return {
        "batch/groups": len(prepared.groups),
        "batch/skipped_groups": prepared.skipped(),
        "batch/zero_advantage_groups": prepared.skipped(SKIP_ZERO_ADVANTAGE),
        "batch/empty_groups": prepared.skipped(SKIP_EMPTY),
        "batch/malformed_groups": prepared.skipped(SKIP_MALFORMED),
        "batch/truncated_groups": prepared.skipped(SKIP_TRUNCATED),
        "batch/completions": prepared.completions,
        "batch/truncated_completions": prepared.truncated,
        "batch/datums": datums,
    }


#: How stale a step's trained samples are, whatever the run's bound: the mean and the largest
#: proven age (optimizer steps between the weights that drew a completion and those it trains).
OFF_POLICY_STEPS = "train/off_policy_steps"
OFF_POLICY_STEPS_MAX = "train/off_policy_steps_max"


def off_policy_steps(prepared: PreparedBatch) -> Dict[str, float]:
    """The ages of the completions a step trains, over those whose age is known (none known:
    nothing logged, never a zero that was not seen)."""
    ages = trained_ages(prepared)
    if not ages:
        return {}
    return {OFF_POLICY_STEPS: sum(ages) / len(ages), OFF_POLICY_STEPS_MAX: max(ages)}


def trained_ages(prepared: PreparedBatch) -> List[int]:
    """The proven ages of the completions of the groups the step trains."""
    return [s.age for g in prepared.trained_groups() for s in g.sequences if s.age is not None]


def off_policy_counts(prepared: PreparedBatch) -> Dict[str, int]:
    """The run's off-policy bound at work: groups dropped as stale, completions whose age is
    unknown (kept), and the largest proven age of a trained group's completion (left out when
    none is known). Malformed groups have no completions to count."""
    counts = {
        "batch/stale_groups": prepared.skipped(SKIP_STALE),
        "batch/unknown_age_completions": sum(1 for g in prepared.groups for s in g.sequences if s.age is None),
    }
    ages = trained_ages(prepared)
    if ages:
        counts["batch/max_age_steps"] = max(ages)
    return counts
