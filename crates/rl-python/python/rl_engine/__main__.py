"""`python -m rl_engine ARGS`: skyrl-tx 0.3.0's Tinker API server (`python -m tx.tinker.api ARGS`).

Upstream behaviour worked around: the server's `lifespan` starts its engine with
`asyncio.create_subprocess_exec("uv", "run", "--extra", "tinker", "--extra", <backend>, "-m",
"tx.tinker.engine", *engine_args)`. That only works in a source checkout of skyrl-tx with `uv`
on PATH; from a pip-installed venv it fails or, worse, lets `uv` resolve a different environment
(CUDA jax, torch). Before running the server's `__main__` block unchanged (via runpy, as
`python -m` would), this module wraps `asyncio.create_subprocess_exec` so that this one command
shape becomes `sys.executable -m rl_engine.engine *engine_args`: the same interpreter, the same
import path, the peft stand-in installed there too. Every other call passes through untouched.

The engine is not given a session of its own, so it stays in this process's group: a signal to
the group reaches both, and skyrl-tx itself terminates the engine when the server shuts down
and shuts the server down when the engine dies.

The app it serves is skyrl-tx's wrapped by `routes.install`: what the current tinker SDK asks
that skyrl-tx 0.3.0 does not answer (see routes.py).
"""

from __future__ import annotations

import asyncio
import os
import runpy
import sys

from rl_engine import API_PID_ENV, install_peft_standin, lengthen_sqlite_busy_timeout, package_parent

ENGINE_MODULE = "rl_engine.engine"
UPSTREAM_ENGINE_MODULE = "tx.tinker.engine"


def engine_command(argv: list[str]) -> list[str] | None:
    """The command to run instead of skyrl-tx's `uv run ... -m tx.tinker.engine ...`, else None."""
    if argv[:2] != ["uv", "run"]:
        return None
    i = 2
    while argv[i : i + 1] == ["--extra"] and i + 1 < len(argv):
        i += 2
    if i == 2 or argv[i : i + 2] != ["-m", UPSTREAM_ENGINE_MODULE]:
        return None
    return [sys.executable, "-m", ENGINE_MODULE, *argv[i + 2 :]]


def _child_env(env: dict | None) -> dict:
    # rl_engine may have been found through the current directory or a sys.path edit rather than
    # PYTHONPATH; the engine must import the very same package.
    env = dict(os.environ if env is None else env)
    parent = package_parent()
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if parent not in paths:
        env["PYTHONPATH"] = os.pathsep.join([parent, *paths])
    env[API_PID_ENV] = str(os.getpid())
    return env


def _redirect_engine_spawn() -> None:
    upstream = asyncio.create_subprocess_exec

    async def create_subprocess_exec(program, *args, **kwargs):
        replacement = engine_command([os.fspath(program), *map(os.fspath, args)])
        if replacement is None:
            return await upstream(program, *args, **kwargs)
        kwargs["env"] = _child_env(kwargs.get("env"))
        print(f"rl_engine: starting the engine as {' '.join(replacement[:3])} ...", file=sys.stderr, flush=True)
        return await upstream(*replacement, **kwargs)

    create_subprocess_exec.__wrapped__ = upstream
    # api.py calls `asyncio.create_subprocess_exec(...)` through the module attribute at call time.
    asyncio.create_subprocess_exec = create_subprocess_exec


def _serve_current_protocol() -> None:
    import uvicorn

    upstream = uvicorn.run

    def run(app, *args, **kwargs):
        from rl_engine import routes

        return upstream(routes.install(app), *args, **kwargs)

    run.__wrapped__ = upstream
    # api.py's `__main__` block ends in `uvicorn.run(app, ...)`, looked up on the module then.
    uvicorn.run = run


def main() -> None:
    install_peft_standin()
    lengthen_sqlite_busy_timeout()
    _redirect_engine_spawn()
    _serve_current_protocol()
    runpy.run_module("tx.tinker.api", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
