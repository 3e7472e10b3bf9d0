"""The run folder's files, and the optional WandB mirror of the metrics.

* `metrics.jsonl`: one JSON object per step, then `{"event": "final_weights", "path": ...}`;
* `checkpoints.jsonl`: one row per checkpoint as it is made;
* `rollouts/step_NNNNNN.jsonl`: one line per completion of a step's batch, at most
  `keep_rollouts` files (the oldest are deleted).

Every line is appended, flushed and fsynced, so a reader never sees a half-written row of a
step that finished, and a crash loses at most the line being written.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import random
import re
import string
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from .batch import datum_tokens

ROLLOUT_NAME = re.compile(r"^step_(\d+)\.jsonl$")


def rfc3339_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonLines:
    """An append-only JSON-lines file; each row is flushed and fsynced before `append` returns."""

    def __init__(self, path: str):
        self.path = path
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._file = open(path, "a", encoding="utf-8")

    def append(self, row: Dict[str, Any]) -> None:
        self._file.write(json.dumps(row, ensure_ascii=False) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        try:
            self._file.close()
        except OSError:
            pass


#: The running token counts a step row carries, each the sum of its own step's
#: `tokens/<kind>` and the totals of the row before.
TOKEN_TOTALS = ("tokens/prompt_total", "tokens/sampled_total", "tokens/trained_total")


def rows_up_to(path: str, step: int) -> Iterator[Tuple[int, Dict[str, Any]]]:
    """(step, row) of each step row of `path` at or before `step`, in file order: a resumed
    run's metrics.jsonl holds its parent's rows up to the step it resumed after, as rl copied
    them. Broken lines, events and a missing file give nothing."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(row, dict) or "event" in row:
                    continue
                row_step = row.get("step")
                if isinstance(row_step, bool) or not isinstance(row_step, int) or not 0 <= row_step <= step:
                    continue
                yield row_step, row
    except OSError:
        return


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def token_totals(path: str, step: int) -> Tuple[Dict[str, int], Optional[int]]:
    """The token totals a run continuing after `step` starts from: those of the last row of
    `path` at or before `step` that has them, and that row's step; zeros and None when no row
    has them (a parent trained by an rl that did not count tokens, or no row at all)."""
    return _token_totals_of(rows_up_to(path, step))


def _token_totals_of(rows: Iterable[Tuple[int, Dict[str, Any]]]) -> Tuple[Dict[str, int], Optional[int]]:
    found: Tuple[Dict[str, int], Optional[int]] = (dict.fromkeys(TOKEN_TOTALS, 0), None)
    for row_step, row in rows:
        values = [row.get(key) for key in TOKEN_TOTALS]
        if all(_is_count(v) and isinstance(v, int) for v in values):
            if found[1] is None or row_step >= found[1]:
                found = (dict(zip(TOKEN_TOTALS, values)), row_step)
    return found


class Checkpoints:
    """checkpoints.jsonl: {"step", "name", "sampler_path", "state_path", "time"} per checkpoint,
    and with a state its `fingerprint`: what a resume checks it loaded (loop.py)."""

    def __init__(self, path: str):
        self.path = path
        self.lines = JsonLines(path)

    def record(
        self, step: int, name: str, sampler_path: str, state_path: Optional[str], fingerprint: Optional[List[float]] = None
    ) -> Dict[str, Any]:
        row = {
            "step": step,
            "name": name,
            "sampler_path": sampler_path,
            "state_path": state_path,
            "time": rfc3339_now(),
        }
        if fingerprint is not None:
            row["fingerprint"] = fingerprint
        self.lines.append(row)
        return row

    def fingerprint_of(self, state_path: str) -> Optional[List[float]]:
        """The fingerprint recorded with `state_path` (rl copies a parent's rows into its
        resumed child's file), if any row has one."""
        found = None
        try:
            with open(self.path, "r", encoding="utf-8") as f:
                for line in f:
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue
                    value = row.get("fingerprint") if isinstance(row, dict) else None
                    if row.get("state_path") == state_path and isinstance(value, list) and value:
                        found = [float(x) for x in value if isinstance(x, (int, float))]
        except OSError:
            return None
        return found

    def close(self) -> None:
        self.lines.close()


class Rollouts:
    """rollouts/step_NNNNNN.jsonl, bounded to the newest `keep` files (0: none written)."""

    def __init__(self, directory: str, keep: int):
        self.directory = directory
        self.keep = keep

    def path_for(self, step: int) -> str:
        return os.path.join(self.directory, f"step_{step:06d}.jsonl")

    def write(self, step: int, rows: Iterable[Dict[str, Any]]) -> Optional[str]:
        if self.keep <= 0:
            return None
        os.makedirs(self.directory, exist_ok=True)
        path = self.path_for(step)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self.prune()
        return path

    def files(self) -> List[str]:
        """Rollout files, oldest step first."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        steps = sorted((int(m.group(1)), n) for n in names if (m := ROLLOUT_NAME.match(n)))
        return [os.path.join(self.directory, n) for _, n in steps]

    def prune(self) -> List[str]:
        files = self.files()
        doomed = files[: max(0, len(files) - self.keep)]
        for path in doomed:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
        return doomed


def rollout_rows(prepared, decode) -> List[Dict[str, Any]]:
    """One row per completion of a prepared batch: group, index, prompt and completion text
    (decoded from the tokens before / from the first completion token), score, advantage,
    skipped, and its tokens: prompt, completion and trained (its datum's, 0 when not trained),
    whose sums over a step's rows are that step's tokens/* metrics; `rollout` (whose branch it
    is) when the group says (a verifiers environment's multi-branch rollouts); `messages` (the
    conversation, as the environment sent it) when it sent one. `decode(tokens) -> str`."""
    rows = []
    for group in prepared.groups:
        for seq in group.sequences:
            cut = seq.prompt_length()
            rows.append(
                {
                    "group": group.index,
                    "index": seq.index,
                    "prompt": decode(seq.tokens[:cut]),
                    "completion": decode(seq.tokens[cut:]),
                    "score": group.scores[seq.index] if seq.index < len(group.scores) else None,
                    "advantage": seq.advantage,
                    "skipped": group.skip is not None,
                    "skip_reason": group.skip,
                    "prompt_tokens": cut,
                    "completion_tokens": len(seq.tokens) - cut,
                    "trained_tokens": datum_tokens(group, seq),
                    "truncated": seq.truncated,
                }
            )
            if group.rollout_of is not None:
                rows[-1]["rollout"] = group.rollout_of[seq.index]
            if seq.messages is not None:
                rows[-1]["messages"] = seq.messages
        if not group.sequences and group.skip is not None:
            rows.append(
                {
                    "group": group.index,
                    "index": None,
                    "prompt": None,
                    "completion": None,
                    "score": None,
                    "advantage": None,
                    "skipped": True,
                    "skip_reason": group.skip,
                    "problem": group.problem,
                }
            )
    return rows


class Wandb:
    """Mirrors the metrics rows to WandB: run `{run_name}-trainer-{4 random chars}` in the
    run's group. wandb is imported only when asked for; without it the trainer says so and
    goes on with its files."""

    def __init__(self, run):
        self.run = run

    @classmethod
    def start(cls, config, say) -> Optional["Wandb"]:
        if not config.use_wandb:
            return None
        try:
            import wandb  # noqa: WPS433 (optional dependency)
        except Exception as e:  # ImportError, or a broken install
            say(f"WandB logging is off: wandb cannot be imported ({type(e).__name__}: {e})")
            return None
        suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=4))
        run = wandb.init(
            project=config.wandb_project,
            group=config.wandb_group,
            name=f"{config.wandb_run_name}-trainer-{suffix}",
            tags=["trainer"],
            config={k: v for k, v in config.summary().items()},
        )
        say(f"WandB run {run.name} in project {config.wandb_project}, group {config.wandb_group}")
        return cls(run)

    #: Text values WandB is given too (it keeps them in the run's history and table; every
    #: other value that is not a number is left to the metrics file).
    TEXT_KEYS = ("time/bottleneck",)

    def log(self, metrics: Dict[str, Any], step: int) -> None:
        values = {
            k: v
            for k, v in metrics.items()
            if k not in ("step", "_timestamp") and (isinstance(v, (int, float)) or (k in self.TEXT_KEYS and isinstance(v, str)))
        }
        self.run.log(values, step=step)

    def finish(self, exit_code: int = 0) -> None:
        try:
            self.run.finish(exit_code=exit_code)
        except Exception:
            pass


# --------------------------------------------------------------------------- costs and caps

#: A step row's cost keys, present only when the run has a price.
COST_STEP = "cost/step"
COST_TOTAL = "cost/total"
COST_ESTIMATE = "cost/estimate_at_completion"
#: How many of the last steps the estimate at completion takes the pace of.
ESTIMATE_STEPS = 5
#: How many of this run's last steps predict the next one, for the caps.
PREDICT_STEPS = 3


def is_priced(config) -> bool:
    """Whether the run has any price (else it counts tokens only and logs no cost)."""
    return any(
        getattr(config, key) is not None
        for key in ("price_prompt_per_million", "price_sampled_per_million", "price_trained_per_million", "price_machine_per_hour")
    )


def step_cost(config, tokens: Dict[str, int], secs: float) -> float:
    """One step's cost: its tokens at the prices per million, and on the local engine the
    machine's price per hour for the step's whole time (`time/total_secs`)."""
    cost = 0.0
    for kind in ("prompt", "sampled", "trained"):
        price = getattr(config, f"price_{kind}_per_million")
        if price is not None:
            cost += tokens.get(f"tokens/{kind}", 0) * price / 1e6
    if config.price_machine_per_hour is not None:
        cost += config.price_machine_per_hour * max(0.0, secs) / 3600.0
    return cost


def cost_total(path: str, step: int) -> Tuple[float, Optional[int]]:
    """The cost total a run continuing after `step` starts from: `cost/total` of the last row
    of `path` at or before `step` that has one, and that row's step; 0 and None without."""
    return _cost_total_of(rows_up_to(path, step))


def _cost_total_of(rows: Iterable[Tuple[int, Dict[str, Any]]]) -> Tuple[float, Optional[int]]:
    found: Tuple[float, Optional[int]] = (0.0, None)
    for row_step, row in rows:
        value = row.get(COST_TOTAL)
        if _is_count(value) and (found[1] is None or row_step >= found[1]):
            found = (float(value), row_step)
    return found


class Spend:
    """What the run has spent, step by step: each of this run's steps' cost (None without a
    price), tokens (prompt, sampled and trained together) and seconds, beside what its
    parents spent up to the step it continues after (`Lineage`), so that its totals and its
    caps continue theirs."""

    def __init__(self, lineage: Optional["Lineage"] = None):
        self.lineage = lineage or Lineage()
        self.steps: List[Tuple[Optional[float], int, float]] = []

    def add(self, cost: Optional[float], tokens: int, secs: float) -> None:
        self.steps.append((cost, tokens, secs))

    @property
    def cost(self) -> float:
        """This run's own cost so far."""
        return sum(c for c, _, _ in self.steps if c is not None)

    @property
    def tokens(self) -> int:
        """This run's own tokens so far."""
        return sum(t for _, t, _ in self.steps)

    @property
    def cost_total(self) -> float:
        """The run's cost so far, its parents' included."""
        return self.lineage.cost + self.cost

    def estimate_at_completion(self, remaining: int) -> float:
        """The total at the last step: so far, and each remaining step at the mean cost of the
        last `ESTIMATE_STEPS`."""
        recent = [c for c, _, _ in self.steps[-ESTIMATE_STEPS:] if c is not None]
        mean = sum(recent) / len(recent) if recent else 0.0
        return self.cost_total + max(0, remaining) * mean

    def next_step(self) -> Optional[Tuple[float, float, float]]:
        """The next step predicted from the mean cost, tokens and seconds of the last
        `PREDICT_STEPS` steps of the run (its parents' last ones before it has any); None
        before any step of the lineage has run."""
        recent = (self.lineage.steps + self.steps)[-PREDICT_STEPS:]
        if not recent:
            return None
        n = len(recent)
        return (
            sum(c or 0.0 for c, _, _ in recent) / n,
            sum(t for _, t, _ in recent) / n,
            sum(s for _, _, s in recent) / n,
        )


class Lineage:
    """What a continued run's parents spent up to the step it continues after, read once from
    their rows that rl copied into its metrics.jsonl: the cost total and the token totals (with
    the steps of the rows they came from, None without one), the steps' seconds, and each
    step's figures (to predict the first step of the child)."""

    def __init__(self, cost: float = 0.0, totals=None, secs: float = 0.0, steps=None, cost_from=None, totals_from=None):
        self.cost, self.secs = cost, secs
        self.totals: Dict[str, int] = dict(totals or dict.fromkeys(TOKEN_TOTALS, 0))
        self.cost_from: Optional[int] = cost_from
        self.totals_from: Optional[int] = totals_from
        self.steps: List[Tuple[Optional[float], int, float]] = list(steps or [])

    @property
    def tokens(self) -> int:
        return sum(self.totals.values())

    @classmethod
    def read(cls, path: str, step: int) -> "Lineage":
        rows = list(rows_up_to(path, step))
        cost, cost_from = _cost_total_of(rows)
        totals, totals_from = _token_totals_of(rows)
        by_step: Dict[int, Tuple[Optional[float], int, float]] = {}
        for row_step, row in rows:
            secs = row.get("time/total_secs")
            if row_step == 0 or not _is_count(secs):
                continue
            tokens = sum(row.get(f"tokens/{kind}", 0) for kind in ("prompt", "sampled", "trained") if _is_count(row.get(f"tokens/{kind}")))
            row_cost = row.get(COST_STEP)
            # The last row of a step wins: a step appears once per lineage, but be sure.
            by_step[row_step] = (float(row_cost) if _is_count(row_cost) else None, int(tokens), float(secs))
        steps = [by_step[k] for k in sorted(by_step)]
        return cls(cost, totals, sum(s for _, _, s in steps), steps, cost_from, totals_from)


def first_step_bound(config) -> Tuple[float, float, float]:
    """What the first step of a run can spend at most, before any step has shown what one
    takes: every sequence of the batch at the trainer's token limit (prompt and sampled
    together within it, and trained), at the run's token prices. Its machine time cannot be
    bounded: 0 (said where caps are announced)."""
    tokens = config.batch_size * config.max_token_trainer_length
    price = lambda kind: getattr(config, f"price_{kind}_per_million") or 0.0  # noqa: E731
    cost = tokens * (max(price("prompt"), price("sampled")) + price("trained")) / 1e6
    return (cost, float(2 * tokens), 0.0)


def cap_passed(config, spend: Spend, hours: float) -> Optional[Dict[str, Any]]:
    """The first cap the next step would pass, as the figures of a `capped` row; None while
    none would be. What counts is what the run and its parents spent (`hours`: this run's
    since its trainer started; its parents' steps' time is added), plus the next step as
    predicted (`Spend.next_step`), or at its bound before any step has run
    (`first_step_bound`; `predicted` says which)."""
    predicted = spend.next_step()
    basis = "recent_steps"
    if predicted is None:
        predicted, basis = first_step_bound(config), "token_bound"
    cost, tokens, secs = predicted
    checks = (
        ("max_cost", config.max_cost, spend.cost_total, cost),
        ("max_tokens", config.max_tokens, spend.lineage.tokens + spend.tokens, tokens),
        ("max_hours", config.max_hours, spend.lineage.secs / 3600.0 + hours, secs / 3600.0),
    )
    for cap, limit, spent, step in checks:
        if limit is not None and spent + step > limit:
            parents = bool(spend.lineage.steps) or spend.lineage.cost > 0 or spend.lineage.tokens > 0
            return {"cap": cap, "limit": limit, "spent": spent, "next_step": step, "predicted": basis, "parents": parents}
    return None


def describe_cap(cap: Dict[str, Any], currency: str) -> str:
    """`max_cost 0.02 USD: this run spent 0.0134 USD and its next step would take about
    0.0071 more`, and the like per cap; what its parents spent is said to be included."""
    limit, spent, step = cap["limit"], cap["spent"], cap["next_step"]
    who = "this run and the runs it continues" if cap.get("parents") else "this run"
    if cap.get("predicted") == "token_bound":
        # Before any step has run, the step is at its bound, not a guess of what it takes.
        about = "up to"
        bound = (
            " (a first step's bound: every sequence of the batch at max_token_trainer_length; "
            "lower env.max_token_length or env.batch_size, or raise the cap)"
        )
    else:
        about, bound = "about", ""
    if cap["cap"] == "max_cost":
        return f"max_cost {limit:g} {currency}: {who} spent {spent:.6g} {currency} and its next step would take {about} {step:.6g} more{bound}"
    if cap["cap"] == "max_tokens":
        return f"max_tokens {limit}: {who} used {spent:.0f} tokens and its next step would use {about} {step:.0f} more{bound}"
    if step <= 0:
        return f"max_hours {limit:g}: {who} used {spent:.4g} h (its trainer's time since it started, its parents' steps)"
    return f"max_hours {limit:g}: {who} used {spent:.4g} h and its next step would take about {step * 3600:.0f} s more"
