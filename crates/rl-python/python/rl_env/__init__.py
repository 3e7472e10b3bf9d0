"""Which of an Atropos environment's items a process draws: the held-out slice.

    RL_ITEMS=training|held-out RL_HELD_OUT_FRACTION=0.1 RL_HELD_OUT_SEED=0 \\
        python -m rl_env ENV_FILE serve|process ARGS...

A training run's environment skips the items of the held-out slice; `rl compare` asks the
base and the trained model only those, each once. The slice is chosen by an item's content
(a seeded SHA-256 of its canonical JSON), so the two processes agree on it without sharing
anything but the fraction and the seed, whatever order the environment yields its items in.

An environment with an evaluation split of its own says so by defining
`async def get_next_eval_item(self)`, shaped like `get_next_item` (None when it has no more):
training then draws every training item, and the held-out process asks the eval items.

An environment whose items carry a part drawn anew each time (a random id, a timestamp) has no
stable content to split on: it needs `get_next_eval_item`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field

ITEMS_VARIABLE = "RL_ITEMS"
FRACTION_VARIABLE = "RL_HELD_OUT_FRACTION"
SEED_VARIABLE = "RL_HELD_OUT_SEED"
REPORT_VARIABLE = "RL_ITEMS_REPORT"

TRAINING = "training"
HELD_OUT = "held-out"
EVAL_METHOD = "get_next_eval_item"


class ItemsError(ValueError):
    """The split cannot be made as asked."""


def canonical(value):
    """`value` as JSON the same in every process: dict keys and set members sorted (a set's
    order follows string hashing, which differs per process), tuples as lists, a pydantic
    model or any other object by its type's name and fields, anything else by its repr — unless
    that repr names a memory address, which differs per process and would split at random."""
    if isinstance(value, dict):
        return {str(key): canonical(member) for key, member in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [canonical(member) for member in value]
    if isinstance(value, (set, frozenset)):
        members = [canonical(member) for member in value]
        return sorted(members, key=lambda member: json.dumps(member, sort_keys=True))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    dump = getattr(value, "model_dump", None)
    fields = dump() if callable(dump) else getattr(value, "__dict__", None)
    if isinstance(fields, dict):
        return {"type": type(value).__qualname__, "fields": canonical(fields)}
    text = repr(value)
    if " at 0x" in text:
        raise ItemsError(
            f"an item holds {text}, which has no stable content to split on: yield data "
            "(str, numbers, lists, dicts, dataclasses), or give the environment an eval split "
            f"({EVAL_METHOD})"
        )
    return text


def item_key(item) -> str:
    """The item's identity: the hex SHA-256 of its canonical JSON."""
    text = json.dumps(canonical(item), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def in_held_out(key: str, fraction: float, seed: int) -> bool:
    """Whether the item of `key` falls in the slice: a seeded hash read as a number in [0, 1)."""
    digest = hashlib.sha256(f"{seed}:{key}".encode("ascii")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


@dataclass
class Split:
    items: str
    fraction: float
    seed: int
    report_path: str | None = None
    source: str = ""
    drawn: int = 0
    skipped: int = 0
    exhausted: bool = False
    seen: set = field(default_factory=set, repr=False)

    @classmethod
    def from_environment(cls, environ=os.environ) -> "Split":
        items = environ.get(ITEMS_VARIABLE, TRAINING)
        if items not in (TRAINING, HELD_OUT):
            raise ItemsError(f"{ITEMS_VARIABLE} is {items!r}; it is {TRAINING!r} or {HELD_OUT!r}")
        try:
            fraction = float(environ.get(FRACTION_VARIABLE, "0"))
            seed = int(environ.get(SEED_VARIABLE, "0"))
        except ValueError as error:
            raise ItemsError(f"{FRACTION_VARIABLE} or {SEED_VARIABLE} is not a number: {error}") from None
        if not (math.isfinite(fraction) and 0.0 <= fraction <= 0.5):
            raise ItemsError(f"{FRACTION_VARIABLE} is {fraction}; it is between 0 and 0.5")
        return cls(items=items, fraction=fraction, seed=seed, report_path=environ.get(REPORT_VARIABLE))

    @property
    def patience(self) -> int:
        """Draws in a row without a wanted item after which the environment has none left
        (held-out) or yields nothing but the slice (training): for a fraction f, a draw misses
        with chance 1 - f, and missing this many times by chance is below one in 10^8."""
        if self.fraction <= 0.0:
            return 1
        return max(200, math.ceil(20 / self.fraction))

    def attach(self, env) -> None:
        """Replaces `env.get_next_item` with the draw of this process's items."""
        eval_draw = getattr(env, EVAL_METHOD, None)
        env.get_next_item = self.drawing(
            env.get_next_item, eval_draw if callable(eval_draw) else None, owner=type(env).__name__
        )

    def drawing(self, draw, eval_draw=None, key=item_key, owner="the environment"):
        """The async draw of this process's items (None once there are no more) over `draw`,
        the environment's own async draw of every item, and `eval_draw`, its eval split's
        (None: it has none). `key` is an item's identity (its content). The entry of any
        runner, atroposlib's environments (`attach`) and rl_verifiers alike."""
        if self.items == TRAINING:
            if eval_draw is not None or self.fraction <= 0.0:
                self.source = "eval split kept apart by the environment" if eval_draw is not None else "every item"
                self.save()
                return draw
            self.source = "items outside the held-out slice"
            drawn = self._draw(draw, key, wanted=True, once=False)
        elif eval_draw is not None:
            self.source = "eval split"
            drawn = self._draw(eval_draw, key, wanted=None, once=True)
        else:
            if self.fraction <= 0.0:
                raise ItemsError(f"no held-out slice: {FRACTION_VARIABLE} is 0 and {owner} has no {EVAL_METHOD}")
            self.source = "held-out slice"
            drawn = self._draw(draw, key, wanted=False, once=True)
        self.save()
        return drawn

    def _draw(self, draw, key, wanted, once):
        """An async `get_next_item` over `draw`'s items: those whose slice membership is not
        `wanted` (None: any) skipped, and with `once` each item only the first time."""

        async def next_item():
            misses = 0
            while True:
                item = await draw()
                if item is None:
                    return self.finish()
                identity = key(item)
                fits = wanted is None or in_held_out(identity, self.fraction, self.seed) != wanted
                if fits and not (once and identity in self.seen):
                    if once:
                        self.seen.add(identity)
                    self.drawn += 1
                    self.save()
                    return item
                self.skipped += 1
                misses += 1
                if misses >= self.patience:
                    if once:
                        return self.finish()
                    raise ItemsError(
                        f"{misses} items in a row fell in the held-out slice "
                        f"({self.fraction:g} of the items, seed {self.seed}): the environment "
                        "yields too few distinct items to keep a slice out; set "
                        "[held_out] fraction = 0 or give it an eval split"
                    )

        return next_item

    def finish(self):
        """No more items: the process ends its groups here (atroposlib stops at None)."""
        self.exhausted = True
        self.save()
        return None

    def save(self) -> None:
        if not self.report_path:
            return
        report = {key: value for key, value in asdict(self).items() if key not in ("seen", "report_path")}
        partial = f"{self.report_path}.partial"
        with open(partial, "w", encoding="utf-8") as f:
            json.dump(report, f)
        os.replace(partial, self.report_path)
