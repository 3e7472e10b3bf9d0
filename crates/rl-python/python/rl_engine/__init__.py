"""Run skyrl-tx 0.3.0's Tinker-compatible server from a plain pip-installed venv.

`python -m rl_engine ARGS` takes exactly the arguments of `python -m tx.tinker.api`; the package
papers over two things skyrl-tx 0.3.0 only gets right inside its own source checkout:

* Its API process starts the engine with a hard-coded `uv run --extra tinker --extra <backend>
  -m tx.tinker.engine ...`. From a wheel there is no project for `uv` to run (and often no `uv`),
  so `__main__` redirects exactly that command to `sys.executable -m rl_engine.engine ...`.
* `tx.utils.models` imports `peft` at module level, only to call
  `peft.LoraConfig(...).save_pretrained(dir)` (which writes adapter_config.json). Real peft
  requires torch, whose Linux wheels pull gigabytes of CUDA libraries. When peft cannot be
  imported, `install_peft_standin()` registers a small module in its place, in both processes.

Nothing is written into site-packages; only the running interpreters are affected.
Standard library only, so it runs before (and without) anything else being importable.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import struct
import sys
import types

__all__ = ["API_PID_ENV", "install_peft_standin", "package_parent"]

# Set by the server for its engine, which uses it to notice when the server is gone (engine.py).
API_PID_ENV = "RL_ENGINE_API_PID"

# Real PEFT names its adapter weights `<module path>.lora_A.weight`; the module just before that
# suffix is what PEFT calls a target module.
_LORA_MARKERS = ("lora_A", "lora_B")
_ADAPTER_WEIGHTS = "adapter_model.safetensors"
_ADAPTER_CONFIG = "adapter_config.json"


def package_parent() -> str:
    """The folder that must be on sys.path for `import rl_engine` to work."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _safetensors_keys(path: str) -> list[str]:
    # A safetensors file starts with a little-endian u64 header length and a JSON header; reading
    # it directly keeps this module free of the safetensors package.
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    return [k for k in header if k != "__metadata__"]


def _target_modules_from_weights(directory: str) -> list[str] | None:
    """The modules that carry LoRA weights in `directory`'s adapter file, if there is one.

    skyrl-tx never passes `target_modules` (it trains attention and MLP projections), and PEFT's
    per-architecture fallback (q_proj, v_proj for Qwen) would silently drop most of the adapter
    when the checkpoint is loaded elsewhere; the weights file beside the config says exactly.
    """
    path = os.path.join(directory, _ADAPTER_WEIGHTS)
    if not os.path.isfile(path):
        return None
    found = set()
    for key in _safetensors_keys(path):
        parts = key.split(".")
        for i, part in enumerate(parts):
            if part in _LORA_MARKERS and i > 0:
                found.add(parts[i - 1])
                break
    return sorted(found) or None


class _LoraConfig:
    """The slice of `peft.LoraConfig` skyrl-tx uses: construct it, then `save_pretrained(dir)`.

    The JSON it writes uses PEFT's own field names and values, so `PeftConfig.from_pretrained`,
    `PeftModel.from_pretrained` and vLLM's LoRA loader read it like one written by PEFT.
    """

    def __init__(
        self,
        r: int = 8,
        lora_alpha: float = 8,
        target_modules=None,
        base_model_name_or_path: str | None = None,
        lora_dropout: float = 0.0,
        bias: str = "none",
        task_type: str | None = "CAUSAL_LM",
        **extra,
    ):
        self.r = r
        self.lora_alpha = lora_alpha
        self.target_modules = target_modules
        self.base_model_name_or_path = base_model_name_or_path
        self.lora_dropout = lora_dropout
        self.bias = bias
        self.task_type = task_type
        self.extra = extra

    def to_dict(self) -> dict:
        target = self.target_modules
        if isinstance(target, (set, tuple)):
            target = sorted(target)
        # LoRA scaling in skyrl-tx is lora_alpha / r (not rsLoRA), hence use_rslora False.
        return {
            "peft_type": "LORA",
            "task_type": self.task_type,
            "base_model_name_or_path": self.base_model_name_or_path,
            "revision": None,
            "inference_mode": True,
            "r": self.r,
            "lora_alpha": self.lora_alpha,
            "lora_dropout": self.lora_dropout,
            "target_modules": target,
            "bias": self.bias,
            "fan_in_fan_out": False,
            "use_rslora": False,
            "use_dora": False,
            "modules_to_save": None,
            "init_lora_weights": True,
            "layers_to_transform": None,
            "layers_pattern": None,
            "rank_pattern": {},
            "alpha_pattern": {},
            **self.extra,
        }

    def save_pretrained(self, save_directory, **_ignored) -> None:
        directory = os.fspath(save_directory)
        os.makedirs(directory, exist_ok=True)
        config = self.to_dict()
        if config["target_modules"] is None:
            config["target_modules"] = _target_modules_from_weights(directory)
        with open(os.path.join(directory, _ADAPTER_CONFIG), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2, sort_keys=True)
            f.write("\n")


def install_peft_standin() -> bool:
    """Make `import peft` succeed when the real package cannot be imported.

    Returns True when the stand-in was installed, False when real peft is used.
    """
    try:
        import peft  # noqa: F401
        return False
    except ImportError:
        pass
    # A failed import can leave half-initialised submodules behind; they must not shadow ours.
    for name in [n for n in sys.modules if n == "peft" or n.startswith("peft.")]:
        del sys.modules[name]
    module = types.ModuleType("peft", "Stand-in for peft installed by rl_engine (real peft is absent).")
    # With a spec, importlib.util.find_spec("peft") answers instead of raising; transformers then
    # finds no installed distribution and keeps its own peft integration off, as it should.
    module.__spec__ = importlib.machinery.ModuleSpec("peft", None)
    module.__version__ = "0+rl_engine.standin"
    module.RL_ENGINE_STANDIN = True
    module.LoraConfig = _LoraConfig
    _LoraConfig.__module__ = "peft"
    sys.modules["peft"] = module
    return True


#: How long an engine's SQLite connection waits for another writer before "database is locked".
SQLITE_BUSY_MS = 120_000


def lengthen_sqlite_busy_timeout(db_models=None, busy_ms: int = SQLITE_BUSY_MS) -> None:
    """skyrl-tx 0.3.0 sets SQLite's busy timeout to 5 s (`db_models.enable_sqlite_wal`), and its
    background engine exits on the first "database is locked" (the server then shuts down). On a
    loaded 2-core machine a burst of requests (a step's logprob requests of the base model, one
    per completion) kept the writer past 5 s and took a run's engine down. Wraps
    `enable_sqlite_wal` so that each SQLite connection then waits `busy_ms`; to be called before
    `tx.tinker.api` or `tx.tinker.engine` runs (they import the function by name)."""
    if db_models is None:
        from tx.tinker import db_models
    from sqlalchemy import event

    upstream = getattr(db_models.enable_sqlite_wal, "__wrapped__", db_models.enable_sqlite_wal)

    def enable_sqlite_wal(engine) -> None:
        upstream(engine)
        if engine.dialect.name != "sqlite":
            return

        @event.listens_for(engine, "connect")
        def _wait_longer(dbapi_connection, _record):
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
            cursor.close()

    enable_sqlite_wal.__wrapped__ = upstream
    db_models.enable_sqlite_wal = enable_sqlite_wal
