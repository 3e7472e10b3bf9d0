"""`process --env.total_steps N --env.group_size G --env.data_path_to_save_groups OUT
--openai.base_url URL --openai.model_name M …`: a pre-flight. Up to `max_num_workers` groups at
once against the model (text only: any OpenAI-compatible chat endpoint), one JSON line per group
into OUT as atroposlib's `process` writes them (`scores`, one per rollout, and `messages`; what
crates/rl-preflight/src/analysis.rs reads), every group counted (`RL_GROUPS_FILE`). Groups
whose scores are alike are written too (atroposlib's process does the same).

A group whose every rollout failed is not written and is tried again with the next task, at
most `MAX_ATTEMPTS_PER_GROUP` times per group asked for: then the run ends (1) naming the
first error, rather than asking a failing model forever."""

from __future__ import annotations

import asyncio
import json
from typing import Callable, Optional

from rl_env.groups import GroupCounts
from rl_verifiers import scored
from rl_verifiers.adapter import Adapter, Endpoint
from rl_verifiers.config import RunSettings
from rl_verifiers.environment import TaskDraw
from rl_verifiers.serve import sampling

MAX_ATTEMPTS_PER_GROUP = 3


class ProcessError(Exception):
    """The pre-flight cannot go on: the line the runner ends with."""


async def process(
    adapter: Adapter,
    run: RunSettings,
    endpoint: Endpoint,
    draw: TaskDraw,
    counts: GroupCounts,
    say: Callable[[str], None],
) -> int:
    if not run.data_path_to_save_groups:
        raise ProcessError("--env.data_path_to_save_groups is not set: the groups have nowhere to go")
    wanted = run.total_steps
    if wanted <= 0:
        raise ProcessError(f"--env.total_steps is {wanted}: at least one group")
    attempts_left = wanted * MAX_ATTEMPTS_PER_GROUP
    written = 0
    exhausted = False
    first_error: Optional[str] = None
    under_way: set = set()
    with open(run.data_path_to_save_groups, "w", encoding="utf-8") as out:
        async with adapter.serving():
            try:
                while written < wanted:
                    while not exhausted and attempts_left > 0 and len(under_way) < min(run.workers, wanted - written):
                        task = await draw.next()
                        if task is None:
                            exhausted = True
                            break
                        attempts_left -= 1
                        under_way.add(asyncio.ensure_future(scored.rollouts_of(adapter, task, run.group_size, endpoint, sampling(run))))
                    if not under_way:
                        break
                    done, under_way = await asyncio.wait(under_way, return_when=asyncio.FIRST_COMPLETED)
                    for finished in done:
                        outcome = scored.preflight_group(finished.result())
                        scored.count(counts, outcome)
                        first_error = first_error or next(iter(outcome.errors), None)
                        if outcome.group is not None and written < wanted:
                            out.write(json.dumps(outcome.group, ensure_ascii=False) + "\n")
                            out.flush()
                            written += 1
                            say(f"group {written}/{wanted}: scores {outcome.group['scores']}")
            finally:
                for pending in under_way:
                    pending.cancel()
                if under_way:
                    await asyncio.gather(*under_way, return_exceptions=True)
    if written >= wanted or (exhausted and written > 0):
        if written < wanted:
            say(f"the environment's tasks ran out after {written} of {wanted} groups")
        return 0
    if exhausted and first_error is None:
        raise ProcessError(f"the environment's tasks ran out after {written} of {wanted} groups")
    raise ProcessError(
        f"{written} of {wanted} groups: the rollouts failed; the first error: {first_error or 'none seen'}"
    )
