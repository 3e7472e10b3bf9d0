"""`python -m rl_engine.engine ARGS`: skyrl-tx 0.3.0's engine (`python -m tx.tinker.engine ARGS`).

The server started by `python -m rl_engine` runs this instead of upstream's hard-coded
`uv run --extra tinker --extra <backend> -m tx.tinker.engine` (see `__main__`). It differs from
running `tx.tinker.engine` directly in two ways only:

* `tx.tinker.engine` imports `tx.utils.models`, which imports `peft` at module level; when real
  peft (torch, CUDA wheels) is absent, the stand-in from `rl_engine` is installed first.
* The engine asks Linux to SIGTERM it if the server process disappears. skyrl-tx stops its
  engine on a clean shutdown, but a server killed with SIGKILL alone would leave the engine
  polling the database forever; a whole-group signal (what rl's supervisor sends) needs no help.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys

from rl_engine import API_PID_ENV, install_peft_standin, lengthen_sqlite_busy_timeout

_PR_SET_PDEATHSIG = 1


def _follow_parent() -> None:
    expected = os.environ.get(API_PID_ENV)
    if not expected or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    # The server may already have gone between our fork and the prctl call.
    if str(os.getppid()) != expected:
        sys.exit("rl_engine.engine: the server that started this engine is gone")


def main() -> None:
    _follow_parent()
    install_peft_standin()
    lengthen_sqlite_busy_timeout()
    runpy.run_module("tx.tinker.engine", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
