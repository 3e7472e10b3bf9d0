"""The groups an environment makes, counted where rl reads them: `RL_GROUPS_FILE` names a JSON
file, replaced whole (temporary file + rename) after each call.

    {"made": 12, "with_signal": 0, "alike": 12, "alike_scores": {"0.0": 12},
     "none": 0, "unsampled": 0, "prompt_too_long": 0, "longest_prompt": 0,
     "too_long": 0, "longest_sequence": 0, "token_limit": 256, "prompt_limit": 256,
     "invalid": 0, "invalid_first": null,
     "failed": 0, "errors": {"collect_trajectories": {"count": 1, "first": "KeyError: 'x'"}},
     "updated": 1790000000.0, "last_sent": 1789999000.0}

Every call of `collect_trajectories` ends as one of these (what atroposlib 0.4.0's `handle_env`
and `handle_send_to_api` then do with it, told apart so that rl can name the real cause):

- `made`: scored groups the trainer can be sent; of them `with_signal` those whose scores
  differ (the only ones GRPO learns from) and `alike` those whose scores are all equal
  (atroposlib drops them with `ensure_scores_are_not_same`), by the score they shared.
- `too_long`: scored groups atroposlib drops because a sequence reaches the trainer's token
  limit (`token_limit`; the longest seen in `longest_sequence`).
- `invalid`: results that are no scored group (atroposlib skips them or fails on them in
  `handle_send_to_api`); `invalid_first` says what the first one was.
- `none`: calls that returned no group after asking the model (the environment's own check
  of equal scores, or a failure it swallowed).
- `unsampled`: calls that returned no group without asking the model at all; of them
  `prompt_too_long` had tokenized a prompt at least `prompt_limit` long (the environment's
  `max_token_length`; the longest in `longest_prompt`): an environment that skips prompts
  longer than its limit.
- `failed`: calls that raised; `errors` counts the exceptions of each handler
  (`collect_trajectories`, and `handle_send_to_api`, which atroposlib only logs) with the
  first one's message.

`updated` is when the last attempt ended, however it ended; `last_sent` when the last group
the trainer is sent was made (one with signal, or alike where alike groups are sent), `null`
before the first: groups that keep failing or timing out refresh `updated` alone, and rl's
health check must not take them for an environment at work.

A run with no group `with_signal` cannot learn: rl's supervisor, its status and its
pre-flights read these counts (`rl_process`'s `EnvGroups`)."""

from __future__ import annotations

import contextvars
import json
import math
import os
import sys
import time

GROUPS_VARIABLE = "RL_GROUPS_FILE"
# A score is a key of `alike_scores`; past this many distinct ones, the rest are "other".
MAX_SCORES = 8
# The first error of a handler is kept to this many characters.
MAX_MESSAGE_CHARS = 400
# The methods of atroposlib's ServerManager that ask the model.
SAMPLING_METHODS = ("chat_completion", "completion", "tokens_and_logprobs_completion", "managed_server")
# The tokenizer methods whose result's length is a prompt's length in tokens.
TOKENIZING_METHODS = ("encode", "apply_chat_template")


class Call:
    """What one `collect_trajectories` call did: whether it asked the model, and the longest
    token sequence it made with the tokenizer (its prompt)."""

    def __init__(self) -> None:
        self.sampled = 0
        self.longest_tokens = 0


# The call under way in this task (asyncio tasks each see their own; those a call starts share its record).
CURRENT_CALL: contextvars.ContextVar[Call | None] = contextvars.ContextVar("rl_env_call", default=None)


class GroupCounts:
    def __init__(self, path: str | None):
        self.path = path
        self.made = 0
        self.with_signal = 0
        self.alike = 0
        self.alike_scores: dict[str, int] = {}
        self.none = 0
        self.unsampled = 0
        self.prompt_too_long = 0
        self.longest_prompt = 0
        self.too_long = 0
        self.longest_sequence = 0
        self.token_limit: int | None = None
        # The environment's own `max_token_length`, which environments skip long prompts by.
        self.prompt_limit: int | None = None
        # The environment the counts are of: its token limit is known once it registered.
        self.env = None
        # Whether asking the model can be seen (the environment has a server rl watches).
        self.sees_sampling = False
        self.invalid = 0
        self.invalid_first: str | None = None
        self.failed = 0
        self.errors: dict[str, dict] = {}
        # Whether groups scored alike are sent (atroposlib's `ensure_scores_are_not_same` off).
        self.sends_alike = False
        # Unix seconds when the last group the trainer is sent was made.
        self.last_sent: float | None = None

    @classmethod
    def from_environment(cls, environ=os.environ) -> "GroupCounts":
        return cls(environ.get(GROUPS_VARIABLE) or None)

    def count_result(self, result, call: Call | None = None) -> None:
        """One call's result: `(group or groups or None, backlog)` as atroposlib's
        `collect_trajectories` returns it."""
        if self.env is not None:
            self.token_limit = token_limit(self.env) or self.token_limit
            self.prompt_limit = prompt_limit(self.env) or self.prompt_limit
            self.sends_alike = sends_alike(self.env)
        groups = result[0] if isinstance(result, tuple) and result else result
        if groups is None or (isinstance(groups, list) and not groups):
            self.count_nothing(call)
        elif isinstance(groups, list) and not any(isinstance(group, dict) for group in groups):
            # Not groups but rollouts (say, the tuples an environment meant to score itself).
            self.count_invalid(groups)
        else:
            for group in groups if isinstance(groups, list) else [groups]:
                self.count_group(group)
        self.save()

    def count_nothing(self, call: Call | None) -> None:
        if call is None or call.sampled or not self.sees_sampling:
            self.none += 1
            return
        self.unsampled += 1
        limit = self.prompt_limit or self.token_limit
        if limit and call.longest_tokens >= limit:
            self.prompt_too_long += 1
        self.longest_prompt = max(self.longest_prompt, call.longest_tokens)

    def count_invalid(self, result) -> None:
        self.invalid += 1
        if self.invalid_first is None:
            self.invalid_first = describe_value(result)

    def count_group(self, group) -> str:
        """Counts one result as a group; how it ended: "none", "invalid", "too_long",
        "with_signal" or "alike" (what a runner sending groups itself drops or sends by:
        `is_sent`)."""
        verdict = self.verdict_of(group)
        if self.is_sent(verdict):
            self.last_sent = time.time()
        return verdict

    def is_sent(self, verdict: str) -> bool:
        """Whether a group that ended as `verdict` goes to the trainer: atroposlib's
        `handle_send_to_api` sends groups with signal, and alike ones unless told to drop them."""
        return verdict == "with_signal" or (verdict == "alike" and self.sends_alike)

    def verdict_of(self, group) -> str:
        if group is None:
            self.none += 1
            return "none"
        scores = group.get("scores") if isinstance(group, dict) else None
        if scores is None:
            self.count_invalid(group)
            return "invalid"
        scores = list(scores)
        tokens = group.get("tokens")
        if tokens is not None and len(tokens) != len(scores):
            self.count_invalid(group)
            return "invalid"
        longest = max((len(sequence) for sequence in tokens or [] if hasattr(sequence, "__len__")), default=0)
        self.longest_sequence = max(self.longest_sequence, longest)
        # atroposlib's own test in `handle_send_to_api`: a sequence as long as the limit drops the group.
        if self.token_limit and self.token_limit > 0 and longest >= self.token_limit:
            self.too_long += 1
            return "too_long"
        self.made += 1
        if len({score_key(score) for score in scores}) > 1:
            self.with_signal += 1
            return "with_signal"
        self.alike += 1
        key = score_key(scores[0]) if scores else "none"
        if key not in self.alike_scores and len(self.alike_scores) >= MAX_SCORES:
            key = "other"
        self.alike_scores[key] = self.alike_scores.get(key, 0) + 1
        return "alike"

    def count_failure(self, handler: str, error: BaseException) -> None:
        if handler == "collect_trajectories":
            self.failed += 1
        self.count_error(handler, describe_error(error))

    def count_error(self, handler: str, message: str) -> None:
        """One error of `handler` (a runner's own name for where it arose), `message` its words."""
        entry = self.errors.setdefault(handler, {"count": 0, "first": None})
        entry["count"] += 1
        if entry["first"] is None:
            entry["first"] = shortened(message)
        self.save()

    def count_failed_call(self) -> None:
        """One attempt at a group that ended without one through errors (counted apart)."""
        self.failed += 1
        self.save()

    def as_dict(self) -> dict:
        return {
            "made": self.made,
            "with_signal": self.with_signal,
            "alike": self.alike,
            "alike_scores": dict(self.alike_scores),
            "none": self.none,
            "unsampled": self.unsampled,
            "prompt_too_long": self.prompt_too_long,
            "longest_prompt": self.longest_prompt,
            "too_long": self.too_long,
            "longest_sequence": self.longest_sequence,
            "token_limit": self.token_limit,
            "prompt_limit": self.prompt_limit,
            "invalid": self.invalid,
            "invalid_first": self.invalid_first,
            "failed": self.failed,
            "errors": {handler: dict(entry) for handler, entry in self.errors.items()},
            "updated": time.time(),
            "last_sent": self.last_sent,
        }

    def save(self) -> None:
        if not self.path:
            return
        partial = f"{self.path}.partial"
        try:
            with open(partial, "w", encoding="utf-8") as f:
                json.dump(self.as_dict(), f)
            os.replace(partial, self.path)
        except OSError as error:
            print(f"rl_env: the group counts cannot be written to {self.path}: {error}", file=sys.stderr)

    def attach(self, env) -> None:
        """Counts every call of the instance's `collect_trajectories` (whichever class defines
        it), the errors `handle_send_to_api` raises (atroposlib only logs them), and sees what
        each call asked of the model and the tokenizer."""
        self.env = env
        original = env.collect_trajectories

        async def collect_trajectories(item):
            call = Call()
            token = CURRENT_CALL.set(call)
            try:
                result = await original(item)
            except BaseException as error:
                self.count_failure("collect_trajectories", error)
                raise
            finally:
                CURRENT_CALL.reset(token)
            try:
                self.count_result(result, call)
            except Exception as error:  # counting never breaks the environment
                print(f"rl_env: a group could not be counted: {error}", file=sys.stderr)
            return result

        env.collect_trajectories = collect_trajectories
        send = getattr(env, "handle_send_to_api", None)
        if send is not None:

            async def handle_send_to_api(*args, **kwargs):
                try:
                    return await send(*args, **kwargs)
                except Exception as error:
                    self.count_failure("handle_send_to_api", error)
                    raise

            env.handle_send_to_api = handle_send_to_api
        self.sees_sampling = wrap_methods(getattr(env, "server", None), SAMPLING_METHODS, marking_sampled)
        wrap_methods(getattr(env, "tokenizer", None), TOKENIZING_METHODS, measuring)


def token_limit(env) -> int | None:
    """The limit atroposlib's `handle_send_to_api` drops groups at: the trainer's
    `max_token_len` once registered, else the environment's `max_token_length`."""
    return positive(getattr(env, "max_token_len", None)) or prompt_limit(env)


def prompt_limit(env) -> int | None:
    """The environment's own `max_token_length`: what an environment that skips long prompts
    (reasoning_gym) measures them against."""
    return positive(getattr(getattr(env, "config", None), "max_token_length", None))


def sends_alike(env) -> bool:
    """Whether atroposlib's `handle_send_to_api` sends groups scored alike: only with the
    environment's `ensure_scores_are_not_same` off (it is on by default)."""
    return getattr(getattr(env, "config", None), "ensure_scores_are_not_same", True) is False


def positive(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def wrap_methods(target, names, wrap) -> bool:
    """Replaces each of `target`'s methods `names` (those it has) by `wrap(method)` on the
    instance; whether any was."""
    if target is None:
        return False
    wrapped = False
    for name in names:
        method = getattr(target, name, None)
        if method is None or not callable(method):
            continue
        try:
            setattr(target, name, wrap(method))
        except (AttributeError, TypeError):
            continue
        wrapped = True
    return wrapped


def marking_sampled(method):
    """`method`, marking the call under way as one that asked the model."""

    def sampling(*args, **kwargs):
        call = CURRENT_CALL.get()
        if call is not None:
            call.sampled += 1
        return method(*args, **kwargs)

    return sampling


def measuring(method):
    """`method`, keeping for the call under way the longest token sequence it returned."""

    def tokenizing(*args, **kwargs):
        result = method(*args, **kwargs)
        call = CURRENT_CALL.get()
        if call is not None and isinstance(result, list) and (not result or isinstance(result[0], int)):
            call.longest_tokens = max(call.longest_tokens, len(result))
        return result

    return tokenizing


def describe_error(error: BaseException) -> str:
    return shortened(f"{type(error).__name__}: {error}")


def shortened(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def describe_value(value) -> str:
    """`a list of 8 tuple`, `a dict without "scores"`: what a result that is no group was."""
    if isinstance(value, list):
        kinds = sorted({type(member).__name__ for member in value})
        return f"a list of {len(value)} {' and '.join(kinds) or 'nothing'}"
    if isinstance(value, dict):
        keys = ", ".join(sorted(str(key) for key in value)[:8])
        return f'a dict without "scores" or with tokens and scores of other lengths (keys: {keys})'
    return f"a {type(value).__name__}"


def score_key(score) -> str:
    """A score as a key: `0.0`, `1.0`, `-1.0`, `nan`."""
    try:
        value = float(score)
    except (TypeError, ValueError):
        return str(score)[:32]
    if math.isnan(value):
        return "nan"
    return repr(value)
