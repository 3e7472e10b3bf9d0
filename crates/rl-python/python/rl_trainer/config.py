"""The run YAML, checked into a `TrainerConfig`.

The trainer reads the same file as the environment: `env:` (atroposlib's BaseEnvConfig fields
it shares with the env), `openai:` (the first server is where the trainer serves inference) and
`tinker:` (the trainer's own settings, which the env ignores). Unknown keys are ignored; a value
of the wrong type or out of range raises `ConfigError` naming the key (the CLI exits 2).
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Mapping, Optional

import yaml

# Every key this module reads, with its default and bounds: written by rl from its table
# (crates/rl-settings/src/trainer.rs), so that rl and the trainer never disagree on either.
CONTRACT = json.loads((Path(__file__).parents[1] / "contract.json").read_text(encoding="utf-8"))

# How much longer than `eval_timeout_secs` the trainer waits for `rl runs evaluate`.
EVALUATE_MARGIN_SECS = float(CONTRACT["constants"]["evaluate_margin_secs"])

# The exit code of a run the trainer ended before a step that would pass one of its caps,
# after saving its state: rl records the run as `capped`, not failed.
EXIT_CAPPED = int(CONTRACT["constants"]["exit_capped"])

# Placeholder key for a Tinker-compatible engine on loopback (the SDK insists on the prefix).
LOCAL_API_KEY = "tml-local"


class ConfigError(Exception):
    """A missing, malformed or out-of-range setting; `key` is its dotted name."""

    def __init__(self, key: str, message: str):
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}")


@dataclass(frozen=True)
class TrainerConfig:
    # env:
    rollout_server_url: str
    total_steps: int
    batch_size: int  # as registered with run-api (<= 0 in the YAML -> 2 * group_size)
    group_size: int
    max_token_length: int
    tokenizer_name: str
    use_wandb: bool
    wandb_name: Optional[str]
    # openai[0]:
    inference_base_url: str
    serve_host: str
    serve_port: int
    model_name: str
    # tinker:
    base_model: str
    tinker_base_url: Optional[str]
    lora_rank: int
    learning_rate: float
    max_token_trainer_length: int
    save_every: int
    keep_rollouts: int
    batch_timeout_secs: float
    wandb_project: str
    wandb_group: str
    wandb_run_name: str
    checkpoint_dir: str
    save_checkpoint_interval: int
    linger_secs: float
    request_timeout_secs: float
    engine_unreachable_secs: float
    max_retries: int
    # Evaluation during training (rl runs evaluate): every this many steps, 0 for never.
    eval_every: int
    eval_timeout_secs: float
    # A resumed run: the state (weights + optimizer) it continues from, after this step.
    resume_state: Optional[str]
    starting_step: int
    # What the run's tokens cost (per million; per hour of the local engine's machine), none
    # when no price is set, and the caps that end it `capped` before a step would pass one.
    currency: str
    price_prompt_per_million: Optional[float]
    price_sampled_per_million: Optional[float]
    price_trained_per_million: Optional[float]
    price_machine_per_hour: Optional[float]
    max_cost: Optional[float]
    max_tokens: Optional[int]
    max_hours: Optional[float]
    # The algorithm (issue 43): Tinker's loss_fn and its bounds, how a group's advantages are
    # normalised, what becomes of a truncated completion.
    loss: str
    clip_low: Optional[float]
    clip_high: Optional[float]
    dro_beta: Optional[float]
    advantage_norm: str
    truncated: str
    overlong_band: int
    # The KL penalty to the base model, and whether its estimate is logged when there is none.
    kl_coef: float
    log_kl_base: bool
    # A group one of whose completions was sampled more than this many optimizer steps before
    # the weights it would train is dropped (None: no bound; `samples.py`).
    max_steps_off_policy: Optional[int]
    # What the reader wants the operator to know (defaults that may differ from the env's).
    notes: tuple = field(default=())

    def summary(self) -> dict:
        """The settings worth printing at start (no secrets exist in here)."""
        return {
            "rollout_server_url": self.rollout_server_url,
            "inference": f"http://{self.serve_host}:{self.serve_port}/v1",
            "tinker_base_url": self.tinker_base_url or "(hosted Tinker)",
            "base_model": self.base_model,
            "tokenizer": self.tokenizer_name,
            "total_steps": self.total_steps,
            "batch_size": self.batch_size,
            "group_size": self.group_size,
            "lora_rank": self.lora_rank,
            "learning_rate": self.learning_rate,
            "max_token_trainer_length": self.max_token_trainer_length,
            "save_every": self.save_every,
            "keep_rollouts": self.keep_rollouts,
            "batch_timeout_secs": self.batch_timeout_secs,
            "loss": self.loss,
            **({"loss_fn_config": self.loss_fn_config()} if self.loss_fn_config() else {}),
            "advantage_norm": self.advantage_norm,
            "truncated": self.truncated,
            **({"overlong_band": self.overlong_band} if self.truncated == "penalty" else {}),
            **({"kl_coef": self.kl_coef} if self.kl_coef > 0 else {}),
            **({"log_kl_base": True} if self.log_kl_base else {}),
            **({"max_steps_off_policy": self.max_steps_off_policy} if self.max_steps_off_policy is not None else {}),
            **({"eval_every": self.eval_every} if self.eval_every else {}),
            **({"resume_state": self.resume_state, "starting_step": self.starting_step} if self.resume_state else {}),
        }


    def loss_fn_config(self) -> Optional[dict]:
        """Tinker's `loss_fn_config` for the loss: the clip thresholds of ppo/cispo, dro's
        beta; only what the run set (the engine's own defaults otherwise), None when nothing."""
        given = {}
        if self.loss in ("ppo", "cispo"):
            given = {"clip_low_threshold": self.clip_low, "clip_high_threshold": self.clip_high}
        elif self.loss == "dro":
            given = {"beta": self.dro_beta}
        config = {key: value for key, value in given.items() if value is not None}
        return config or None

    def measures_kl_base(self) -> bool:
        """Each step asks the base weights' logprobs of its completions (the KL penalty, or
        its estimate logged alone)."""
        return self.kl_coef > 0 or self.log_kl_base

    def unused_algorithm_settings(self) -> List[str]:
        """The settings this run's loss or truncation ignores, to say at start."""
        unused = []
        if self.loss not in ("ppo", "cispo"):
            unused += [f"tinker.{k}" for k in ("clip_low", "clip_high") if getattr(self, k) is not None]
        if self.loss != "dro" and self.dro_beta is not None:
            unused.append("tinker.dro_beta")
        if self.truncated != "penalty" and self.overlong_band:
            unused.append("tinker.overlong_band")
        return unused


# --------------------------------------------------------------------------- value readers


class _Section:
    """One mapping of the YAML with typed, range-checked getters that name the key on error.

    A key of the contract takes its default and bounds from there; `resolved` is the default
    of a key the contract defers to another key or to where the engine is (the caller has
    read those), and of a key outside the contract (`openai[0]`'s)."""

    def __init__(self, name: str, data: Any):
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ConfigError(name, f"must be a mapping, got {_kind(data)}")
        self.name = name
        self.data = data
        self.specs = CONTRACT["sections"].get(name, {})

    def key(self, key: str) -> str:
        return f"{self.name}.{key}"

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def default(self, key: str, resolved: Any = None) -> Any:
        spec = self.specs.get(key)
        if spec is None or isinstance(spec["default"], dict):
            return resolved
        return spec["default"]

    def _check_bounds(self, key: str, number: float) -> None:
        spec = self.specs.get(key) or {}
        minimum, maximum = spec.get("minimum"), spec.get("maximum")
        if minimum is not None and (number < minimum or (spec.get("exclusive") and number == minimum)):
            relation = ">" if spec.get("exclusive") else ">="
            raise ConfigError(self.key(key), f"must be {relation} {minimum:g}, got {number:g}")
        if maximum is not None and number > maximum:
            raise ConfigError(self.key(key), f"must be <= {maximum:g}, got {number:g}")

    def string(self, key: str, resolved: Optional[str] = None) -> Optional[str]:
        default = self.default(key, resolved)
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ConfigError(self.key(key), f"must be a string, got {_kind(value)}")
        text = str(value).strip()
        if not text:
            if default is not None:
                return default
            raise ConfigError(self.key(key), "must not be empty")
        choices = (self.specs.get(key) or {}).get("choices") or []
        if choices and text not in choices:
            raise ConfigError(self.key(key), f"must be one of {', '.join(choices)}, got {_show(text)}")
        return text

    def integer(self, key: str, resolved: Optional[int] = None) -> int:
        value = self.data.get(key)
        if value is None:
            return self.default(key, resolved)
        number = _as_int(value)
        if number is None:
            raise ConfigError(self.key(key), f"must be an integer, got {_show(value)}")
        self._check_bounds(key, number)
        return number

    def number(self, key: str, resolved: Optional[float] = None) -> Optional[float]:
        value = self.data.get(key)
        if value is None:
            default = self.default(key, resolved)
            return None if default is None else float(default)
        number = _as_float(value)
        if number is None or not math.isfinite(number):
            raise ConfigError(self.key(key), f"must be a finite number, got {_show(value)}")
        self._check_bounds(key, number)
        return number

    def boolean(self, key: str) -> bool:
        value = self.data.get(key)
        if value is None:
            return self.default(key)
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ConfigError(self.key(key), f"must be true or false, got {_show(value)}")


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _kind(value: Any) -> str:
    return type(value).__name__ if value is not None else "null"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _as_int(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _as_float(value: Any) -> Optional[float]:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


# --------------------------------------------------------------------------- URLs


def is_loopback_host(host: Optional[str]) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _http_url(key: str, value: str, schemes=("http", "https")) -> urllib.parse.SplitResult:
    try:
        parts = urllib.parse.urlsplit(value)
        _ = parts.port  # raises ValueError on a bad port
    except ValueError as e:
        raise ConfigError(key, f"is not a valid URL ({e}): {_show(value)}") from None
    if parts.scheme not in schemes or not parts.hostname:
        wanted = " or ".join(f"{s}://HOST[:PORT]" for s in schemes)
        raise ConfigError(key, f"must be an {wanted} URL, got {_show(value)}")
    return parts


def _serving_address(key: str, base_url: str) -> tuple:
    """(bind host, port) for the trainer's inference server from `openai[0].base_url`.

    The path must be `/v1` (or empty): the OpenAI routes are served under /v1 and SGLang's
    `/generate` at the root, where atroposlib looks for it (base_url with '/v1' removed)."""
    parts = _http_url(key, base_url, schemes=("http",))
    path = parts.path.rstrip("/")
    if path not in ("", "/v1"):
        raise ConfigError(key, f"must end in /v1 (the trainer serves /v1/... and /generate), got {_show(base_url)}")
    host = parts.hostname
    if host.lower() == "localhost":
        host = "127.0.0.1"
    return host, parts.port or 80


# --------------------------------------------------------------------------- loading


def load_config(path: str) -> TrainerConfig:
    """Read and check the run YAML at `path`."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except OSError as e:
        raise ConfigError("--config", f"cannot read {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ConfigError("--config", f"{path} is not valid YAML: {e}") from None
    return parse_config(doc)


def parse_config(doc: Any) -> TrainerConfig:
    """Check an already-parsed run YAML document."""
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise ConfigError("(top level)", f"must be a mapping with env/openai/tinker sections, got {_kind(doc)}")
    env = _Section("env", doc.get("env"))
    tinker = _Section("tinker", doc.get("tinker"))
    notes = []

    for key in ("total_steps", "group_size"):
        if not env.has(key):
            notes.append(
                f"env.{key} is not in the run config: using atroposlib's default "
                f"{env.default(key)} (the environment's own default may differ)"
            )

    rollout_server_url = env.string("rollout_server_url")
    _http_url(env.key("rollout_server_url"), rollout_server_url)
    rollout_server_url = rollout_server_url.rstrip("/")
    total_steps = env.integer("total_steps")
    group_size = env.integer("group_size")
    batch_size = env.integer("batch_size")
    if batch_size <= 0:
        batch_size = 2 * group_size
    max_token_length = env.integer("max_token_length")
    use_wandb = env.boolean("use_wandb")
    wandb_name = env.string("wandb_name")

    servers = doc.get("openai")
    if isinstance(servers, Mapping):
        servers = [servers]
    if not isinstance(servers, list) or not servers:
        raise ConfigError("openai", "must be a list with at least one server (the trainer serves openai[0])")
    server = _Section("openai[0]", servers[0])
    base_url = server.string("base_url")
    if base_url is None:
        raise ConfigError("openai[0].base_url", "is required: it is where the trainer serves inference")
    serve_host, serve_port = _serving_address("openai[0].base_url", base_url)

    tokenizer_name = env.string("tokenizer_name")
    base_model = tinker.string("base_model", resolved=tokenizer_name)
    if base_model is None:
        raise ConfigError("tinker.base_model", "is required when env.tokenizer_name is not set")
    if tokenizer_name is None:
        tokenizer_name = base_model
    model_name = server.string("model_name", resolved=base_model)

    tinker_base_url = tinker.string("base_url")
    if tinker_base_url is not None:
        _http_url(tinker.key("base_url"), tinker_base_url)
        tinker_base_url = tinker_base_url.rstrip("/")
    remote = not is_loopback_host(urllib.parse.urlsplit(tinker_base_url).hostname if tinker_base_url else None)

    lora_rank = tinker.integer("lora_rank")
    learning_rate = tinker.number("learning_rate")
    max_trainer_len = tinker.integer("max_token_trainer_length", resolved=max_token_length)
    save_every = tinker.integer("save_every")
    keep_rollouts = tinker.integer("keep_rollouts")
    batch_timeout_secs = tinker.number("batch_timeout_secs")
    run_name = tinker.string("wandb_run_name", resolved=wandb_name or "rl")
    wandb_project = tinker.string("wandb_project")
    wandb_group = tinker.string("wandb_group", resolved=run_name)
    checkpoint_dir = tinker.string("checkpoint_dir")
    save_checkpoint_interval = tinker.integer("save_checkpoint_interval")
    linger_secs = tinker.number("linger_secs")
    request_timeout_secs = tinker.number("request_timeout_secs")
    by_engine = tinker.specs["engine_unreachable_secs"]["default"]
    engine_unreachable_secs = tinker.number(
        "engine_unreachable_secs", resolved=by_engine["remote" if remote else "loopback"]
    )
    max_retries = tinker.integer("max_retries")
    eval_every = tinker.integer("eval_every")
    eval_timeout_secs = tinker.number("eval_timeout_secs")
    resume_state = tinker.string("resume_state")
    starting_step = tinker.integer("starting_step")
    costs = {
        key: tinker.number(key)
        for key in (
            "price_prompt_per_million",
            "price_sampled_per_million",
            "price_trained_per_million",
            "price_machine_per_hour",
            "max_cost",
            "max_hours",
        )
    }
    max_tokens = tinker.integer("max_tokens")
    if costs["max_cost"] is not None and all(
        costs[key] is None for key in costs if key.startswith("price_")
    ):
        raise ConfigError(tinker.key("max_cost"), "needs a price (tinker.price_*): without one nothing is counted against it")
    if starting_step >= total_steps:
        raise ConfigError(tinker.key("starting_step"), f"({starting_step}) must be below env.total_steps ({total_steps}): no step would be left")
    if starting_step > 0 and resume_state is None:
        raise ConfigError(tinker.key("resume_state"), "is required when tinker.starting_step is above 0: the saved state to continue from")

    if group_size > batch_size:
        raise ConfigError("env.batch_size", f"({batch_size}) must be at least env.group_size ({group_size})")

    return TrainerConfig(
        rollout_server_url=rollout_server_url,
        total_steps=total_steps,
        batch_size=batch_size,
        group_size=group_size,
        max_token_length=max_token_length,
        tokenizer_name=tokenizer_name,
        use_wandb=use_wandb,
        wandb_name=wandb_name,
        inference_base_url=base_url,
        serve_host=serve_host,
        serve_port=serve_port,
        model_name=model_name,
        base_model=base_model,
        tinker_base_url=tinker_base_url,
        lora_rank=lora_rank,
        learning_rate=learning_rate,
        max_token_trainer_length=max_trainer_len,
        save_every=save_every,
        keep_rollouts=keep_rollouts,
        batch_timeout_secs=batch_timeout_secs,
        wandb_project=wandb_project,
        wandb_group=wandb_group,
        wandb_run_name=run_name,
        checkpoint_dir=checkpoint_dir,
        save_checkpoint_interval=save_checkpoint_interval,
        linger_secs=linger_secs,
        request_timeout_secs=request_timeout_secs,
        engine_unreachable_secs=engine_unreachable_secs,
        max_retries=max_retries,
        eval_every=eval_every,
        eval_timeout_secs=eval_timeout_secs,
        resume_state=resume_state,
        starting_step=starting_step,
        currency=tinker.string("currency"),
        max_tokens=max_tokens,
        **costs,
        loss=tinker.string("loss"),
        clip_low=tinker.number("clip_low"),
        clip_high=tinker.number("clip_high"),
        dro_beta=tinker.number("dro_beta"),
        advantage_norm=tinker.string("advantage_norm"),
        truncated=tinker.string("truncated"),
        overlong_band=tinker.integer("overlong_band"),
        kl_coef=tinker.number("kl_coef"),
        log_kl_base=tinker.boolean("log_kl_base"),
        max_steps_off_policy=tinker.integer("max_steps_off_policy"),
        notes=tuple(notes),
    )


def effective_tinker_url(config: TrainerConfig, environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """The Tinker API URL the SDK will use: the config's, else TINKER_BASE_URL, else None (hosted)."""
    return config.tinker_base_url or (environ.get("TINKER_BASE_URL") or "").rstrip("/") or None


def resolve_api_key(config: TrainerConfig, environ: Mapping[str, str] = os.environ) -> str:
    """TINKER_API_KEY, or a placeholder for an engine on loopback. Never logged or written."""
    key = (environ.get("TINKER_API_KEY") or "").strip()
    if key:
        return key
    url = effective_tinker_url(config, environ)
    if url and is_loopback_host(urllib.parse.urlsplit(url).hostname):
        return LOCAL_API_KEY
    raise ConfigError(
        "TINKER_API_KEY",
        "is not set; it is required for a Tinker API that is not on loopback "
        f"({url or 'hosted Tinker'})",
    )
