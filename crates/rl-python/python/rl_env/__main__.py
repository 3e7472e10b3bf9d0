"""`python -m rl_env ENV_FILE ARGS...`: runs an environment file as `python ENV_FILE ARGS...`
would (its folder first on the import path, its `__main__` block), with every atroposlib
environment it makes drawing the items `RL_ITEMS` names (see `rl_env`)."""

from __future__ import annotations

import os
import runpy
import sys

from rl_env import HELD_OUT, ItemsError, Split


def install(split: Split) -> None:
    """Attaches `split` to each environment atroposlib makes from here on. Wrapping the
    instance, not a class, covers every subclass whichever of them defines `get_next_item`."""
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

    BaseEnv.__init__ = init


def main(argv: list[str]) -> int:
    if not argv or not argv[0].endswith(".py"):
        print("usage: python -m rl_env ENV_FILE.py serve|process|evaluate ARGS...", file=sys.stderr)
        return 2
    try:
        split = Split.from_environment()
        install(split)
    except ItemsError as error:
        print(f"rl_env: {error}", file=sys.stderr)
        return 2
    env_file = os.path.abspath(argv[0])
    sys.argv = [env_file, *argv[1:]]
    sys.path.insert(0, os.path.dirname(env_file))
    runpy.run_path(env_file, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
