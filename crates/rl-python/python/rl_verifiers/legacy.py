"""The v0 adapter: an environment written against verifiers' legacy API (verifiers 0.3.x,
`import verifiers as vf`, which answers from `verifiers.legacy`): a module with
`load_environment(**kwargs) -> vf.Environment`.

- Its own settings: `load_environment`'s keyword arguments (name -> default).
- Tasks: the rows of `env.get_dataset()` (else, an environment with only an eval dataset, of
  `env.get_eval_dataset()`); its own eval split, when it has one besides, is `eval_tasks`.
- A group: `env.run_group(inputs, client, model, sampling_args, state_columns=["trajectory"])`
  with a `vf.OpenAIChatCompletionsClient` around an `openai.AsyncOpenAI` on the endpoint — never
  a `vf.ClientConfig`, whose default is Prime's inference URL. Against a training endpoint the
  requests ask for token ids and logprobs (`logprobs: true`, `return_token_ids: true`), and each
  trajectory step's `tokens` (`prompt_ids`, `completion_ids`, `completion_mask`,
  `completion_logprobs`) is one sampled turn. Against a training endpoint the client is
  verifiers' token client (`OpenAIChatCompletionsTokenClient`: a turn's prompt is the turn
  before's tokens plus the environment's reply), so a multi-turn (tool-using) rollout's turns
  join into one sequence (`scored.joined_turns`).
- Refused: environments that run in Prime's sandboxes (`SandboxEnv`, `PythonEnv`,
  `CliAgentEnv` and kin), which would reach Prime's cloud."""

from __future__ import annotations

import contextlib
import copy
import inspect
from types import ModuleType
from typing import Any, AsyncIterator, Dict, Iterable, List, Optional, Tuple

from rl_env import item_key
from rl_verifiers.adapter import Endpoint, Rollout, Task
from rl_verifiers.environment import LoadError
from rl_verifiers.scored import chat_messages, joined_turns, prompt_sequence
from rl_verifiers.tool_rendering import Rendering, chat_template_rendering

KIND = "verifiers-v0"
# The classes whose rollouts run in Prime's sandboxes (by module and name, so that none of
# them need be importable to be recognised).
SANDBOXED = {
    ("verifiers.legacy.envs.sandbox_env", "SandboxEnv"),
    ("verifiers.legacy.envs.experimental.sandbox_mixin", "SandboxMixin"),
    ("verifiers.legacy.envs.experimental.cli_agent_env", "CliAgentEnv"),
    ("verifiers.legacy.envs.integrations.openenv_env", "OpenEnvEnv"),
}
# Retries of a failed model call by the OpenAI client (the trainer's endpoint is local).
CLIENT_RETRIES = 2
# One model call's bound (a run's group is bounded besides by its worker_timeout).
REQUEST_TIMEOUT_SECONDS = 600.0


def open_adapter(module: ModuleType) -> "LegacyAdapter":
    return LegacyAdapter(module)


class LegacyAdapter:
    kind = KIND

    def __init__(self, module: ModuleType):
        load_environment = getattr(module, "load_environment", None)
        if not callable(load_environment):
            raise LoadError(
                f"{module.__name__} has no load_environment(): not a verifiers v0 environment"
            )
        self.module = module
        self.load_environment = load_environment
        self.env: Any = None
        self.clients: Dict[Tuple[str, str], Any] = {}

    def own_fields(self) -> Dict[str, Any]:
        fields: Dict[str, Any] = {}
        for name, parameter in inspect.signature(self.load_environment).parameters.items():
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            fields[name] = None if parameter.default is parameter.empty else parameter.default
        return fields

    def load(self, own_args: Dict[str, Any]) -> None:
        import verifiers as vf

        env = self.load_environment(**own_args)
        if not isinstance(env, vf.Environment):
            raise LoadError(
                f"{self.module.__name__}.load_environment() returned {type(env).__name__}, not a "
                "verifiers Environment (verifiers v0: import verifiers as vf)"
            )
        message_type = getattr(env, "message_type", "chat")
        if message_type != "chat":
            raise LoadError(
                f"{self.module.__name__} is a {message_type!r}-style environment (message_type="
                f"{message_type!r}): rl samples a policy through chat completions only, so it "
                "refuses environments that are not chat"
            )
        sandboxed = sandboxed_part(env)
        if sandboxed is not None:
            raise LoadError(
                f"{sandboxed} runs its rollouts in Prime's sandboxes (Prime's cloud): rl runs "
                "environments locally only and refuses it"
            )
        self.env = env

    def tool_names(self) -> List[str]:
        return [tool.name for tool in getattr(self.env, "tool_defs", None) or []]

    def rendering(self, endpoint: Endpoint) -> Optional[Rendering]:
        """A run's turns are rendered by the trainer's chat template (its token routes)."""
        if not endpoint.training or not endpoint.tokenizer:
            return None
        return chat_template_rendering(endpoint.tokenizer)

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        try:
            yield None
        finally:
            clients, self.clients = list(self.clients.values()), {}
            for client in clients:
                with contextlib.suppress(Exception):
                    await client.close()

    def tasks(self) -> Iterable[Task]:
        env = self.env
        if env.dataset is not None or env.dataset_source is not None:
            return rows_as_tasks(env.get_dataset())
        return rows_as_tasks(env.get_eval_dataset())

    def eval_tasks(self) -> Optional[Iterable[Task]]:
        env = self.env
        has_train = env.dataset is not None or env.dataset_source is not None
        has_eval = env.eval_dataset is not None or env.eval_dataset_source is not None
        if has_train and has_eval:
            return rows_as_tasks(env.get_eval_dataset())
        return None

    async def run_group(self, task: Task, size: int, endpoint: Endpoint, sampling: Dict[str, Any]) -> List[Rollout]:
        client = self.client(endpoint)
        args = self.sampling_args(sampling, endpoint.training)
        inputs = [copy.deepcopy(task.payload) for _ in range(size)]
        try:
            outputs = await self.env.run_group(inputs, client, endpoint.model, args, state_columns=["trajectory"])
        except Exception as error:  # noqa: BLE001 - the group failed as a whole: each rollout says why
            message = f"{type(error).__name__}: {error}"
            return [Rollout(reward=0.0, error=message) for _ in range(size)]
        return [rollout_of(output, endpoint.training) for output in outputs]

    def client(self, endpoint: Endpoint) -> Any:
        """One client per endpoint, on exactly its base URL (never a default one)."""
        key = (endpoint.base_url, endpoint.model)
        client = self.clients.get(key)
        if client is None:
            import httpx
            import verifiers as vf
            from openai import AsyncOpenAI

            timeout = REQUEST_TIMEOUT_SECONDS
            openai = AsyncOpenAI(
                base_url=endpoint.base_url,
                api_key=endpoint.api_key,
                max_retries=CLIENT_RETRIES,
                timeout=timeout,
                # No proxy from the environment: the endpoint is named, and loopback stays loopback.
                http_client=httpx.AsyncClient(timeout=timeout, trust_env=False),
            )
            if endpoint.training:
                # Token in, token out: each turn's prompt is the turn before's tokens as
                # sampled, then the environment's reply rendered by the template (the
                # trainer's /tokenize and /v1/chat/completions/tokens), so a rollout's turns
                # are one sequence to train on (scored.joined_turns).
                from verifiers.legacy.clients import OpenAIChatCompletionsTokenClient

                client = OpenAIChatCompletionsTokenClient(openai)
            else:
                client = vf.OpenAIChatCompletionsClient(openai)
            self.clients[key] = client
        return client

    def sampling_args(self, sampling: Dict[str, Any], training: bool) -> Dict[str, Any]:
        """The environment's own sampling arguments under rl's (its completion limit kept when
        it is the smaller), token ids and logprobs asked for against a training endpoint."""
        args = copy.deepcopy(getattr(self.env, "sampling_args", None) or {})
        args.pop("n", None)
        extra_body = dict(args.pop("extra_body", None) or {})
        own_limit = args.get("max_tokens") or args.get("max_completion_tokens")
        args.pop("max_completion_tokens", None)
        args.update({key: value for key, value in sampling.items() if value is not None})
        if isinstance(own_limit, int) and own_limit > 0 and isinstance(args.get("max_tokens"), int):
            args["max_tokens"] = min(own_limit, args["max_tokens"])
        if training:
            args["logprobs"] = True
            extra_body["return_token_ids"] = True
        if extra_body:
            args["extra_body"] = extra_body
        return args


def sandboxed_part(env: Any) -> Optional[str]:
    """The name of the part of `env` (itself, or one of an EnvGroup's) that runs in Prime's
    sandboxes, or None."""
    for cls in type(env).__mro__:
        if (cls.__module__, cls.__name__) in SANDBOXED:
            return type(env).__name__
    for member in getattr(env, "envs", None) or []:
        found = sandboxed_part(member)
        if found is not None:
            return found
    return None


def rows_as_tasks(dataset: Any) -> Iterable[Task]:
    for row in dataset:
        row = dict(row)
        yield Task(key=item_key(row), payload=row)


def rollout_of(output: Dict[str, Any], training: bool) -> Rollout:
    """A Rollout from verifiers' RolloutOutput (with its `trajectory`)."""
    messages = chat_messages(list(output.get("prompt") or []) + list(output.get("completion") or []))
    rewards = {str(name): value for name, value in (output.get("metrics") or {}).items()}
    reward = output.get("reward")
    rollout = Rollout(
        reward=float(reward) if isinstance(reward, (int, float)) else 0.0,
        rewards=rewards,
        messages=messages,
        truncated=bool(output.get("is_truncated")),
    )
    error = output.get("error")
    if error:
        rollout.error = describe_error(error)
        return rollout
    if training:
        turns = []
        for number, step in enumerate(output.get("trajectory") or []):
            tokens = step.get("tokens")
            if not tokens:
                rollout.error = (
                    f"turn {number + 1} came back without token ids: the endpoint does not "
                    "return them (return_token_ids, logprobs)"
                )
                rollout.sequences = []
                return rollout
            step_messages = chat_messages(list(step.get("prompt") or []) + list(step.get("completion") or []))
            turns.append(
                prompt_sequence(
                    tokens["prompt_ids"],
                    tokens["completion_ids"],
                    tokens["completion_mask"],
                    tokens["completion_logprobs"],
                    step_messages,
                )
            )
        rollout.sequences = joined_turns(turns)
    return rollout


def describe_error(error: Any) -> str:
    """verifiers' ErrorData (`error`, `message`, `error_chain_str` …) in one line."""
    if isinstance(error, dict):
        chain = error.get("error_chain_str") or ""
        name = error.get("error") or "Error"
        message = error.get("message") or ""
        text = chain if chain else f"{name}: {message}"
        return " ".join(str(text).split())
    return " ".join(str(error).split())
