"""The groups an environment makes, counted where rl reads them: `RL_GROUPS_FILE` names a JSON
file, replaced whole (temporary file + rename) after each group.

    {"made": 12, "with_signal": 0, "alike": 12, "alike_scores": {"0.0": 12},
     "none": 0, "failed": 0, "updated": 1790000000.0}

`made` counts the groups `collect_trajectories` returned, `with_signal` those whose scores
differ (the only ones GRPO learns from), `alike` those whose scores are all equal (atroposlib
drops them in `serve` with `ensure_scores_are_not_same`), by the score they shared; `none`
counts the calls that returned no group (an environment's own check of equal scores, or a
failure it swallowed) and `failed` those that raised. A run with no group `with_signal` cannot
learn: rl's supervisor, its status and its pre-flights read these counts (`rl_process`'s
`EnvGroups`)."""

from __future__ import annotations

import json
import math
import os
import sys
import time

GROUPS_VARIABLE = "RL_GROUPS_FILE"
# A score is a key of `alike_scores`; past this many distinct ones, the rest are "other".
MAX_SCORES = 8


class GroupCounts:
    def __init__(self, path: str | None):
        self.path = path
        self.made = 0
        self.with_signal = 0
        self.alike = 0
        self.alike_scores: dict[str, int] = {}
        self.none = 0
        self.failed = 0

    @classmethod
    def from_environment(cls, environ=os.environ) -> "GroupCounts":
        return cls(environ.get(GROUPS_VARIABLE) or None)

    def count_result(self, result) -> None:
        """One call's result: `(group or groups or None, backlog)` as atroposlib's
        `collect_trajectories` returns it."""
        groups = result[0] if isinstance(result, tuple) and result else result
        if groups is None or (isinstance(groups, list) and not groups):
            self.none += 1
        else:
            for group in groups if isinstance(groups, list) else [groups]:
                self.count_group(group)
        self.save()

    def count_group(self, group) -> None:
        if group is None:
            self.none += 1
            return
        self.made += 1
        scores = group.get("scores") if isinstance(group, dict) else None
        scores = list(scores) if scores is not None else []
        if len({score_key(score) for score in scores}) > 1:
            self.with_signal += 1
            return
        self.alike += 1
        key = score_key(scores[0]) if scores else "none"
        if key not in self.alike_scores and len(self.alike_scores) >= MAX_SCORES:
            key = "other"
        self.alike_scores[key] = self.alike_scores.get(key, 0) + 1

    def count_failure(self) -> None:
        self.failed += 1
        self.save()

    def as_dict(self) -> dict:
        return {
            "made": self.made,
            "with_signal": self.with_signal,
            "alike": self.alike,
            "alike_scores": dict(self.alike_scores),
            "none": self.none,
            "failed": self.failed,
            "updated": time.time(),
        }

    def save(self) -> None:
        if not self.path:
            return
        partial = f"{self.path}.partial"
        try:
            with open(partial, "w", encoding="utf-8") as f:
                json.dump(self.as_dict(), f)
            os.replace(partial, self.path)
        except OSError as error:
            print(f"rl_env: the group counts cannot be written to {self.path}: {error}", file=sys.stderr)

    def attach(self, env) -> None:
        """Counts every call of the instance's `collect_trajectories` (whichever class defines it)."""
        original = env.collect_trajectories

        async def collect_trajectories(item):
            try:
                result = await original(item)
            except BaseException:
                self.count_failure()
                raise
            try:
                self.count_result(result)
            except Exception as error:  # counting never breaks the environment
                print(f"rl_env: a group could not be counted: {error}", file=sys.stderr)
            return result

        env.collect_trajectories = collect_trajectories


def score_key(score) -> str:
    """A score as a key: `0.0`, `1.0`, `-1.0`, `nan`."""
    try:
        value = float(score)
    except (TypeError, ValueError):
        return str(score)[:32]
    if math.isnan(value):
        return "nan"
    return repr(value)
