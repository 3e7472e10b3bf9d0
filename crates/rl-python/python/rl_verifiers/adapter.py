"""What rl_verifiers asks of a verifiers environment, whichever API it was written against:
one `Adapter` per kind (`legacy.py`: v0, `v1.py`: v1), the rest of rl_verifiers (run-api,
pre-flight output, counts, the held-out slice) written once against this interface.

An adapter runs in the environment's own Python (verifiers v0 and v1 cannot share one) and
imports verifiers only there."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncContextManager, Dict, Iterable, List, Optional, Protocol

if TYPE_CHECKING:
    from rl_verifiers.tool_rendering import Rendering

KINDS = ("atropos", "verifiers-v1", "verifiers-v0")

# atroposlib's mask at positions that are not trained on, and its logprob at prompt positions.
PROMPT_MASK = -100
PROMPT_LOGPROB = 1.0


@dataclass
class Endpoint:
    """Where a rollout's model answers: an OpenAI-compatible base URL ending in `/v1`.
    `training`: it is rl's trainer, which returns token ids and sampler logprobs, and every
    sampled token must come back with them; otherwise (a pre-flight's model) text suffices."""

    base_url: str
    model: str
    api_key: str
    training: bool
    # The run's tokenizer (a folder or hub id), for a client that renders prompts itself.
    tokenizer: Optional[str] = None


@dataclass
class Sequence:
    """One sampled branch of a rollout, as run-api takes it."""

    tokens: List[int]
    masks: List[int]  # PROMPT_MASK where not sampled, the token id where sampled
    logprobs: List[float]  # PROMPT_LOGPROB where not sampled, the sampler's where sampled
    messages: List[Dict[str, Any]]  # the branch as chat messages (role, content)


@dataclass
class Rollout:
    reward: float
    # Each named reward and metric the environment reports (name -> value).
    rewards: Dict[str, float] = field(default_factory=dict)
    # Empty when the endpoint is not training (text only) or the rollout failed.
    sequences: List[Sequence] = field(default_factory=list)
    # The conversation, for a pre-flight's output and the rollouts page.
    messages: List[Dict[str, Any]] = field(default_factory=list)
    # Why the rollout failed ("TypeError: ..."), or None.
    error: Optional[str] = None
    # The completion reached its token limit.
    truncated: bool = False


@dataclass
class Task:
    """One task the environment offers. `key` is stable across runs (its content), so the
    held-out slice (rl_env's content hash) takes the same tasks every time."""

    key: str
    payload: Any


class Adapter(Protocol):
    """Made by its module's `open_adapter(module) -> Adapter` from the environment's imported
    module (nothing loaded yet: `own_fields` reads what it can without loading), then `load`ed
    once with the environment's own settings before anything else is asked."""

    kind: str

    def own_fields(self) -> Dict[str, Any]:
        """The environment's own settings by name (v1: the taskset config's fields, v0:
        load_environment's keyword arguments) with their defaults, to tell them apart from
        the run-level keys of the run config's `env:` section."""

    def load(self, own_args: Dict[str, Any]) -> None:
        """Loads the environment with `own_args` (names of `own_fields`, values coerced to
        their types). Raises whatever the environment raises: rl_verifiers names it and exits."""

    def serving(self) -> AsyncContextManager[None]:
        """What must run while rollouts do (v1: `env.serving()`); a no-op where nothing must."""

    def tasks(self) -> Iterable[Task]:
        """The environment's tasks in its own order (may be endless)."""

    def tool_names(self) -> List[str]:
        """The tools the environment gives the model, by name (none: [])."""

    def rendering(self, endpoint: Endpoint) -> Optional["Rendering"]:
        """How rl renders the prompts sampled at `endpoint` (`tool_rendering`), or None when
        the endpoint renders them itself (a pre-flight's outside model) or cannot be told."""

    # Optional: `def eval_tasks(self) -> Optional[Iterable[Task]]`, the tasks of the
    # environment's own evaluation split (None: it has none). With one, held-out processes
    # draw from it and training every task (as rl_env's `get_next_eval_item`); without, the
    # held-out slice is cut from `tasks` by content.

    async def run_group(self, task: Task, size: int, endpoint: Endpoint, sampling: Dict[str, Any]) -> List[Rollout]:
        """`size` rollouts of `task` against `endpoint`. `sampling`: `max_tokens`,
        `temperature`, `top_p` (OpenAI's names). Never raises for one rollout's failure: that
        rollout carries `error`."""
