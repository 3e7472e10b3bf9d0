"""`serve --config CFG`: the environment of a run. It sets up (the environment is loaded before
this runs), waits for `RL_ENV_GO_FILE` when rl's supervisor set it, registers with run-api, then
keeps up to `max_num_workers` groups under way (fewer when run-api already holds
`max_batches_offpolicy` batches, none once it holds enough for the run), sends each group with
signal (`scored.run_group`), counts every group (`RL_GROUPS_FILE`), and ends (0) once run-api's
`current_step` reaches `total_steps`, as atroposlib's environments do."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from typing import Any, Callable, Dict, Optional

from rl_env.groups import GroupCounts
from rl_verifiers import scored
from rl_verifiers.adapter import Adapter, Endpoint
from rl_verifiers.config import RunSettings
from rl_verifiers.environment import TaskDraw
from rl_verifiers.runapi import EnvironmentApi

# How often run-api's status is read while groups are under way.
STATUS_POLL_SECONDS = 0.5


class ServeError(Exception):
    """The run cannot go on (run-api gone, no task): the line the runner ends with."""


def sampling(run: RunSettings) -> Dict[str, Any]:
    """What each rollout asks of the model: a completion at most `max_token_length` long (a
    sequence reaching the limit is cut to below it, see `scored.run_group`), at temperature 1
    (the policy's own distribution, which the sampled logprobs are of)."""
    return {"max_tokens": run.max_token_length, "temperature": 1.0}


async def wait_for_go(go_file: Optional[str], say: Callable[[str], None]) -> None:
    from rl_env.__main__ import GO_POLL_SECONDS

    if not go_file or os.path.exists(go_file):
        return
    say("set up; waiting for the run's other components before registering")
    while not os.path.exists(go_file):
        await asyncio.sleep(GO_POLL_SECONDS)


def offpolicy_room(run: RunSettings, queued_groups: int) -> int:
    """Groups that may still be started for run-api's queue: atroposlib's bound of
    `max_batches_offpolicy` batches (no bound while the batch size is unknown)."""
    if run.batch_size <= 0 or run.max_batches_offpolicy <= 0:
        return run.workers
    return run.max_batches_offpolicy * run.batch_size // max(1, run.group_size) - queued_groups


def with_trainers_batch(run: RunSettings, info: Dict[str, Any]) -> RunSettings:
    """`run` with the trainer's batch size (run-api's `/info`) where its own is unset (`-1`, the
    default), as atroposlib's environments take it (`BaseEnv.get_server_info`): without it
    `offpolicy_room` had no bound, and a run trained on samples of weights steps old."""
    batch = info.get("batch_size")
    if run.batch_size > 0 or not isinstance(batch, int) or isinstance(batch, bool) or batch <= 0:
        return run
    return dataclasses.replace(run, batch_size=batch)


def queued_enough(run: RunSettings, step: int, queued_groups: int, total_steps: int) -> bool:
    """run-api holds groups enough for every step left (atroposlib stops making groups there)."""
    if run.batch_size <= 0:
        return False
    return step + queued_groups * run.group_size // run.batch_size >= total_steps


async def serve(
    adapter: Adapter,
    run: RunSettings,
    endpoint: Endpoint,
    draw: TaskDraw,
    counts: GroupCounts,
    say: Callable[[str], None],
    go_file: Optional[str] = None,
    api: Optional[EnvironmentApi] = None,
) -> int:
    api = api or EnvironmentApi(run.rollout_server_url, say)
    counts.prompt_limit = run.max_token_length
    counts.sends_alike = not run.ensure_scores_are_not_same
    try:
        await wait_for_go(go_file, say)
        registration = await api.register_env(
            {
                "max_token_length": run.max_token_length,
                "desired_name": run.wandb_name or "verifiers",
                "weight": run.inference_weight,
                "min_batch_allocation": None,
                "group_size": run.group_size,
            }
        )
        env_id = registration["env_id"]
        total_steps = run.total_steps if run.total_steps > 0 else int(registration.get("num_steps") or -1)
        if total_steps <= 0:
            raise ServeError("total_steps is set neither in the run config nor by the trainer")
        info = await api.info()
        limit = info.get("max_token_len")
        token_limit = limit if isinstance(limit, int) and limit > 0 else run.max_token_length
        counts.token_limit = token_limit
        run = with_trainers_batch(run, info)
        say(
            f"registered as environment {env_id}; {total_steps} steps, groups of {run.group_size}, "
            f"token limit {token_limit}, batches of {run.batch_size}"
        )
        async with adapter.serving():
            return await keep_groups_coming(adapter, run, endpoint, draw, counts, say, api, env_id, total_steps, token_limit)
    finally:
        await api.close()


async def keep_groups_coming(adapter, run, endpoint, draw, counts, say, api, env_id, total_steps, token_limit) -> int:
    under_way: Dict[asyncio.Task, float] = {}
    exhausted = False
    try:
        while True:
            status = await api.status_env(env_id)
            step = status["current_step"]
            if step >= total_steps:
                say(f"run-api is at step {step} of {total_steps}: done")
                return 0
            queued = int(status.get("queue_size") or 0)
            room = min(run.workers, offpolicy_room(run, queued)) - len(under_way)
            while room > 0 and not exhausted and not queued_enough(run, step, queued, total_steps):
                task = await draw.next()
                if task is None:
                    exhausted = True
                    if draw.cycle:
                        raise ServeError("the environment offers no task")
                    break
                group = asyncio.ensure_future(one_group(adapter, run, endpoint, counts, api, env_id, task, token_limit))
                under_way[group] = time.monotonic()
                room -= 1
            if exhausted and not under_way:
                say("no task left")
                return 0
            if under_way:
                done, _ = await asyncio.wait(list(under_way), timeout=STATUS_POLL_SECONDS, return_when=asyncio.FIRST_COMPLETED)
                for group in done:
                    del under_way[group]
                    group.result()  # run-api gone: the run cannot go on
                abandon_late(under_way, run, counts)
            else:
                await asyncio.sleep(STATUS_POLL_SECONDS)
    finally:
        for group in under_way:
            group.cancel()
        if under_way:
            await asyncio.gather(*under_way, return_exceptions=True)


def abandon_late(under_way: Dict[asyncio.Task, float], run: RunSettings, counts: GroupCounts) -> None:
    """Cancels the groups under way longer than `worker_timeout`, each counted as an error."""
    if run.worker_timeout <= 0:
        return
    now = time.monotonic()
    for group, started in list(under_way.items()):
        if now - started > run.worker_timeout:
            group.cancel()
            del under_way[group]
            scored.count(counts, scored.Outcome(None, [f"the group took longer than worker_timeout ({run.worker_timeout:g} s)"]))


async def one_group(adapter, run, endpoint, counts, api, env_id, task, token_limit) -> str:
    rollouts = await scored.rollouts_of(adapter, task, run.group_size, endpoint, sampling(run))
    outcome = uneven_refused(scored.run_group(rollouts, token_limit), run.group_size)
    verdict = scored.count(counts, outcome)
    if counts.is_sent(verdict) and outcome.group is not None:
        await api.send_group(dict(outcome.group, env_id=env_id))
    return verdict


def uneven_refused(outcome: scored.Outcome, group_size: int) -> scored.Outcome:
    """atroposlib's run-api makes a batch only of groups whose sizes pack into it whole
    (`grab_exact_from_heterogeneous_queue`): a group of another size than `group_size` (a
    rollout failed, or gave several branches) could wait in its queue forever and stall the
    run. Such a group is not sent; it is counted as failed, with why."""
    group = outcome.group
    if group is None or len(group["tokens"]) == group_size:
        return outcome
    rollouts = len(set(group["group_overrides"]["rollout_of"]))
    why = (
        f"a group of {len(group['tokens'])} sequences from {rollouts} usable rollouts, not "
        f"group_size ({group_size}): run-api batches only groups of one size, so it was not sent"
    )
    return scored.Outcome(None, outcome.errors + [why])
