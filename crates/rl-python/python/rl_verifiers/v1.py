"""The verifiers v1 adapter (verifiers >= 0.4, `import verifiers.v1 as vf`).

It loads an environment as `vf.load_environment` would, with an explicit config that
keeps everything on this machine: every agent seat runs in the `subprocess` runtime,
with the tool-less `null` harness unless the taskset ships its own, tool servers must
be local (so no tunnel is ever minted), and no eval run is opened (results are never
pushed: rl drives `Env.slots`/`Env.run_slot` itself, not the `vf-eval` runner). A taskset
whose prompts hold images is refused (rl trains text models); an endless one (`INFINITE`)
is drawn lazily like any other. A group
is `size` episodes of one task; each episode's trainable trace is one `Rollout`, each of
its root-to-leaf branches with sampled tokens one training `Sequence`.

Runs in the environment's own Python, which must hold `uv` (the `null` and `bash`
harnesses are PEP 723 scripts that `uv` prepares; rl setup installs it).

The training client renders prompts with the run's tokenizer through `renderers`; which
renderer is `RL_VERIFIERS_RENDERER` (a `renderers` RendererConfig as JSON, e.g.
`{"name": "default", "tool_parser": "qwen3"}`), else the one `renderers` picks from the
tokenizer's name (its default renderer, without tool calls, for a name it does not know)."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import shutil
import sys
import site
from pathlib import Path
from types import ModuleType
from typing import Any, AsyncContextManager, Dict, Iterator, List, Mapping, Optional

from rl_env import item_key
from rl_verifiers.adapter import PROMPT_LOGPROB, PROMPT_MASK, Endpoint, Rollout, Sequence, Task
from rl_verifiers.environment import LoadError
from rl_verifiers.tool_rendering import CannotRender, Rendering

KIND = "verifiers-v1"

# The harness rl runs a seat with when the taskset brings none: one chat loop, no shell.
NULL_HARNESS = "null"
# Harnesses whose program is a PEP 723 script prepared by `uv` (verifiers/v1/runtimes/base.py).
UV_SCRIPT_HARNESSES = ("null", "bash")
# verifiers' client configs read the endpoint key from a variable named in the config.
# The name holds "API_KEY" so the subprocess runtime strips it from every program it
# starts (verifiers/v1/runtimes/subprocess.py): the key stays in this process.
KEY_VARIABLE_PREFIX = "RL_VERIFIERS_API_KEY_"
# A client config left on Prime's inference default resolves its URL from this variable
# (verifiers/v1/configs/client.py); pointing it at a closed loopback port makes such a
# call (e.g. a judge nobody configured) fail here instead of reaching Prime's cloud.
PRIME_INFERENCE_VARIABLE = "PRIME_INFERENCE_URL"
PRIME_INFERENCE_BLOCKED = "http://127.0.0.1:9/prime-inference-is-not-used-by-rl/v1"
# The taskset config field rl fills itself (the taskset id).
RL_OWNED_TASKSET_FIELDS = ("id",)
# The renderer the training client uses, as JSON (see the module's doc).
RENDERER_VARIABLE = "RL_VERIFIERS_RENDERER"
# Tasks looked at as the environment loads for what rl cannot train (an endless taskset's
# first ones: iterating stops there).
TASKS_CHECKED = 8


def open_adapter(module: ModuleType, environ: Mapping[str, str] = os.environ) -> "V1Adapter":
    renderer = environ.get(RENDERER_VARIABLE)
    try:
        parsed = json.loads(renderer) if renderer else None
    except ValueError as e:
        raise LoadError(f"{RENDERER_VARIABLE} is not JSON: {e}") from e
    if parsed is not None and not isinstance(parsed, dict):
        raise LoadError(f"{RENDERER_VARIABLE} must be a JSON object (a renderers RendererConfig)")
    return V1Adapter(module.__name__, root_of(module), renderer=parsed)


def root_of(module: ModuleType) -> Optional[str]:
    """The folder the module's top-level package is imported from, unless that is a
    site-packages folder (every Python started from this one sees those already)."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve().parent
    for _ in module.__name__.split(".")[1:]:
        path = path.parent
    if Path(file).name == "__init__.py":
        path = path.parent
    site_folders = {str(Path(p).resolve()) for p in [*site.getsitepackages(), site.getusersitepackages()]}
    return None if str(path) in site_folders else str(path)


def prepare_process(root: Optional[str]) -> None:
    """What this process and the programs verifiers starts from it must see, set before
    verifiers is imported: the environment's folder importable (tool servers run as
    `python -m <module>` in a child), this Python's own `bin` first on PATH (its `uv`),
    `uv` never downloading a Python (only the package registry may be contacted), and
    Prime's inference default closed."""
    if root:
        if root not in sys.path:
            sys.path.insert(0, root)
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
    # Not resolved: a venv's python is a symlink, and its own folder is the venv's bin.
    bin_dir = str(Path(sys.executable).parent)
    paths = os.environ.get("PATH", "").split(os.pathsep)
    if bin_dir not in paths:
        os.environ["PATH"] = os.pathsep.join([bin_dir, *paths])
    os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")
    # uv reads no pip configuration: carry a pip index over so both use the same registry.
    if "PIP_INDEX_URL" in os.environ and "UV_DEFAULT_INDEX" not in os.environ:
        os.environ["UV_DEFAULT_INDEX"] = os.environ["PIP_INDEX_URL"]
    os.environ[PRIME_INFERENCE_VARIABLE] = PRIME_INFERENCE_BLOCKED


def lock_chat_program() -> None:
    """Locks the `null`/`bash` harnesses' chat program (a PEP 723 script) once, beside the
    copy verifiers prepares it from. verifiers runs `uv sync --script` in every new process
    with `UV_OFFLINE=false`; without a lock uv resolves the script against the package
    registry each time (it revalidates the index), so a machine that has installed it once
    could not run it again without the registry. With the lock uv installs what it pins,
    from its cache once it has them: only the first preparation needs the registry."""
    import subprocess

    from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE
    from verifiers.v1.runtimes.subprocess import SubprocessRuntime

    # Where verifiers/v1/runtimes/base.py `prepare_uv_script` puts it (the runtime's own user).
    data = CHAT_PROGRAM_SOURCE.encode()
    script = Path(SubprocessRuntime.scripts_dir) / f"{hashlib.sha256(data).hexdigest()}.py"
    if script.with_name(script.name + ".lock").exists():
        return
    script.parent.mkdir(parents=True, exist_ok=True)
    partial = script.with_name(f"{script.name}.{os.getpid()}.tmp")
    partial.write_bytes(data)
    os.replace(partial, script)
    locked = subprocess.run(
        ["uv", "lock", "--script", str(script), "-q", "--no-config"],
        capture_output=True,
        text=True,
        # As verifiers starts its programs: no key in uv's environment.
        env={**{k: v for k, v in os.environ.items() if "API_KEY" not in k.upper()}, "UV_OFFLINE": "false"},
    )
    if locked.returncode != 0:
        raise LoadError(f"uv could not lock the harness's chat program {script}: {locked.stderr.strip()[-2000:]}")


def task_key(data: Any) -> str:
    """A task's identity by its content (rl_env's item key of its data, its position `idx`
    left out, so the same task keeps its key when the taskset grows or is reordered)."""
    return item_key(data.model_dump(mode="json", exclude_none=True, exclude={"idx"}))


def untrainable(data: Any) -> Optional[str]:
    """Why rl cannot train on a task (its data), or None: a prompt with an image (verifiers'
    `ImageUrlContentPart`, the one content part beside text) needs a vision model, and rl's
    trainer samples and trains text only (its generate route refuses multimodal input)."""
    prompt = getattr(data, "prompt", None)
    if not isinstance(prompt, list):
        return None
    for message in prompt:
        content = getattr(message, "content", None)
        if isinstance(content, list) and any(getattr(part, "type", "text") != "text" for part in content):
            name = data.name or data.id or f"#{data.idx}"
            return (
                f"task {name}'s prompt holds an image: rl trains text models only, so it refuses "
                "multimodal tasksets"
            )
    return None


def describe_error(error: Any) -> str:
    """`Type: message` of a verifiers `Error` record or an exception."""
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"
    return f"{error.type}: {error.message}"


def wire_messages(messages: List[Any]) -> List[Dict[str, Any]]:
    from verifiers.v1.dialects.chat import message_to_wire

    return [message_to_wire(m) for m in messages]


def branch_sequence(branch: Any) -> Optional[Sequence]:
    """One root-to-leaf branch as a training sequence, or None when nothing on it was
    sampled with token ids (a relayed turn carries none)."""
    tokens = list(branch.token_ids)
    sampled = list(branch.sampled_mask)
    if not tokens or len(sampled) != len(tokens) or not any(sampled):
        return None
    logprobs = list(branch.logprobs)
    return Sequence(
        tokens=tokens,
        masks=[t if s else PROMPT_MASK for t, s in zip(tokens, sampled)],
        logprobs=[lp if s else PROMPT_LOGPROB for lp, s in zip(logprobs, sampled)],
        messages=wire_messages(branch.messages),
    )


def named_rewards(trace: Any) -> Dict[str, float]:
    """Each named reward's score (unweighted; `trace.reward` is the weighted sum) and
    each metric, skipping ones that recorded nothing. A metric named like a reward is
    kept as `metric/<name>`."""
    named = {name: float(r.score) for name, r in trace.rewards.items() if r is not None}
    for name, value in trace.metrics.items():
        if value is not None:
            named[f"metric/{name}" if name in named else name] = float(value)
    return named


def episode_rollout(episode: Any, training: bool) -> Rollout:
    """One episode as a rollout: its one trainable trace's reward, named rewards,
    conversation and (training) its branches' sequences; a failure as `error`."""
    trainable = [t for t in episode.traces if t.agent.trainable]
    if len(trainable) != 1:
        reason = describe_error(episode.errors[-1]) if episode.errors else None
        return Rollout(
            reward=0.0,
            error=reason
            or f"the episode has {len(trainable)} trainable traces; rl trains one per rollout",
        )
    trace = trainable[0]
    messages = wire_messages(trace.messages)
    failure = trace.errors[-1] if trace.errors else (episode.errors[-1] if episode.errors else None)
    if not episode.ok or not trace.ok:
        reason = describe_error(failure) if failure is not None else "the episode did not complete"
        return Rollout(reward=0.0, messages=messages, error=reason)
    rollout = Rollout(
        reward=float(trace.reward),
        rewards=named_rewards(trace),
        messages=messages,
        truncated=bool(trace.is_truncated),
    )
    if training:
        rollout.sequences = [s for b in trace.branches if b.trainable and (s := branch_sequence(b)) is not None]
        if not rollout.sequences:
            rollout.error = "no sampled tokens came back from the endpoint (the trace has no token ids)"
    return rollout


class V1Adapter:
    kind = KIND

    def __init__(
        self,
        module_name: str,
        root: Optional[str] = None,
        *,
        renderer: Optional[Mapping[str, Any]] = None,
    ) -> None:
        """The taskset `module_name` (its id: the import name), imported from `root`;
        `renderer`: a `renderers` RendererConfig as a mapping for the training client (None:
        `renderers` picks one from the tokenizer's name). Nothing is loaded until `load`."""
        prepare_process(root)
        try:
            import verifiers.v1 as vf
        except ImportError as e:
            raise LoadError(f"verifiers v1 is not importable in {sys.executable}: {e}") from e
        self.vf = vf
        self.taskset_id = module_name
        self.renderer = dict(renderer) if renderer else None
        self.env: Any = None
        try:
            self.taskset_config_class = vf.taskset_config_type(module_name)
        except (ImportError, TypeError, ValueError, AttributeError) as e:
            raise LoadError(f"{module_name} is not a verifiers v1 taskset package: {describe_error(e)}") from e

    def load(self, own_args: Dict[str, Any]) -> None:
        """Loads the environment with the taskset config's own fields `own_args`."""
        self.env = self.vf.load_environment(self.env_config(own_args))
        self.check_local()
        self.check_trainable()

    # --- loading -------------------------------------------------------------------

    def env_config(self, own_args: Mapping[str, Any]) -> Any:
        """The env's own config class (SingleAgentEnvConfig for a plain taskset, else the
        one its `Env[XConfig]` declares) with every seat kept local."""
        vf = self.vf
        from verifiers.v1.configs.agent import AgentConfig

        unknown = sorted(set(own_args) - set(self.own_fields()))
        if unknown:
            raise LoadError(
                f"{', '.join(unknown)}: not a field of {self.taskset_config_class.__name__} "
                f"(its fields: {', '.join(sorted(self.own_fields()))})"
            )
        config_class = vf.env_config_type(self.taskset_id)
        taskset_brings_harness = vf.default_harness_id(self.taskset_id) == self.taskset_id
        raw: Dict[str, Any] = {"taskset": {**own_args, "id": self.taskset_id}}
        for name, field in config_class.model_fields.items():
            seat = field.default
            if not isinstance(seat, AgentConfig):
                continue
            if seat.client is not None:
                raise LoadError(
                    f"{config_class.__name__}.{name} pins its own model endpoint "
                    f"({seat.client.base_url}); rl serves every seat from the run's endpoint"
                )
            override: Dict[str, Any] = {"runtime": {"type": "subprocess"}}
            if seat.harness is None and not taskset_brings_harness:
                override["harness"] = {"id": NULL_HARNESS}
            raw[name] = override
        return config_class.model_validate(raw)

    def check_local(self) -> None:
        """Refuse what cannot run on this machine alone: tasks or harnesses that need a
        container, tool servers in a remote runtime (they would need a tunnel), a `uv`
        script harness without `uv`."""
        from verifiers.v1.utils.loaders import harness_class
        from verifiers.v1.runtimes import runtime_is_local

        env = self.env
        task_class = type(env.taskset).task_type()
        if task_class.NEEDS_CONTAINER:
            raise LoadError(f"{task_class.__name__} needs a container runtime; rl runs tasks in local subprocesses only")
        for seat, harness in env.config.agent_harnesses().items():
            if harness_class(harness.id).NEEDS_CONTAINER:
                raise LoadError(
                    f"seat {seat!r}: harness {harness.id!r} needs a container runtime; "
                    "rl runs harnesses in local subprocesses only"
                )
            if harness.id in UV_SCRIPT_HARNESSES and shutil.which("uv") is None:
                raise LoadError(
                    f"harness {harness.id!r} prepares its program with `uv`, and no `uv` is on PATH "
                    f"next to {sys.executable}: install it into the environment's Python (rl setup --env)"
                )
            if harness.id in UV_SCRIPT_HARNESSES:
                lock_chat_program()
        for config in (toolset.config for toolset in self.toolsets()):
            runtime = getattr(config, "runtime", None)
            if getattr(config, "url", None) is None and runtime is not None and not runtime_is_local(runtime):
                raise LoadError(
                    f"a tool server of {self.taskset_id!r} runs in the {runtime.type!r} runtime; "
                    "rl runs tool servers locally only (set its runtime to subprocess)"
                )

    def toolsets(self) -> List[Any]:
        """The tool servers the model is given: its tasks' and its taskset's."""
        env = self.env
        task_class = type(env.taskset).task_type()
        return [*task_class.toolsets(env.taskset.config.task), *env.taskset.toolsets(env.taskset.config)]

    def check_trainable(self) -> None:
        """Refuse, before any rollout, a taskset whose first tasks rl cannot train (see
        `untrainable`); a later task that cannot be trained fails its own rollouts saying why
        (`run_group`)."""
        for task in itertools.islice(self.env.taskset, TASKS_CHECKED):
            reason = untrainable(task.data)
            if reason is not None:
                raise LoadError(reason)

    # --- the Adapter interface ----------------------------------------------------------

    def own_fields(self) -> Dict[str, Any]:
        fields = {}
        for name, field in self.taskset_config_class.model_fields.items():
            if name in RL_OWNED_TASKSET_FIELDS:
                continue
            default = field.get_default(call_default_factory=True)
            fields[name] = default.model_dump(mode="json") if hasattr(default, "model_dump") else default
        return fields

    def serving(self) -> AsyncContextManager[None]:
        return self.env.serving()

    def tasks(self) -> Iterator[Task]:
        for task in self.env.taskset:
            yield Task(key=task_key(task.data), payload=task)

    def client_config(self, endpoint: Endpoint) -> Any:
        """The verifiers client for `endpoint`: the train client (renders prompts with the
        run's tokenizer, calls `{base}/inference/v1/generate`) for rl's trainer, else the
        eval client (relays chat completions)."""
        variable = KEY_VARIABLE_PREFIX + hashlib.sha256(endpoint.base_url.encode()).hexdigest()[:12]
        os.environ[variable] = endpoint.api_key
        if not endpoint.training:
            return self.vf.EvalClientConfig(base_url=endpoint.base_url, api_key_var=variable)
        if not endpoint.tokenizer:
            raise ValueError("a training endpoint needs the run's tokenizer (Endpoint.tokenizer) to render prompts")
        return self.vf.TrainClientConfig(
            base_url=endpoint.base_url,
            api_key_var=variable,
            renderer_model_name=endpoint.tokenizer,
            renderer=self.renderer,
        )

    def tool_names(self) -> List[str]:
        """Each tool as the model is offered it: `{server}_{tool}`, or the tool alone for a
        server without a prefix (verifiers/v1/harnesses/utils/mcp.py)."""
        from verifiers.v1.utils.decorators import discover_decorated

        names = []
        for toolset in self.toolsets():
            prefix = toolset.server_name
            for function in discover_decorated(toolset, "tool"):
                name = getattr(function, "tool_name", None) or function.__name__
                names.append(f"{prefix}_{name}" if prefix else name)
        return names

    def rendering(self, endpoint: Endpoint) -> Optional[Rendering]:
        """The training client's renderer, built as verifiers builds it (`ElasticRendererPool`:
        `create_renderer(load_tokenizer(renderer_model_name), renderer)`); an eval client's
        prompts are rendered by its endpoint."""
        if not endpoint.training or not endpoint.tokenizer:
            return None
        from renderers import create_renderer
        from renderers.base import load_tokenizer

        config = self.client_config(endpoint)
        tokenizer = load_tokenizer(config.renderer_model_name)
        fix = (
            f"set {RENDERER_VARIABLE} in config.toml's [child_environment] to a `renderers` "
            "renderer that renders them (as JSON: '{\"name\": \"qwen3\"}' for a Qwen3 model; "
            "'{\"name\": \"default\", \"tool_parser\": \"qwen3\"}' with a chat template "
            "that renders tools and writes Hermes calls), train a model whose chat template "
            "renders tools, or an environment without tools"
        )
        try:
            renderer = create_renderer(tokenizer, config.renderer)
        except (AssertionError, ValueError, KeyError) as error:
            raise CannotRender(describe_error(error).replace("\n", " "), fix) from error
        name = config.renderer.name if config.renderer is not None else "chosen by `renderers` for it"
        how = f"the renderer `{name}` of {endpoint.tokenizer}"
        is_the_template = type(renderer).__name__ == "DefaultRenderer"
        if is_the_template:
            how += " (its chat template)"

        def render(messages: List[dict], tools: Optional[List[dict]], add_generation_prompt: bool) -> str:
            return tokenizer.decode(renderer.render_ids(messages, tools=tools, add_generation_prompt=add_generation_prompt))

        def chat_template(messages: List[dict], tools: Optional[List[dict]], add_generation_prompt: bool) -> str:
            # Tokens, decoded as the renderer's are: the two differ only where their tokens do.
            ids = tokenizer.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=False, add_generation_prompt=add_generation_prompt)
            return tokenizer.decode(list(ids))

        return Rendering(
            chat_template=None if is_the_template else chat_template,
            how=how,
            render=render,
            fix=fix,
        )

    async def run_group(self, task: Task, size: int, endpoint: Endpoint, sampling: Dict[str, Any]) -> List[Rollout]:
        reason = untrainable(task.payload.data)
        if reason is not None:
            return [Rollout(reward=0.0, error=reason) for _ in range(size)]
        vf = self.vf
        context = vf.ModelContext(
            model=endpoint.model,
            client=self.client_config(endpoint),
            sampling=vf.SamplingConfig(**{k: v for k, v in sampling.items() if v is not None}),
        )
        slots = self.env.slots(task.payload, size)
        episodes = await asyncio.gather(*(self.env.run_slot(slot, context) for slot in slots), return_exceptions=True)
        rollouts = []
        for episode in episodes:
            if isinstance(episode, BaseException):
                if not isinstance(episode, Exception):
                    raise episode  # cancellation, interrupts: not a rollout's failure
                rollouts.append(Rollout(reward=0.0, error=describe_error(episode)))
                continue
            try:
                rollouts.append(episode_rollout(episode, endpoint.training))
            except Exception as e:  # a trace rl cannot read is that rollout's failure
                rollouts.append(Rollout(reward=0.0, error=f"reading the episode: {describe_error(e)}"))
        return rollouts
