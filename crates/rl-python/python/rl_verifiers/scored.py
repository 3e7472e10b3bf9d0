"""A group's rollouts turned into what leaves the runner: a run-api group (atroposlib's
`ScoredData` keys) in a run, a line of `--env.data_path_to_save_groups` in a pre-flight.

A run's group: every sampled branch (`Sequence`) of every rollout that did not fail is one
entry: `tokens`, `masks`, `inference_logprobs`, `messages`, and `scores` = its rollout's reward;
`group_overrides` = {"rollout_of": [rollout index per entry], "rewards": {name: [value per
rollout]}} (rollouts numbered from 0 in the group's order, a failed one's values null), which
rl's trainer reads (`rl_trainer.batch.read_group_overrides`) to compute advantages over
rollouts, not branches, and to log each named reward.

A pre-flight's group: one entry per rollout that did not fail (`scores`, `messages`: the
conversation), and the same `group_overrides`.

Pure: no verifiers, no network."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from rl_verifiers.adapter import PROMPT_LOGPROB, PROMPT_MASK, Rollout, Sequence


@dataclass
class Outcome:
    """What a group of rollouts gave: the group to send or write (None: no rollout usable), and
    the errors seen (one message per failed or unusable rollout)."""

    group: Optional[Dict[str, Any]]
    errors: List[str] = field(default_factory=list)


def run_group(rollouts: List[Rollout], token_limit: Optional[int]) -> Outcome:
    """A run's group. A sequence is cut to below `token_limit` (atroposlib drops a group with a
    sequence as long as the limit; a completion cut short still trains on what it sampled); a
    rollout without a sampled token left (no token ids came back, or its prompt alone reaches
    the limit) is unusable and said so."""
    errors: List[str] = []
    tokens: List[List[int]] = []
    masks: List[List[int]] = []
    logprobs: List[List[float]] = []
    messages: List[List[Dict[str, Any]]] = []
    scores: List[float] = []
    rollout_of: List[int] = []
    usable: List[bool] = []
    for index, rollout in enumerate(rollouts):
        if rollout.error is not None:
            errors.append(rollout.error)
            usable.append(False)
            continue
        problem = next(filter(None, map(sequence_problem, rollout.sequences)), None)
        kept = [] if problem else [cut for cut in (cut_sequence(s, token_limit) for s in rollout.sequences) if cut]
        if not kept:
            if problem is None and not rollout.sequences:
                problem = "the endpoint returned no token ids (a training endpoint must: return_token_ids)"
            elif problem is None:
                problem = (
                    f"no sampled token below the token limit of {token_limit} (the trainer's "
                    "max_token_trainer_length, which run-api gives): the prompt reaches it"
                )
            errors.append(problem)
            usable.append(False)
            continue
        usable.append(True)
        for sequence in kept:
            tokens.append(sequence.tokens)
            masks.append(sequence.masks)
            logprobs.append(sequence.logprobs)
            messages.append(chat_messages(sequence.messages))
            scores.append(float(rollout.reward))
            rollout_of.append(index)
    if not tokens:
        return Outcome(None, errors)
    group = {
        "tokens": tokens,
        "masks": masks,
        "scores": scores,
        "inference_logprobs": logprobs,
        "messages": messages,
        "overrides": None,
        "group_overrides": {"rollout_of": rollout_of, "rewards": named_rewards(rollouts, usable)},
    }
    return Outcome(group, errors)


def preflight_group(rollouts: List[Rollout]) -> Outcome:
    """A pre-flight's group: one score and one conversation per rollout that did not fail."""
    errors = [rollout.error for rollout in rollouts if rollout.error is not None]
    usable = [rollout.error is None for rollout in rollouts]
    kept = [rollout for rollout in rollouts if rollout.error is None]
    if not kept:
        return Outcome(None, errors)
    group = {
        "scores": [float(rollout.reward) for rollout in kept],
        "messages": [chat_messages(rollout.messages) for rollout in kept],
        "group_overrides": {
            "rollout_of": [index for index, ok in enumerate(usable) if ok],
            "rewards": named_rewards(rollouts, usable),
        },
    }
    return Outcome(group, errors)


def named_rewards(rollouts: List[Rollout], usable: List[bool]) -> Dict[str, List[Optional[float]]]:
    """{name: [value per rollout]}: null where a rollout failed or did not report the name."""
    names: List[str] = []
    for rollout, ok in zip(rollouts, usable):
        if ok:
            names.extend(name for name in rollout.rewards if name not in names)
    return {
        name: [number(rollout.rewards.get(name)) if ok else None for rollout, ok in zip(rollouts, usable)]
        for name in names
    }


def number(value: Any) -> Optional[float]:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def sequence_problem(sequence: Sequence) -> Optional[str]:
    """Why a sequence an adapter built cannot be trained on, or None."""
    lengths = {len(sequence.tokens), len(sequence.masks), len(sequence.logprobs)}
    if len(lengths) != 1:
        return (
            f"a sequence's tokens, masks and logprobs differ in length ({len(sequence.tokens)}, "
            f"{len(sequence.masks)}, {len(sequence.logprobs)})"
        )
    return None


def cut_sequence(sequence: Sequence, token_limit: Optional[int]) -> Optional[Sequence]:
    """`sequence` cut to `token_limit - 1` tokens (None: no limit); None when no sampled token
    is left."""
    if token_limit is not None and token_limit > 0 and len(sequence.tokens) >= token_limit:
        keep = token_limit - 1
        sequence = Sequence(
            tokens=sequence.tokens[:keep],
            masks=sequence.masks[:keep],
            logprobs=sequence.logprobs[:keep],
            messages=sequence.messages,
        )
    if not any(mask != PROMPT_MASK for mask in sequence.masks):
        return None
    return sequence


def chat_messages(messages: List[Any]) -> List[Dict[str, Any]]:
    """Messages as run-api takes them: each a dict with `role` and `content` (text; a list of
    content parts is kept), tool calls and other keys kept when JSON-ready."""
    result = []
    for message in messages:
        if hasattr(message, "model_dump"):
            message = message.model_dump(mode="json", exclude_none=True)
        if not isinstance(message, dict):
            message = {"role": "user", "content": str(message)}
        message = dict(message)
        message.setdefault("role", "user")
        if message.get("content") is None:
            message["content"] = ""
        result.append(message)
    return result


def prompt_sequence(prompt_ids: List[int], completion_ids: List[int], completion_mask: List[int],
                    completion_logprobs: List[float], messages: List[Dict[str, Any]]) -> Sequence:
    """A sampled branch from a prompt and its completion: the prompt never trained on
    (PROMPT_MASK, PROMPT_LOGPROB), a completion token trained on where its mask is set."""
    masks = [PROMPT_MASK] * len(prompt_ids)
    logprobs = [PROMPT_LOGPROB] * len(prompt_ids)
    for token, mask, logprob in zip(completion_ids, completion_mask, completion_logprobs):
        sampled = bool(mask)
        masks.append(int(token) if sampled else PROMPT_MASK)
        logprobs.append(float(logprob) if sampled else PROMPT_LOGPROB)
    return Sequence(tokens=[int(t) for t in prompt_ids] + [int(t) for t in completion_ids], masks=masks, logprobs=logprobs, messages=messages)


def joined_turns(sequences: List[Sequence]) -> List[Sequence]:
    """A multi-turn rollout's turns as few sequences as the tokens allow: a turn whose tokens
    begin with the whole of the sequence before it (its prompt is that turn's prompt and
    completion, then the environment's reply: verifiers 0.3's token client stitches it so)
    continues it, keeping what was sampled there as sampled; any other turn starts a new
    sequence. Tokens are never re-made: every one is what the sampler saw or gave."""
    joined: List[Sequence] = []
    for sequence in sequences:
        last = joined[-1] if joined else None
        if last is not None and len(sequence.tokens) > len(last.tokens) and sequence.tokens[: len(last.tokens)] == last.tokens:
            cut = len(last.tokens)
            joined[-1] = Sequence(
                tokens=sequence.tokens,
                masks=last.masks + sequence.masks[cut:],
                logprobs=last.logprobs + sequence.logprobs[cut:],
                messages=sequence.messages,
            )
        else:
            joined.append(sequence)
    return joined


async def rollouts_of(adapter: Any, task: Any, size: int, endpoint: Any, sampling: Dict[str, Any]) -> List[Rollout]:
    """The adapter's group of `task`; should the adapter itself raise (it must not), each
    rollout fails with that error rather than the run."""
    try:
        return await adapter.run_group(task, size, endpoint, sampling)
    except Exception as error:  # noqa: BLE001
        return [Rollout(reward=0.0, error=f"{type(error).__name__}: {error}") for _ in range(size)]


# The handler name a failed rollout's error is counted under in the groups file.
ROLLOUT_ERRORS = "rollout"


def count(counts: Any, outcome: Outcome) -> str:
    """Counts a group's outcome in `counts` (rl_env.groups.GroupCounts): each failed rollout's
    error, and the group as made (with signal, alike, too long) or, with no rollout usable, as
    an attempt that failed. How it ended: `count_group`'s word, or "failed"."""
    for error in outcome.errors:
        counts.count_error(ROLLOUT_ERRORS, error)
    if outcome.group is None:
        counts.count_failed_call()
        return "failed"
    verdict = counts.count_group(outcome.group)
    counts.save()
    return verdict
