"""`python -m rl_env ENV_FILE ARGS...`: runs an environment file as `python ENV_FILE ARGS...`
would (its folder first on the import path, its `__main__` block), with every atroposlib
environment it makes drawing the items `RL_ITEMS` names (see `rl_env`).

A package-style environment (one importing its siblings relatively, or through its top
package's name) runs instead as `python -m MODULE ARGS...` would from the folder that holds its
top package, its own folder next on the path. Which files are such, and their module and root,
rl decides from their source (`rl_discovery::package_module`) and says here: through
`RL_ENV_MODULE` and `RL_ENV_ROOT` (a pre-flight's models), else in the run's
`environment.json` (`package`), in the folder `RL_RUN_DIR` names."""

from __future__ import annotations

import importlib.util
import json
import os
import runpy
import sys

from rl_env import HELD_OUT, ItemsError, Split
from rl_env.groups import GroupCounts


def install(split: Split, counts: GroupCounts | None = None) -> None:
    """Attaches `split` to each environment atroposlib makes from here on. Wrapping the
    instance, not a class, covers every subclass whichever of them defines `get_next_item`.
    `counts`, when given, counts the groups each environment makes (`rl_env.groups`)."""
    try:
        from atroposlib.envs.base import BaseEnv
    except ImportError as error:
        if split.items == HELD_OUT:
            raise ItemsError(f"the held-out items need atroposlib: {error}") from None
        print(f"rl_env: atroposlib is not importable ({error}); every item is drawn", file=sys.stderr)
        return
    original = BaseEnv.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        split.attach(self)
        if counts is not None:
            counts.attach(self)

    BaseEnv.__init__ = init
    hold_registration(BaseEnv, os.environ.get(GO_VARIABLE))


GO_VARIABLE = "RL_ENV_GO_FILE"
# How often the go file is looked for.
GO_POLL_SECONDS = 0.2


def hold_registration(env_class, go_file: str | None) -> None:
    """With `RL_ENV_GO_FILE`, the environment was started before the run's other components:
    its setup (imports, tokenizer, data: atroposlib's `env_manager` runs `setup` first) goes
    on at once, and what follows it waits until rl's supervisor writes the file, once the
    others are ready: `setup_wandb` (which asks run-api for the WandB project, with no retry
    when run-api is not up yet) and `register_env`. An environment that cannot set up fails in
    seconds."""
    if not go_file:
        return
    for name in ("setup_wandb", "register_env"):
        if hasattr(env_class, name):
            setattr(env_class, name, held(getattr(env_class, name), go_file))


def held(method, go_file: str):
    """`method`, run once `go_file` exists."""

    async def after_go(self, *args, **kwargs):
        import asyncio

        if not os.path.exists(go_file):
            print("rl_env: set up; waiting for the run's other components before registering", file=sys.stderr, flush=True)
            while not os.path.exists(go_file):
                await asyncio.sleep(GO_POLL_SECONDS)
        return await method(self, *args, **kwargs)

    after_go.__name__ = method.__name__
    return after_go


MODULE_VARIABLE = "RL_ENV_MODULE"
ROOT_VARIABLE = "RL_ENV_ROOT"
RUN_DIR_VARIABLE = "RL_RUN_DIR"
# The run folder's names are rl's (crates/rl-settings/src/run_folder.rs), given in its contract.
with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "contract.json"), encoding="utf-8") as _contract:
    RUN_ENVIRONMENT_FILE = json.load(_contract)["run_folder"]["environment"]


class PackageError(Exception):
    """The module rl named cannot be the environment's file."""


def package_of(env_file: str, environ=os.environ) -> tuple[str, str] | None:
    """(root, module) when `env_file` runs as a module of its package, else None."""
    module, root = environ.get(MODULE_VARIABLE), environ.get(ROOT_VARIABLE)
    if module and root:
        return root, module
    run_dir = environ.get(RUN_DIR_VARIABLE)
    if not run_dir:
        return None
    try:
        with open(os.path.join(run_dir, RUN_ENVIRONMENT_FILE), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    package = record.get("package") if isinstance(record, dict) else None
    environment = record.get("environment") if isinstance(record, dict) else None
    if not isinstance(package, dict) or not isinstance(environment, dict):
        return None
    recorded = os.path.join(str(environment.get("environments_dir", "")), str(environment.get("file", "")))
    if not same_file(recorded, env_file):
        # The run's record is of another file (a process started from within a run).
        return None
    root, module = package.get("root"), package.get("module")
    if not isinstance(root, str) or not isinstance(module, str):
        return None
    return root, module


def same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def run_module(env_file: str, root: str, module: str) -> None:
    """Runs `module` as `__main__` with `root`, then the file's own folder, first on the path."""
    sys.path[0:0] = [root, os.path.dirname(env_file)]
    # Imports the module's packages (their `__init__`), as running it would.
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not same_file(spec.origin, env_file):
        found = spec.origin if spec is not None else None
        raise PackageError(f"module {module} from {root} is {found}, not {env_file}")
    runpy.run_module(module, run_name="__main__", alter_sys=True)


KIND_VARIABLE = "RL_ENV_KIND"


def main(argv: list[str]) -> int:
    kind = os.environ.get(KIND_VARIABLE) or "atropos"
    if kind != "atropos":
        # A verifiers environment's own Python has no atroposlib: rl_verifiers speaks run-api itself.
        import rl_verifiers

        return rl_verifiers.main(kind, argv[0] if argv else "", argv[1:])
    if not argv or not argv[0].endswith(".py"):
        print("usage: python -m rl_env ENV_FILE.py serve|process|evaluate ARGS...", file=sys.stderr)
        return 2
    try:
        split = Split.from_environment()
        install(split, GroupCounts.from_environment())
    except ItemsError as error:
        print(f"rl_env: {error}", file=sys.stderr)
        return 2
    env_file = os.path.abspath(argv[0])
    sys.argv = [env_file, *argv[1:]]
    package = package_of(env_file)
    if package is None:
        sys.path.insert(0, os.path.dirname(env_file))
        runpy.run_path(env_file, run_name="__main__")
        return 0
    try:
        run_module(env_file, *package)
    except PackageError as error:
        print(f"rl_env: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
