"""The Tinker SDK (tinker==0.38.0) as the trainer uses it: one LoRA training client, sampler
saves, training states, sampling clients, and the policy the inference server samples from.

The SDK's calls return futures that are awaited (its `*_async` twins are deprecated since 0.3x).
One deprecated call stays: `load_state[_with_optimizer]`, because its replacement
(`ServiceClient.create_training_client_from_state_with_optimizer`) makes the server create the
model inside `load_weights`, which skyrl-tx 0.3.0, the local engine, cannot (docs/decisions.md).

Failure handling:
* every SDK call is bounded by `tinker.request_timeout_secs` (the SDK itself retries lost
  connections while waiting for a result, forever);
* idempotent calls (session, sampling client, sampling, logprobs) are retried here on
  retryable errors (429, 408, 5xx, connection) up to `tinker.max_retries` times with backoff;
  calls that change the model (forward_backward, optim_step, saves) are not retried here
  (a retry could apply a step twice), beyond the SDK's own retries of their submission;
* `Watchdog` probes the Tinker API's /api/v1/healthz; when it cannot be connected to for
  `tinker.engine_unreachable_secs` the trainer fails at once instead of waiting on the SDK;
* before the tokenizer and the SDK, `check_reachable` asks the Tinker API's host once (within
  10 s), and the SDK's session is created within `tinker.engine_unreachable_secs` (the SDK alone
  retries a lost connection for 5 minutes): a host that cannot be reached fails the trainer
  with its host, port, the kind of failure and the setting that names it (`reach.py`).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import warnings
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple

import httpx
import numpy as np

import tinker
from tinker import types as ttypes

from . import reach
from .batch import AlignedSequence, full_logprobs_from_prompt_logprobs
from .errors import RequestError
from .losses import SURROGATE_LOSS, Adapter, Linearised, linearise
from .sampling import Sample, SamplingSpec, tinker_stop
from .server import Policy
from .tools import ToolSupport

try:  # transformers' chat templates are jinja2's
    from jinja2.exceptions import TemplateError
except ImportError:  # pragma: no cover - transformers needs jinja2 for templates anyway
    class TemplateError(Exception):  # type: ignore[no-redef]
        pass

HOSTED_TINKER_URL = reach.HOSTED_TINKER_URL


class EngineUnreachable(Exception):
    """The Tinker API could not be connected to for too long."""


class RequestTimeout(Exception):
    """A Tinker call did not finish within tinker.request_timeout_secs."""


def is_retryable(error: BaseException) -> bool:
    if isinstance(error, (tinker.APIConnectionError, httpx.TransportError)):
        return True
    if isinstance(error, tinker.APIStatusError):
        code = error.status_code
        return code in (408, 429) or 500 <= code < 600
    try:
        from tinker.lib.retryable_exception import RetryableException
    except ImportError:  # pragma: no cover
        return False
    return isinstance(error, RetryableException)


def _detail(error: "tinker.APIStatusError") -> str:
    body = getattr(error, "body", None)
    detail = body.get("detail") if isinstance(body, dict) else None
    return detail if isinstance(detail, str) else " ".join(str(error).split())[:300]


def refusal(error: BaseException) -> Optional[str]:
    """What to tell the operator when the Tinker service refused the trainer itself (its SDK,
    its key) or could not be reached, rather than failed: the service's words (or what was
    seen) and the fix. None for any other error."""
    if isinstance(error, (reach.ServiceUnreachable, reach.SessionFailed)):
        return str(error)
    if not isinstance(error, tinker.APIStatusError):
        return None
    detail = _detail(error)
    if error.status_code == 400 and "SDK version" in detail:
        try:
            from importlib.metadata import version

            installed = version("tinker")
        except Exception:  # pragma: no cover - the SDK is importable, so its metadata is there
            installed = "unknown"
        return (
            f"the Tinker service refuses this tinker SDK ({installed}): \"{detail}\" (HTTP 400); "
            "fix: `rl setup` installs the SDK rl was built for (`rl setup --check` names both); "
            "when that is the one refused, update rl to a release pinned to a newer SDK "
            "(`cargo xtask pins` shows how far each pin is behind)"
        )
    if error.status_code in (401, 403):
        return (
            f"authentication failed: the Tinker service refused TINKER_API_KEY: \"{detail}\" "
            f"(HTTP {error.status_code}); fix: check the key (a Tinker key starts with tml-) and "
            "where rl reads it (the environment, or RL_HOME/.env)"
        )
    return None


async def bounded(awaitable: Awaitable, what: str, timeout: float):
    """`awaitable`, or RequestTimeout after `timeout` seconds (0: no limit)."""
    if timeout and timeout > 0:
        try:
            return await asyncio.wait_for(awaitable, timeout)
        except asyncio.TimeoutError:
            raise RequestTimeout(f"{what} did not finish within {timeout:g} s (tinker.request_timeout_secs)") from None
    return await awaitable


async def with_retries(
    make: Callable[[], Awaitable],
    what: str,
    retries: int,
    timeout: float,
    say: Callable[[str], None],
    base_delay: float = 1.0,
):
    """make() (a fresh awaitable each attempt), retried on retryable errors."""
    attempt = 0
    while True:
        try:
            return await bounded(make(), what, timeout)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if attempt >= retries or not is_retryable(e):
                raise
            delay = min(base_delay * (2 ** attempt), 30.0)
            attempt += 1
            say(f"{what} failed ({type(e).__name__}: {e}); retry {attempt}/{retries} in {delay:g} s")
            await asyncio.sleep(delay)


class Watchdog:
    """Fails (raises EngineUnreachable) once the Tinker API refuses connections for `limit`
    seconds in a row. Any HTTP answer counts as alive, and so does a slow one."""

    def __init__(self, base_url: str, limit: float, interval: float = 1.0, transport: Optional[httpx.AsyncBaseTransport] = None):
        self.url = base_url.rstrip("/") + "/api/v1/healthz"
        self.limit = limit
        self.interval = interval
        self.transport = transport

    async def run(self) -> None:
        down_since: Optional[float] = None
        last_error = ""
        async with httpx.AsyncClient(timeout=min(5.0, max(1.0, self.limit)), transport=self.transport, trust_env=False) as client:
            while True:
                try:
                    await client.get(self.url)
                    down_since = None
                except (httpx.TimeoutException,):
                    down_since = None  # slow, not gone
                except httpx.TransportError as e:
                    last_error = f"{type(e).__name__}: {e}"
                    now = time.monotonic()
                    if down_since is None:
                        down_since = now
                    elif now - down_since >= self.limit:
                        raise EngineUnreachable(
                            f"the Tinker API at {self.url.rsplit('/api/', 1)[0]} has been unreachable "
                            f"for {now - down_since:.0f} s ({last_error})"
                        )
                await asyncio.sleep(self.interval)


def load_state(training, path: str, optimizer: bool):
    """The future of `training` loading a `save_state` path: its weights, and with `optimizer`
    Adam's moments too. The SDK's deprecation warning is silenced here, the one place that
    calls it (see the module's docstring)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return training.load_state_with_optimizer(path) if optimizer else training.load_state(path)


def to_datum(seq: AlignedSequence, advantages: Optional[Sequence[float]] = None) -> ttypes.Datum:
    """One Datum per completion: numpy arrays, no torch. `advantages` replace the sequence's
    (rl's loss adapter sends its own)."""
    return ttypes.Datum(
        model_input=ttypes.ModelInput.from_ints(list(seq.input_tokens)),
        loss_fn_inputs={
            "target_tokens": np.asarray(seq.target_tokens, dtype=np.int64),
            "logprobs": np.asarray(seq.logprobs, dtype=np.float32),
            "advantages": np.asarray(seq.advantages if advantages is None else advantages, dtype=np.float32),
        },
    )


async def train_step(
    training,
    sequences: Sequence[AlignedSequence],
    learning_rate: float,
    loss: str,
    loss_fn_config: Optional[dict],
    adapter: Optional[Adapter],
    timeout: float,
) -> Tuple[Any, Any, Dict[str, float], Optional[Linearised]]:
    """forward_backward(`loss`, its `loss_fn_config`) then optim_step(Adam); both submitted
    before either result is awaited, so they queue back to back. With `adapter` (rl's loss
    adapter, `losses.py`), a `forward` pass first, whose logprobs make the importance_sampling
    advantages that train the asked loss; its result comes back too. Also the seconds the
    caller waited for each result: `forward_backward` from the start to its result (the
    adapter's forward pass included), `optim` from then to the optimizer step's (the engine
    runs them in turn, so each is the time its own work held the step up)."""
    started = time.monotonic()
    linearised = None
    if adapter is None:
        fb_future = training.forward_backward([to_datum(s) for s in sequences], loss, loss_fn_config=loss_fn_config)
    else:
        forward = await bounded(
            training.forward([to_datum(s) for s in sequences], SURROGATE_LOSS), "forward (rl's loss adapter)", timeout
        )
        logprobs = [tensor_list(o.get("logprobs")) for o in forward.loss_fn_outputs]
        linearised = linearise(adapter, sequences, logprobs)
        datums = [to_datum(s, a) for s, a in zip(sequences, linearised.advantages)]
        fb_future = training.forward_backward(datums, SURROGATE_LOSS)
    adam = ttypes.AdamParams(learning_rate=learning_rate, beta1=0.9, beta2=0.95, eps=1e-8)
    optim_future = training.optim_step(adam)
    fb = await bounded(fb_future, "forward_backward", timeout)
    fb_done = time.monotonic()
    optim = await bounded(optim_future, "optim_step", timeout)
    secs = {"forward_backward": fb_done - started, "optim": time.monotonic() - fb_done}
    return fb, optim, secs, linearised


def tensor_list(value: Any) -> List[float]:
    """A loss_fn_outputs entry (TensorData, or its dict form) as a flat list."""
    if value is None:
        return []
    if hasattr(value, "tolist"):
        return list(np.asarray(value.tolist(), dtype=np.float64).reshape(-1))
    if isinstance(value, dict) and "data" in value:
        return [float(v) for v in value["data"]]
    return [float(v) for v in value]


class Tinker:
    """The SDK clients of one run."""

    def __init__(self, config, api_key: str, say: Callable[[str], None]):
        self.config = config
        self.api_key = api_key
        self.say = say
        self.service: Optional[tinker.ServiceClient] = None
        self.training: Optional[tinker.TrainingClient] = None
        self.timeout = config.request_timeout_secs
        self.retries = config.max_retries

    @property
    def url(self) -> str:
        """The Tinker API the SDK talks to, as it resolves it."""
        return self.config.tinker_base_url or (os.environ.get("TINKER_BASE_URL") or "").strip().rstrip("/") or HOSTED_TINKER_URL

    @property
    def setting(self) -> str:
        """The setting that names that address."""
        return reach.service_setting(self.config.tinker_base_url, os.environ)

    async def check_reachable(self) -> None:
        """ServiceUnreachable, within reach.PROBE_SECS, when the Tinker API's host cannot be
        reached: asked before anything slower (the tokenizer, the SDK's retries)."""
        limit = min(reach.PROBE_SECS, max(1.0, self.config.engine_unreachable_secs))
        error = await reach.probe(self.url, limit)
        if error is not None:
            raise reach.unreachable(self.url, self.setting, error, limit)

    async def connect(self) -> None:
        kwargs = {"api_key": self.api_key}
        if self.config.tinker_base_url:
            kwargs["base_url"] = self.config.tinker_base_url
        # The SDK creates its session (client config, session) on the first call that needs one,
        # blocking the caller's thread and retrying a lost connection for up to 5 minutes: made
        # on a thread, bounded by tinker.engine_unreachable_secs, what it met said plainly.
        limit = max(reach.PROBE_SECS, self.config.engine_unreachable_secs)
        self.service = tinker.ServiceClient(**kwargs)
        try:
            submitted = await bounded(
                asyncio.to_thread(
                    self.service.create_lora_training_client,
                    base_model=self.config.base_model,
                    rank=self.config.lora_rank,
                ),
                "creating the Tinker session (tinker.engine_unreachable_secs)",
                min(limit, self.timeout) if self.timeout else limit,
            )
        except (RequestTimeout, tinker.APIConnectionError, httpx.TransportError) as e:
            # What the host says now tells a network failure from a service that answers.
            met = await reach.probe(self.url, min(reach.PROBE_SECS, limit))
            if met is not None:
                raise reach.unreachable(self.url, self.setting, met, min(reach.PROBE_SECS, limit)) from e
            raise reach.SessionFailed(
                f"the Tinker service at {self.url} answers, but its session was not created within "
                f"{limit:g} s (tinker.engine_unreachable_secs): {reach.failure_kind(e)} ({reach.seen(e)}); "
                f"its address is {self.setting}"
            ) from e
        self.training = await bounded(submitted, "creating the LoRA training client", self.timeout)

    @property
    def model_id(self) -> str:
        return str(self.training.model_id)

    async def save_for_sampler(self, name: str) -> str:
        result = await bounded(self.training.save_weights_for_sampler(name), f"save_weights_for_sampler({name!r})", self.timeout)
        return result.path

    async def save_state(self, name: str) -> str:
        result = await bounded(self.training.save_state(name), f"save_state({name!r})", self.timeout)
        return result.path

    async def load_state(self, path: str) -> None:
        """Weights and optimizer state (Adam's moments) of a `save_state` path: a resumed run
        continues as if it had never stopped."""
        await bounded(load_state(self.training, path, optimizer=True), f"load_state_with_optimizer({path!r})", self.timeout)

    async def fingerprint(self, tokens: Sequence[int]) -> List[float]:
        """The training weights' log-probability of each of `tokens` given the ones before:
        what tells two sets of weights apart, computed without changing them."""
        datum = ttypes.Datum(
            model_input=ttypes.ModelInput.from_ints(list(tokens[:-1])),
            loss_fn_inputs={"target_tokens": np.asarray(tokens[1:], dtype=np.int64)},
        )
        result = await bounded(self.training.forward([datum], "cross_entropy"), "forward (the weights' fingerprint)", self.timeout)
        return [round(float(x), 6) for x in tensor_list(result.loss_fn_outputs[0].get("logprobs"))]

    async def sampling_client(self, path: str):
        return await with_retries(
            lambda: self.service.create_sampling_client(model_path=path),
            f"creating a sampling client for {path}",
            self.retries,
            self.timeout,
            self.say,
        )

    async def base_sampling_client(self):
        """A sampler of the base weights (no adapter): what the KL to the base model is read
        against."""
        return await with_retries(
            lambda: self.service.create_sampling_client(base_model=self.config.base_model),
            f"creating a sampling client of the base model {self.config.base_model}",
            self.retries,
            self.timeout,
            self.say,
        )

    async def train(
        self, sequences: Sequence[AlignedSequence], learning_rate: float, adapter: Optional[Adapter] = None
    ) -> Tuple[Any, Any, Dict[str, float], Optional[Linearised]]:
        """One step of the run's loss (with its loss_fn_config), or through `adapter`:
        `train_step`."""
        return await train_step(
            self.training, sequences, learning_rate, self.config.loss, self.config.loss_fn_config(), adapter, self.timeout
        )

    async def compute_logprobs(self, client, tokens: Sequence[int]) -> List[float]:
        """The sampler's logprob of every token given the ones before it (0.0 for the first)."""
        values = await with_retries(
            lambda: client.compute_logprobs(ttypes.ModelInput.from_ints(list(tokens))),
            "compute_logprobs",
            self.retries,
            self.timeout,
            self.say,
        )
        return full_logprobs_from_prompt_logprobs(values, len(tokens))

    async def compute_all_logprobs(self, client, sequences: Sequence[Sequence[int]]) -> List[List[float]]:
        """`compute_logprobs` of each sequence, asked together (the engine batches them)."""
        return list(await asyncio.gather(*(self.compute_logprobs(client, tokens) for tokens in sequences)))


def _eos_ids(tokenizer, model_dir: str) -> List[int]:
    """End-of-sequence ids: the tokenizer's, plus generation_config.json's when the base model
    is a local folder (chat models often end turns with a token other than eos_token)."""
    ids: List[int] = []
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ids.append(int(tokenizer.eos_token_id))
    path = os.path.join(model_dir, "generation_config.json") if model_dir and os.path.isdir(model_dir) else None
    if path and os.path.isfile(path):
        try:
            with open(path, "r", encoding="utf-8") as f:
                value = json.load(f).get("eos_token_id")
            for t in value if isinstance(value, list) else [value]:
                if isinstance(t, int) and t not in ids:
                    ids.append(t)
        except (OSError, ValueError):
            pass
    return ids


class TinkerPolicy(Policy):
    """Samples from the current sampling client; `swap` replaces it after each save."""

    def __init__(self, tinker_: Tinker, model_name: str, base_model: str, max_token_length: int):
        self.tinker = tinker_
        self.tokenizer = None
        self.model_name = model_name
        self.base_model = base_model
        self.max_token_length = max_token_length
        self.eos_ids: List[int] = []
        self.client = None
        self.sampler_path: Optional[str] = None
        self.registered = False
        self._tool_support: Optional[ToolSupport] = None

    @property
    def initialized(self) -> bool:
        return self.client is not None and self.registered

    @property
    def vocab_size(self) -> Optional[int]:
        return None  # the model's vocabulary may be larger than the tokenizer's; the engine checks

    def load(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self._tool_support = None
        self.eos_ids = _eos_ids(tokenizer, self.base_model)

    def swap(self, client, path: str) -> None:
        self.client = client
        self.sampler_path = path

    def encode(self, text: str) -> List[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=True))

    def chat_text(self, messages: List[dict], tools: Optional[List[dict]] = None, add_generation_prompt: bool = True) -> str:
        """The chat template applied (tools passed only when there are some: a template
        without them is called as before). A template that refuses the messages (its
        `raise_exception`, a role it cannot place) is the request's fault: RequestError."""
        extra = {"tools": tools} if tools else {}
        try:
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt, **extra)
        except TemplateError as e:
            raise RequestError(f"the model's chat template refused the messages: {e}", "messages") from None

    def chat_tokens(self, messages: List[dict], tools: Optional[List[dict]] = None, add_generation_prompt: bool = True) -> List[int]:
        # Render as text then encode: transformers 5 returns a BatchEncoding from tokenize=True.
        text = self.chat_text(messages, tools, add_generation_prompt)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def tool_support(self) -> ToolSupport:
        """What the tokenizer's chat template does with tools, probed once."""
        if self._tool_support is None:
            self._tool_support = ToolSupport.of(lambda messages, tools, gen: self.chat_text(messages, tools, gen))
        return self._tool_support

    def decode(self, tokens: Sequence[int]) -> str:
        return self.tokenizer.decode(list(tokens), skip_special_tokens=True)

    def decode_all(self, tokens: Sequence[int]) -> str:
        """Text with the special tokens kept (the rollout files show the chat template)."""
        return self.tokenizer.decode(list(tokens), skip_special_tokens=False)

    def token_text(self, token: int) -> str:
        return self.tokenizer.decode([int(token)], skip_special_tokens=False)

    def stop_ids(self, spec: SamplingSpec) -> List[int]:
        return list(spec.stop_token_ids) + ([] if spec.ignore_eos else list(self.eos_ids))

    async def sample(self, prompt: List[int], n: int, spec: SamplingSpec) -> List[Sample]:
        client = self.client  # the current one, for the whole request
        if client is None:
            raise RuntimeError("no sampling client yet")
        max_tokens = spec.max_tokens or max(1, self.max_token_length - len(prompt))
        params = ttypes.SamplingParams(
            max_tokens=max_tokens,
            temperature=spec.temperature,
            top_p=spec.top_p,
            top_k=spec.top_k,
            seed=spec.seed,
            stop=tinker_stop(spec, self.eos_ids, self.token_text),
        )
        result = await with_retries(
            lambda: client.sample(prompt=ttypes.ModelInput.from_ints(list(prompt)), num_samples=n, sampling_params=params),
            "sampling",
            self.tinker.retries,
            self.tinker.timeout,
            self.tinker.say,
        )
        samples = []
        for seq in result.sequences:
            tokens = list(seq.tokens)
            logprobs = list(seq.logprobs) if seq.logprobs is not None else None
            if logprobs is None or len(logprobs) != len(tokens):
                full = await self.tinker.compute_logprobs(client, list(prompt) + tokens)
                logprobs = full[len(prompt):]
            samples.append(Sample(tokens=tokens, logprobs=[float(x) for x in logprobs], stop_reason=seq.stop_reason))
        return samples
