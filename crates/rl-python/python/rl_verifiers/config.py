"""What a run or a pre-flight asks of rl_verifiers: the run YAML (`--config`) and atroposlib-style
flags (`--env.FIELD VALUE`, `--openai.FIELD VALUE`, later ones win), split into the run-level
settings rl_verifiers honours and the environment's own settings (`Adapter.own_fields`).

Pure: no verifiers, no network. The key never comes from here in a pre-flight (see `endpoint`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional, Tuple

from rl_verifiers.adapter import Endpoint

# The variable a pre-flight's key arrives in (crates/rl-preflight/src/command.rs, CHILD_KEY_VARIABLE).
KEY_VARIABLE = "OPENAI_API_KEY"
# What an OpenAI client is handed when the endpoint takes no key: the client refuses none.
NO_KEY = "no-key-needed"
SECTIONS = ("env", "openai")
# A run's environment, a pre-flight's model, the check before a run, and the tools the
# environment gives the model (asked before a pre-flight of rl's own models): `rl_verifiers.main`.
SERVE, PROCESS, CHECK, TOOLS = "serve", "process", "check", "tools"
MODES = (SERVE, PROCESS, CHECK, TOOLS)


class ConfigError(ValueError):
    """The run config or a flag cannot be used as given."""


@dataclass
class RunSettings:
    """The run-level fields of `env:` rl_verifiers honours (atroposlib's names and defaults).
    Every other key that is not the environment's own is ignored (`steps_per_eval`,
    `use_wandb`: the trainer logs; `eval_limit_ratio` …)."""

    group_size: int = 4
    max_token_length: int = 2048
    total_steps: int = 1000
    batch_size: int = -1
    # Groups under way at once; -1: atroposlib's "per server" default, here 1.
    max_num_workers: int = -1
    max_batches_offpolicy: int = 3
    rollout_server_url: str = "http://localhost:8000"
    tokenizer_name: Optional[str] = None
    wandb_name: Optional[str] = None
    inference_weight: float = 1.0
    # Seconds a group may take before it is abandoned (and counted as an error); <= 0: never.
    worker_timeout: float = 600.0
    # Groups whose scores are all equal are not sent (atroposlib's default; process mode: sent).
    ensure_scores_are_not_same: bool = True
    data_path_to_save_groups: Optional[str] = None

    @property
    def workers(self) -> int:
        return self.max_num_workers if self.max_num_workers > 0 else 1


RUN_FIELDS = {f.name: f for f in fields(RunSettings)}
# atroposlib's other run-level keys, which rl writes or a pre-flight passes: not used here (the
# trainer logs to WandB, evaluation is rl's), and not worth a note.
ATROPOS_KEYS = frozenset(
    ("use_wandb", "steps_per_eval", "eval_limit_ratio", "eval_handling", "include_messages",
     "num_rollouts_to_keep", "num_rollouts_per_group_for_logging", "min_items_sent_before_logging",
     "min_batch_allocation", "data_dir_to_save_evals", "max_eval_workers", "thinking_mode",
     "reasoning_effort", "max_reasoning_tokens", "max_num_workers_per_node")
)


@dataclass
class Invocation:
    """`serve|process [--config CFG] [--section.field value]...` as read: the `env:` mapping
    and `openai:` entry 0, flags applied over the file."""

    mode: str
    env: Dict[str, Any] = field(default_factory=dict)
    openai: Dict[str, Any] = field(default_factory=dict)
    config_path: Optional[str] = None


def parse_invocation(argv: List[str]) -> Invocation:
    if not argv or argv[0] not in MODES:
        raise ConfigError(f"the mode is {', '.join(MODES)}, not {argv[0] if argv else 'nothing'!r}")
    invocation = Invocation(mode=argv[0])
    flags: List[Tuple[str, str, str]] = []
    rest = argv[1:]
    index = 0
    while index < len(rest):
        arg = rest[index]
        if not arg.startswith("--"):
            raise ConfigError(f"unexpected argument {arg!r}: flags are --config FILE or --env.FIELD VALUE / --openai.FIELD VALUE")
        name, equals, value = arg[2:].partition("=")
        if not equals:
            if index + 1 >= len(rest):
                raise ConfigError(f"--{name} has no value")
            value = rest[index + 1]
            index += 1
        index += 1
        if name == "config":
            invocation.config_path = value
            continue
        section, dot, key = name.partition(".")
        if not dot or section not in SECTIONS or not key:
            raise ConfigError(f"unknown flag --{name}: flags are --config FILE or --env.FIELD VALUE / --openai.FIELD VALUE")
        flags.append((section, key, value))
    if invocation.config_path is not None:
        invocation.env, invocation.openai = read_config(invocation.config_path)
    for section, key, value in flags:
        getattr(invocation, section)[key] = value
    return invocation


def read_config(path: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The `env:` mapping and the first `openai:` entry of a run YAML."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            document = yaml.safe_load(f)
    except OSError as error:
        raise ConfigError(f"the run config {path} cannot be read: {error}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"the run config {path} is not YAML: {error}") from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(f"the run config {path} is not a mapping")
    env = document.get("env") or {}
    if not isinstance(env, dict):
        raise ConfigError(f"env: in {path} is not a mapping")
    openai = document.get("openai") or []
    if isinstance(openai, dict):
        openai = [openai]
    if not isinstance(openai, list) or not all(isinstance(entry, dict) for entry in openai):
        raise ConfigError(f"openai: in {path} is not a list of mappings")
    return dict(env), dict(openai[0]) if openai else {}


def split_env(env: Dict[str, Any], own_fields: Dict[str, Any]) -> Tuple[RunSettings, Dict[str, Any], List[str]]:
    """(run settings, the environment's own arguments, the keys neither honours). A key that is
    an own field goes to the environment; one that is also run-level is honoured by the run too."""
    run = RunSettings()
    own: Dict[str, Any] = {}
    ignored: List[str] = []
    for key, value in env.items():
        if key in own_fields:
            own[key] = coerce(value, own_fields[key], f"env.{key}")
        if key in RUN_FIELDS:
            # The run fields whose default is None are text.
            sample = RUN_FIELDS[key].default
            if value is None and sample is not None:
                continue
            setattr(run, key, coerce(value, "" if sample is None else sample, f"env.{key}"))
        elif key not in own_fields and key not in ATROPOS_KEYS:
            ignored.append(key)
    return run, own, ignored


def coerce(value: Any, default: Any, name: str) -> Any:
    """`value` (a flag's string, or what YAML read) as the type of `default` (a field's
    default); a field of no plain type takes what YAML makes of a string (`3`, `true`, `[a]`)."""
    if value is None:
        return None
    if not isinstance(value, str):
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ConfigError(f"{name} is {value!r}, not true or false")
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value
    text = value.strip()
    if text in ("None", "null", "~") and not isinstance(default, str):
        return None
    if isinstance(default, bool):
        lowered = text.lower()
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{name} is {value!r}, not true or false")
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{name} is {value!r}, not a whole number") from None
    if isinstance(default, float):
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"{name} is {value!r}, not a number") from None
    if isinstance(default, str):
        return value
    import yaml

    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        return value
    if isinstance(default, (list, tuple)) and not isinstance(parsed, list):
        raise ConfigError(f"{name} is {value!r}, not a list")
    if isinstance(default, dict) and not isinstance(parsed, dict):
        raise ConfigError(f"{name} is {value!r}, not a mapping")
    return parsed


def endpoint(invocation: Invocation, run: RunSettings, training: bool, environ=os.environ) -> Endpoint:
    """The model's endpoint from `openai:` entry 0. A pre-flight's key comes only from
    `OPENAI_API_KEY` (its `--openai.api_key` is a placeholder, never a key); a run's from the
    YAML's entry (the trainer's, no secret) else that variable."""
    base_url = invocation.openai.get("base_url")
    model = invocation.openai.get("model_name")
    if not isinstance(base_url, str) or not base_url:
        raise ConfigError("no endpoint: openai.base_url is not set")
    if not isinstance(model, str) or not model:
        raise ConfigError("no model: openai.model_name is not set")
    key = environ.get(KEY_VARIABLE) or None
    if invocation.mode == SERVE:
        configured = invocation.openai.get("api_key")
        if isinstance(configured, str) and configured and configured != "None":
            key = configured
    tokenizer = invocation.openai.get("tokenizer_name") or run.tokenizer_name
    return Endpoint(
        base_url=base_url.rstrip("/"),
        model=model,
        api_key=key or NO_KEY,
        training=training,
        tokenizer=str(tokenizer) if tokenizer else None,
    )


def describe_ignored(keys: List[str]) -> Optional[str]:
    if not keys:
        return None
    return "rl_verifiers: not the environment's own and not used by this runner: " + ", ".join(sorted(keys))

