"""The run's choices of how a group's scores become advantages (issue 43), and of what becomes
of a truncated completion. Pure: no SDK, no I/O.

* `advantage_norm`: `std_floor` divides (score - mean) by max(std, 1) (rl's default: centred,
  never amplified); `std` by the group's std (GRPO); `mean_only` centres only (Dr. GRPO and the
  Tinker cookbook).
* `truncated`: a completion is truncated when the trainer cut it to its length
  (`max_token_trainer_length`) or when the trainer's sampler stopped it at its max tokens
  (`finish_reason` "length"; recognised by its tokens, `samples.SampleMemory`). `train` trains it as
  any other; `mask` trains nothing of it (its score still counts in its group's mean and std,
  as TRL's `mask_truncated_completions`); `zero_reward` gives it score 0 before the advantages;
  `penalty` adds DAPO's soft overlong punishment to every completion's score: 0 up to
  `max_len - overlong_band` tokens, then falling linearly to -1 at `max_len`, -1 when truncated.
"""

from __future__ import annotations

from dataclasses import dataclass

ADVANTAGE_NORMS = ("std_floor", "std", "mean_only")
TRUNCATION_CHOICES = ("train", "mask", "zero_reward", "penalty")


@dataclass(frozen=True)
class Shaping:
    advantage_norm: str = "std_floor"
    truncated: str = "train"
    overlong_band: int = 0

    @classmethod
    def of(cls, config) -> "Shaping":
        return cls(config.advantage_norm, config.truncated, config.overlong_band)

    def __post_init__(self):
        if self.advantage_norm not in ADVANTAGE_NORMS:
            raise ValueError(f"advantage_norm {self.advantage_norm!r} is not one of {ADVANTAGE_NORMS}")
        if self.truncated not in TRUNCATION_CHOICES:
            raise ValueError(f"truncated {self.truncated!r} is not one of {TRUNCATION_CHOICES}")

    def scale(self, std: float) -> float:
        """What (score - mean) is divided by."""
        if self.advantage_norm == "mean_only":
            return 1.0
        if self.advantage_norm == "std":
            # All alike: every centred score is 0, whatever it is divided by.
            return std if std > 0.0 else 1.0
        return max(std, 1.0)

    def score(self, score: float, length: int, truncated: bool, max_len: int) -> float:
        """A completion's score as its advantage is computed from (`length`: its tokens,
        prompt included, as the trainer keeps them)."""
        if self.truncated == "zero_reward" and truncated:
            return 0.0
        if self.truncated == "penalty":
            return score + overlong_penalty(length, truncated, max_len, self.overlong_band)
        return score

    def trains(self, truncated: bool) -> bool:
        return not (truncated and self.truncated == "mask")


def overlong_penalty(length: int, truncated: bool, max_len: int, band: int) -> float:
    """DAPO's soft overlong punishment: 0 up to max_len - band, then linear to -1 at max_len;
    -1 for a truncated completion."""
    if truncated or length >= max_len:
        return -1.0
    start = max_len - band
    if band <= 0 or length <= start:
        return 0.0
    return (start - length) / band
