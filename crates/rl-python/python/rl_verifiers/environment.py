"""The environment as rl_verifiers meets it: its module imported from where rl says it is, its
adapter (by kind), and the draw of its tasks through rl_env's held-out slice."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import Any, Iterator, Optional, Tuple

from rl_env import TRAINING, Split
from rl_verifiers.adapter import Adapter, Task

ADAPTER_MODULES = {"verifiers-v0": "rl_verifiers.legacy", "verifiers-v1": "rl_verifiers.v1"}


class LoadError(Exception):
    """The environment cannot be imported or loaded: the one line rl_verifiers ends with."""


def module_of(env_file: str, environ=os.environ) -> Tuple[str, str]:
    """(the folder first on the import path, the module's name): what rl said
    (`RL_ENV_MODULE`/`RL_ENV_ROOT`, or the run's `environment.json`), else the file's own
    folder and name (a package's `__init__.py`: the package, from the folder above)."""
    from rl_env.__main__ import package_of

    package = package_of(env_file, environ)
    if package is not None:
        return package
    path = os.path.abspath(env_file)
    folder, name = os.path.split(path)
    stem = os.path.splitext(name)[0]
    if stem == "__init__":
        return os.path.dirname(folder), os.path.basename(folder)
    return folder, stem


def open_environment(kind: str, env_file: str, environ=os.environ) -> Adapter:
    """The environment's adapter, its module imported (nothing loaded yet)."""
    try:
        adapter_module = importlib.import_module(ADAPTER_MODULES[kind])
    except ImportError as error:
        raise LoadError(f"rl_verifiers cannot run {kind} environments here: {describe(error)}") from error
    root, name = module_of(env_file, environ)
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        module = importlib.import_module(name)
    except BaseException as error:  # noqa: BLE001 - whatever the module raises is named
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        raise LoadError(f"the environment's module {name} (from {root}) cannot be imported: {describe(error)}") from error
    return adapter_module.open_adapter(module)


def load(adapter: Adapter, own_args: dict) -> None:
    try:
        adapter.load(own_args)
    except LoadError:
        raise
    except Exception as error:  # noqa: BLE001
        # The environment's own code failed: its traceback helps its author, the last line says what.
        traceback.print_exc(file=sys.stderr)
        raise LoadError(f"the environment cannot load: {describe(error)}") from error


def describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


class TaskDraw:
    """The tasks this process works on, one at a time (`await draw.next()`, None when there are
    no more): training goes round the environment's tasks again and again, a held-out process
    through its slice (or eval split) once."""

    def __init__(self, adapter: Adapter, split: Split):
        self.adapter = adapter
        self.cycle = split.items == TRAINING
        self.tasks: Iterator[Task] = iter(adapter.tasks())
        self.drawn_this_pass = 0
        eval_tasks = getattr(adapter, "eval_tasks", None)
        evals = eval_tasks() if callable(eval_tasks) else None
        self.evals: Optional[Iterator[Task]] = iter(evals) if evals is not None else None
        owner = f"the environment ({adapter.kind})"
        self.next = split.drawing(self._next_task, self._next_eval if self.evals is not None else None, key=task_key, owner=owner)

    async def _next_task(self) -> Optional[Task]:
        task = next(self.tasks, None)
        if task is None and self.cycle and self.drawn_this_pass > 0:
            self.tasks = iter(self.adapter.tasks())
            self.drawn_this_pass = 0
            task = next(self.tasks, None)
        if task is not None:
            self.drawn_this_pass += 1
        return task

    async def _next_eval(self) -> Optional[Task]:
        assert self.evals is not None
        return next(self.evals, None)


def task_key(task: Any) -> str:
    return task.key
