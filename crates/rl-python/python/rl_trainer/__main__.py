"""python -m rl_trainer --config RUN.yaml --run-dir DIR

Exit codes: 0 after the final save (and the linger), 1 when setup or a step failed (the last
line on stderr is `rl-trainer: setup failed: <Type>: <message>` or `rl-trainer: step N
failed: ...`), 2 for a bad command line or run config, the contract's `exit_capped` (3) when
the next step would pass one of the run's caps and the state is saved (the last line is
`rl-trainer: capped: <why>`), 143 / 130 on SIGTERM / SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import traceback

from .config import EXIT_CAPPED, ConfigError, effective_tinker_url, load_config, resolve_api_key

EXIT_FAILED = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rl_trainer",
        description="rl's Tinker trainer for Atropos environments (see the package docstring).",
    )
    parser.add_argument("--config", required=True, help="the run YAML (env, openai, tinker sections)")
    parser.add_argument("--run-dir", required=True, help="folder for metrics.jsonl, checkpoints.jsonl, rollouts/")
    return parser


def _die(code: int) -> None:
    """Leave now: flush, then skip interpreter shutdown (the SDK's threads, a hung to_thread)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def _last_line(text: str) -> None:
    # Nothing may print after this line: silence every logger (the SDK's heartbeat, uvicorn).
    logging.disable(logging.CRITICAL)
    sys.stdout.flush()
    print(text, file=sys.stderr, flush=True)


def _short(error: BaseException) -> str:
    message = " ".join(str(error).split())
    if len(message) > 500:
        message = message[:497] + "..."
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


async def _run(config, run_dir: str, api_key: str) -> None:
    from .engine import HOSTED_TINKER_URL, Watchdog, refusal
    from .loop import Capped, Trainer

    loop = asyncio.get_running_loop()
    stopped: asyncio.Future = loop.create_future()

    def on_signal(signum: int) -> None:
        if not stopped.done():
            stopped.set_result(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)

    trainer = None
    try:
        trainer = Trainer(config, run_dir, api_key)
        server_task = trainer.start_serving()
    except Exception as e:  # cannot write the run folder, port taken
        traceback.print_exc()
        _last_line(f"rl-trainer: setup failed: {_short(e)}")
        _die(EXIT_FAILED)

    main_task = asyncio.create_task(trainer.run(), name="trainer")
    limit = config.engine_unreachable_secs
    watchdog = Watchdog(effective_tinker_url(config) or HOSTED_TINKER_URL, limit, interval=max(1.0, min(5.0, limit / 10)))
    watchdog_task = asyncio.create_task(watchdog.run(), name="tinker-watchdog")
    done, _ = await asyncio.wait({main_task, watchdog_task, server_task, stopped}, return_when=asyncio.FIRST_COMPLETED)

    if stopped in done:
        signum = stopped.result()
        _last_line(f"rl-trainer: stopped by {signal.Signals(signum).name} during {trainer.phase} (step {trainer.step})")
        _die(128 + signum)

    if main_task in done and main_task.exception() is None:
        await trainer.close()
        print("[rl-trainer] done", flush=True)
        _die(0)

    if main_task in done and isinstance(main_task.exception(), Capped):
        # Not a failure: the state is saved and `rl runs resume` continues the run.
        message = str(main_task.exception())
        if trainer.wandb is not None:
            trainer.wandb.finish(0)
            trainer.wandb = None
        await trainer.close()
        _last_line(f"rl-trainer: capped: {message}")
        _die(EXIT_CAPPED)

    if main_task in done:
        error = main_task.exception()
    elif watchdog_task in done:
        error = watchdog_task.exception() or RuntimeError("the Tinker watchdog stopped")
    else:
        error = server_task.exception() or RuntimeError("the inference server stopped")
    where = trainer.where()
    if not main_task.done():
        main_task.cancel()
        await asyncio.wait({main_task}, timeout=2)
    trainer.fail_wandb(EXIT_FAILED)
    refused = refusal(error)
    if refused is None:
        traceback.print_exception(type(error), error, error.__traceback__)
    _last_line(f"rl-trainer: {where}: {refused or _short(error)}")
    _die(EXIT_FAILED)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = load_config(args.config)
        api_key = resolve_api_key(config)
    except ConfigError as e:
        print(f"rl-trainer: bad config: {e}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    try:
        os.makedirs(args.run_dir, exist_ok=True)
    except OSError as e:
        print(f"rl-trainer: bad --run-dir {args.run_dir}: {e.strerror or e}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    asyncio.run(_run(config, os.path.abspath(args.run_dir), api_key))
    return EXIT_FAILED  # not reached: _run always leaves through _die


if __name__ == "__main__":
    sys.exit(main())
