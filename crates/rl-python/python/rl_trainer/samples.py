"""What the trainer's own sampler drew, and what a batch's completions are known to be of it:
the one memory behind the run's `max_steps_off_policy` (issue 43) and the length stops its
`truncated` choice acts on. Pure: no SDK, no I/O.

* `SampleMemory`: for each sample the inference server returned (the last `capacity` distinct
  ones), the newest weights version that drew those tokens and whether any draw of them stopped
  at its max tokens. A weights version counts the optimizer steps this trainer had applied to the
  weights it sampled from (a step that trains nothing does not age a sample; a resumed run starts
  a new count, and an empty memory). Keys are digests of the tokens, so a long run's samples cost
  a few dozen bytes each.
* The matching rule (`SampleMemory.find`): a completion is of a sample when its last run of
  completion tokens (the last turn sampled) is that sample, or that sample followed by the end
  of the chat template's assistant turn (or the end of that end: `<|im_end|>` then a newline,
  or the newline alone after a sample that kept its stop token), as an environment that
  re-renders the chat (atroposlib's `tokenize_for_trainer`) appends it. A completion
  re-tokenised differently from its sample matches nothing. When several candidates match, the
  newest version among them counts (an age from it is never more than the true one), and the
  length stop is the longest candidate's.
* The age of a completion (`Provenance.age`): the weights' version now minus the newest version
  that drew its last turn: a lower bound on how many optimizer steps separate the weights it
  was sampled with from those it trains (identical tokens drawn again later only lower it;
  earlier turns of a multi-turn rollout are older still). None when the memory does not hold
  it (evicted, or not sampled by this trainer): unknown, never taken for stale.
* A group is stale, and dropped, when one of its completions' ages exceeds the bound.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Sequence

#: Distinct samples remembered: a few hundred steps of a large batch.
DEFAULT_CAPACITY = 65536


def _digest(tokens: Sequence[int]) -> bytes:
    return hashlib.blake2b(array("q", tokens).tobytes(), digest_size=16).digest()


@dataclass(frozen=True)
class Drawn:
    """What the memory holds of one sample's tokens."""

    version: Optional[int]  # the newest weights version that drew them; None: not known
    length_stopped: bool  # some draw of them stopped at its max tokens


class SampleMemory:
    def __init__(self, capacity: int = DEFAULT_CAPACITY, turn_end: Sequence[int] = ()):
        self.capacity = capacity
        # The tokens the chat template writes after an assistant message's content.
        self.turn_end = tuple(int(t) for t in turn_end)
        self._drawn: "OrderedDict[bytes, Drawn]" = OrderedDict()

    def __len__(self) -> int:
        return len(self._drawn)

    def record(self, tokens: Sequence[int], version: Optional[int], length_stopped: bool) -> None:
        """One sample drawn by the weights of `version`. Versions only grow while a trainer runs,
        so the entry moved to the end is the newest, and eviction forgets the oldest first."""
        if not tokens:
            return
        key = _digest([int(t) for t in tokens])
        before = self._drawn.pop(key, None)
        if before is not None:
            if version is None or (before.version is not None and before.version > version):
                version = before.version
            length_stopped = length_stopped or before.length_stopped
        self._drawn[key] = Drawn(version, length_stopped)
        while len(self._drawn) > self.capacity:
            self._drawn.popitem(last=False)

    def record_all(self, samples: Iterable[Any], version: Optional[int]) -> None:
        """Samples as the policy returns them (`tokens`, `stop_reason`)."""
        for sample in samples:
            self.record(sample.tokens, version, sample.stop_reason == "length")

    def candidates(self, completion: Sequence[int]) -> List[List[int]]:
        """The completion, then the completion without each tail of it that is a tail of the
        template's turn end, longest first."""
        tokens = [int(t) for t in completion]
        found = [tokens] if tokens else []
        end = self.turn_end
        for cut in range(1, len(end) + 1):
            if len(tokens) > cut and tuple(tokens[-cut:]) == end[-cut:]:
                found.append(tokens[:-cut])
        return found

    def find(self, completion: Sequence[int]) -> Optional[Drawn]:
        """What is known of the sample `completion` (a last run of completion tokens) is, or
        None when no candidate is held."""
        matches = [d for d in (self._drawn.get(_digest(c)) for c in self.candidates(completion)) if d is not None]
        if not matches:
            return None
        versions = [d.version for d in matches if d.version is not None]
        return Drawn(max(versions) if versions else None, matches[0].length_stopped)

    def holds_length_stop(self, completion: Sequence[int]) -> bool:
        drawn = self.find(completion)
        return drawn is not None and drawn.length_stopped


def turn_end_tokens(tokenizer: Any) -> List[int]:
    """The tokens a chat template writes after an assistant message's content (ChatML:
    `<|im_end|>`, newline), read by rendering a marker message; [] when the tokenizer has no
    template or the marker cannot be found (then only exact samples match)."""
    marker = "rlturnendmarker"
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "x"}, {"role": "assistant", "content": marker}], tokenize=False
        )
        at = text.rfind(marker) if isinstance(text, str) else -1
        if at < 0:
            return []
        return [int(t) for t in tokenizer.encode(text[at + len(marker):], add_special_tokens=False)]
    except Exception:  # a template that refuses this conversation: exact matches only
        return []


@dataclass(frozen=True)
class Provenance:
    """What a batch is read against: the memory, the weights' version now, and the run's bound
    (None: no bound; ages are still measured)."""

    memory: SampleMemory
    version: int
    max_steps: Optional[int] = None

    def age(self, drawn: Optional[Drawn]) -> Optional[int]:
        if drawn is None or drawn.version is None:
            return None
        return max(0, self.version - drawn.version)

    def stale(self, ages: Iterable[Optional[int]]) -> bool:
        """Proven older than the bound: one completion's lower bound exceeds it."""
        return self.max_steps is not None and any(a is not None and a > self.max_steps for a in ages)
