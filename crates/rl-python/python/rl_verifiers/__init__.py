"""rl's runner for verifiers environments: the environment process of a run (`serve`) and of a
pre-flight (`process`), started in the environment's own Python (verifiers v0 and v1 cannot share
one), speaking run-api's environment protocol itself (no atroposlib there).

    RL_ENV_KIND=verifiers-v0|verifiers-v1 python -m rl_env ENV_FILE serve --config RUN.yaml
    RL_ENV_KIND=... python -m rl_env ENV_FILE process --env.total_steps N --openai.base_url URL ...

(or `python -m rl_verifiers KIND ENV_FILE ...`). Exit: 0 done, 1 the run or pre-flight could not
go on (run-api gone, every rollout failing), 2 bad input or an environment that cannot load —
each with one line on stderr saying why, its last.

Modules, one concern each:

* `adapter`     -- what rl_verifiers asks of an environment, whichever API (the interface).
* `legacy`      -- the v0 adapter (verifiers 0.3.x `load_environment`, `env.run_group`).
* `v1`          -- the v1 adapter (verifiers 0.4.x `verifiers.v1`).
* `config`      -- the run YAML and flags, split into run-level and the environment's own settings.
* `environment` -- the module imported from where rl says, the adapter, the tasks through
                   rl_env's held-out slice.
* `scored`      -- rollouts into a run-api group or a pre-flight line, and their counts.
* `runapi`      -- run-api's environment protocol (register, status, send), bounded retries.
* `tool_rendering` -- whether the model sees the environment's tools as rl renders its prompts.
* `serve`, `process` -- the two modes; `check` loads the environment as `serve` would and says,
  as one JSON line, whether its tools reach the model (`tool_rendering`), before a run starts;
  `tools` loads it and names the tools it gives the model, before a pre-flight of rl's own
  models (whose chat route renders them with the model's chat template)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import List

from rl_verifiers.adapter import KINDS

__all__ = ["KINDS", "main"]


def say(line: str) -> None:
    print(f"rl_verifiers: {line}", file=sys.stderr, flush=True)


def main(kind: str, env_file: str, argv: List[str], environ=os.environ) -> int:
    from rl_env import ItemsError, Split
    from rl_env.__main__ import GO_VARIABLE
    from rl_env.groups import GroupCounts
    from rl_verifiers import config, tool_rendering
    from rl_verifiers.config import CHECK, SERVE, TOOLS
    from rl_verifiers.environment import ADAPTER_MODULES, LoadError, TaskDraw, load, open_environment
    from rl_verifiers.process import ProcessError, process
    from rl_verifiers.runapi import RunApiError
    from rl_verifiers.serve import ServeError, serve

    if kind not in ADAPTER_MODULES:
        say(f"RL_ENV_KIND is {kind!r}; rl_verifiers runs {', '.join(ADAPTER_MODULES)}")
        return 2
    if not env_file:
        say("usage: python -m rl_env ENV_FILE serve --config RUN.yaml | process --env.FIELD VALUE ...")
        return 2
    # Datasets' progress bars would fill the environment's log, one per dataset an environment maps.
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    try:
        invocation = config.parse_invocation(argv)
        split = Split.from_environment(environ)
        counts = GroupCounts.from_environment(environ)
        adapter = open_environment(kind, env_file, environ)
        run, own_args, ignored = config.split_env(invocation.env, adapter.own_fields())
        endpoint = config.endpoint(invocation, run, training=invocation.mode in (SERVE, CHECK), environ=environ)
        load(adapter, own_args)
        draw = TaskDraw(adapter, split)
    except (config.ConfigError, ItemsError, LoadError) as error:
        say(str(error))
        return 2
    note = config.describe_ignored(ignored)
    if note:
        print(note, file=sys.stderr, flush=True)
    if invocation.mode == TOOLS:
        print(json.dumps({"tools": adapter.tool_names()}), flush=True)
        return 0
    if invocation.mode in (SERVE, CHECK):
        ended = tool_rendering.at_load(adapter, endpoint, checking=invocation.mode == CHECK, say=say)
        if ended is not None:
            return ended
    say(f"{adapter.kind} environment loaded; {invocation.mode} against {endpoint.model} at {endpoint.base_url}")
    try:
        if invocation.mode == SERVE:
            return asyncio.run(serve(adapter, run, endpoint, draw, counts, say, go_file=environ.get(GO_VARIABLE)))
        return asyncio.run(process(adapter, run, endpoint, draw, counts, say))
    except (ServeError, ProcessError, RunApiError, ItemsError) as error:
        say(str(error))
        return 1
