"""rl's own Tinker trainer for Atropos environments.

    PYTHONPATH=<folder holding rl_trainer> python -m rl_trainer --config RUN.yaml --run-dir DIR

It reads the run YAML the environment reads (`env:`, `openai:`, `tinker:`), serves the
policy's inference on `openai[0].base_url` (OpenAI chat/completions and SGLang's native
`/generate`, which atroposlib's ManagedServer calls), registers with atroposlib's run-api,
and for each step takes one batch from run-api, trains the LoRA adapter through the official
`tinker` SDK (hosted Tinker, or a local Tinker-compatible engine) and swaps the sampling
client to the new weights. It writes `metrics.jsonl`, `checkpoints.jsonl` and bounded
`rollouts/` into the run folder.

Modules, one concern each:

* `config`      -- the run YAML checked into a `TrainerConfig` through rl's contract
                   (`contract.json` beside the package: every default and bound; bad values exit 2).
* `batch`       -- advantages, datums, token counts and batch statistics (pure; no SDK, no I/O).
* `records`     -- the run folder's files and the optional WandB mirror.
* `sampling`    -- request/response shapes of the inference endpoints (pure).
* `server`      -- the FastAPI app serving inference from the current sampling client.
* `runapi`      -- the client of atroposlib's run-api (register, batches, status).
* `engine`      -- the Tinker SDK behind bounded retries and a reachability watchdog.
* `loop`        -- setup, the training steps (counted and timed), the final save and the linger.
* `evaluation`  -- every `eval_every` steps, `rl runs evaluate` asked about the saved checkpoint.
* `checkpoints` -- a finished run's checkpoints served to a pre-flight (`python -m rl_trainer.checkpoints`).
* `hosted`      -- a hosted run's checkpoints listed, kept or exported (`python -m rl_trainer.hosted`).
* `__main__`    -- the command line, signals, exit codes and the last line on failure.
"""

__version__ = "0.1.0"
