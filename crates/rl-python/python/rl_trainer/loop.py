"""The trainer's life: serve, set up, train `total_steps` steps, save the final weights, linger.

`Trainer.phase` and `Trainer.step` say where it is, so a failure can be named
(`rl-trainer: setup failed: ...` / `rl-trainer: step N failed: ...`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import time
from typing import Any, Dict, Iterator, List, Optional

from .batch import (
    REWARD_MEAN,
    SKIP_MALFORMED,
    SKIP_STALE,
    advantage_stats,
    aligned_sequences,
    batch_counts,
    off_policy_counts,
    off_policy_steps,
    prepare_batch,
    summary,
    token_counts,
    training_logprobs,
)
from .config import CONTRACT, EVALUATE_MARGIN_SECS, TrainerConfig
from . import evaluation
from .divergence import LOCAL_ENGINE_VARIABLE, clip_bounds, kl_penalty, ratio_stats
from .engine import Tinker, TinkerPolicy, tensor_list
from .losses import LocalDefaults, local_adapter
from .samples import Provenance, SampleMemory, turn_end_tokens
from .shaping import Shaping
from .records import (
    COST_ESTIMATE,
    COST_STEP,
    COST_TOTAL,
    TOKEN_TOTALS,
    Checkpoints,
    JsonLines,
    Rollouts,
    Lineage,
    Spend,
    Wandb,
    cap_passed,
    describe_cap,
    is_priced,
    rollout_rows,
    step_cost,
)
from .runapi import RunApi
from .server import InferenceServer, bind_socket, create_app

#: Set to a step number, makes that step fail after its batch arrived (a test hook: the failure
#: path is then exercised with the real engine, run-api and environment up).
FAULT_VARIABLE = "RL_TRAINER_FAIL_AT_STEP"


#: A sentence every tokenizer turns into a few ordinary tokens: what the weights' fingerprint
#: is the log-probability of.
PROBE_TEXT = "The quick brown fox jumps over the lazy dog, 1 2 3."
#: Loaded weights are the saved ones when no token's log-probability moved by more than this
#: (nats). Recomputing the same forward pass agrees far closer (exactly on the CPU engine);
#: one training step at the learning rates RL uses moves some token by more.
FINGERPRINT_TOLERANCE = 1e-3


class StateNotLoaded(Exception):
    """A resume's training state did not come back as it was saved."""


class Capped(Exception):
    """The next step would pass one of the run's caps: its state is saved, the run ends
    `capped` (the trainer exits with the contract's EXIT_CAPPED). The message says why."""


def probe_tokens(tokenizer) -> list:
    tokens = list(tokenizer.encode(PROBE_TEXT, add_special_tokens=False))[:32]
    return tokens if len(tokens) >= 2 else [0, 1]


def max_difference(expected: List[float], found: List[float]) -> float:
    """The largest move of one token's log-probability between two fingerprints of one length."""
    return max((abs(a - b) for a, b in zip(expected, found)), default=0.0)


def fingerprints_match(expected: List[float], found: List[float]) -> bool:
    return len(found) == len(expected) and all(
        math.isfinite(b) and abs(a - b) <= FINGERPRINT_TOLERANCE for a, b in zip(expected, found)
    )


#: The parts a step's time is split into, each `time/<part>_secs` in its row. `other` is what
#: the rest leave of the step's total: preparing the batch (advantages, cuts, datums,
#: statistics) and the bookkeeping between the parts.
STEP_PARTS = ("wait", "logprobs", "rollouts", "forward_backward", "optim", "save", "sampler_update", "eval", "other")
#: Parts a row holds only when the step did them: `time/eval_secs` has always meant that the
#: step evaluated its checkpoint.
OCCASIONAL_PARTS = ("eval",)


class StepClock:
    """One step's anatomy: the seconds spent in each part, from the moment the step asks for
    its batch (`total`), so the parts add up to the step's whole time."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.secs: Dict[str, float] = {p: 0.0 for p in STEP_PARTS if p not in OCCASIONAL_PARTS and p != "other"}

    def add(self, part: str, secs: float) -> None:
        self.secs[part] = self.secs.get(part, 0.0) + secs

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - began)

    def metrics(self, tokens: Dict[str, int]) -> Dict[str, Any]:
        """time/<part>_secs, time/total_secs, the bottleneck (the largest part, and its share
        of the total), and the step's throughput, all up to now."""
        total = time.monotonic() - self.started
        parts = dict(self.secs)
        # `wait` is timed inside the poll and the other parts never overlap, so the named parts
        # never exceed the total: max only absorbs floating-point rounding.
        parts["other"] = max(0.0, total - sum(parts.values()))
        out: Dict[str, Any] = {f"time/{p}_secs": parts[p] for p in STEP_PARTS if p in parts}
        out["time/total_secs"] = total
        bottleneck = max(parts, key=lambda p: parts[p])
        out["time/bottleneck"] = bottleneck
        out["time/bottleneck_share"] = parts[bottleneck] / total if total > 0 else 0.0
        for kind in ("trained", "sampled"):
            out[f"throughput/{kind}_tokens_per_sec"] = tokens[f"tokens/{kind}"] / total if total > 0 else 0.0
        return out


class PhaseFile:
    """`trainer-phase.json`: the part of its step the trainer is in (`wait` for the batch,
    `logprobs`, `rollouts`, `forward_backward`, `save`, `sampler_update`, `eval`, `other`; `final`
    while it reports its final weights, `linger` once done training), the
    step, and since when (Unix seconds). Rewritten whole (temp + rename) only when the part
    changes, a few times a step: what names the component a stalled run waits on."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.current: Optional[tuple] = None

    def enter(self, phase: str, step: int) -> None:
        if self.current == (phase, step):
            return
        self.current = (phase, step)
        temporary = f"{self.path}.tmp"
        try:
            with open(temporary, "w") as f:
                json.dump({"phase": phase, "step": step, "since": time.time()}, f)
            os.replace(temporary, self.path)
        except OSError:
            pass  # a hint for a stall's cause: a step never fails for it


def say(message: str) -> None:
    """An informational line on stdout (the lines rl parses are printed bare)."""
    print(f"[rl-trainer] {message}", flush=True)


def announce(line: str) -> None:
    print(line, flush=True)


class Trainer:
    def __init__(self, config: TrainerConfig, run_dir: str, api_key: str):
        self.config = config
        self.run_dir = run_dir
        self.phase = "setup"
        self.step = 0
        self.runapi = RunApi(config.rollout_server_url, say)
        self.tinker = Tinker(config, api_key, say)
        self.policy = TinkerPolicy(self.tinker, config.model_name, config.base_model, config.max_token_length)
        self.server: Optional[InferenceServer] = None
        self.server_task: Optional[asyncio.Task] = None
        os.makedirs(run_dir, exist_ok=True)
        names = CONTRACT["run_folder"]
        self.metrics = JsonLines(os.path.join(run_dir, names["metrics"]))
        self.checkpoints = Checkpoints(os.path.join(run_dir, names["checkpoints"]))
        self.rollouts = Rollouts(os.path.join(run_dir, names["rollouts"]), config.keep_rollouts)
        self.phases = PhaseFile(os.path.join(run_dir, names["trainer_phase"]))
        self.wandb: Optional[Wandb] = None
        self.evaluate_command = evaluation.command_from()
        self.evaluation_url = evaluation.loopback_url(config.serve_host, config.serve_port)
        self.last_evaluated = config.starting_step
        # Token totals continue the parent's (its rows up to the starting step are copied
        # here by rl before a resumed run starts); `totals_from` is the row they came from.
        # What this run spends (its cost/total continues the parent's, like the token totals),
        # what its caps are read against, and since when it trains.
        lineage = Lineage.read(self.metrics.path, config.starting_step) if config.starting_step > 0 else Lineage()
        self.totals, self.totals_from = dict(lineage.totals), lineage.totals_from
        self.priced = is_priced(config)
        self.cost_from_step = lineage.cost_from
        self.spend = Spend(lineage)
        self.started_at = time.monotonic()
        # The last step whose training state (weights + optimizer) is saved: a resume's
        # starting step (its state was loaded), else step 0 (saved in setup).
        self.state_saved_at = config.starting_step
        # The tokens the weights' fingerprint is taken on: the probe text in the run's tokenizer
        # (set once the tokenizer is loaded, in setup).
        self.probe: list = []
        # The ratio bounds the engine clips at (for train/clip_fraction), when known; the
        # sampler of the base weights, when the KL to the base model is measured.
        # On the local engine, a loss skyrl-tx cannot compute as asked goes through rl's loss
        # adapter (losses.py), at the bounds clip_bounds says.
        local, defaults = os.environ.get(LOCAL_ENGINE_VARIABLE) == "1", LocalDefaults.of(CONTRACT["constants"])
        self.clip_bounds, self.no_clip_fraction = clip_bounds(config.loss, config.clip_low, config.clip_high, local, defaults.clips)
        self.adapter = (
            local_adapter(config.loss, config.clip_low, config.clip_high, config.dro_beta, self.clip_bounds, defaults) if local else None
        )
        self.base_sampler = None
        # Optimizer steps this trainer has applied: the version of the weights, which the
        # samples the server records carry (`samples.py`, the run's max_steps_off_policy).
        self.trained_steps = 0

    # ------------------------------------------------------------------ phases

    def start_serving(self) -> asyncio.Task:
        """Bind and serve at once, before the slow setup, so /health answers early."""
        c = self.config
        try:
            sock = bind_socket(c.serve_host, c.serve_port)
        except OSError as e:
            raise OSError(f"cannot serve inference on {c.serve_host}:{c.serve_port}: {e.strerror or e}") from None
        self.server = InferenceServer(create_app(self.policy), sock)
        self.server_task = asyncio.create_task(self.server.serve(), name="inference-server")
        say(f"serving inference on http://{c.serve_host}:{c.serve_port}/v1 (and /generate)")
        return self.server_task

    async def run(self) -> None:
        await self.setup()
        c = self.config
        if self.evaluate_command and c.eval_every > 0 and c.starting_step == 0:
            # The untrained weights first: the baseline every later evaluation is read against.
            self.phases.enter("eval", 0)
            baseline = {"step": 0, **await self.evaluate(0)}
            self.metrics.append(baseline)
            if self.wandb is not None:
                self.wandb.log(baseline, step=0)
        for n in range(self.config.starting_step + 1, self.config.total_steps + 1):
            await self.check_caps(n)
            self.phase, self.step = "step", n
            await self.train_step(n)
        self.phase = "final"
        self.phases.enter("final", self.config.total_steps)
        await self.finish()
        # Done training, its final weights reported: rl's supervisor stops a lingering trainer
        # once the environment has gone, and the run has completed.
        self.phase = "linger"
        self.phases.enter("linger", self.config.total_steps)
        await self.linger()

    async def setup(self) -> None:
        c = self.config
        for note in c.notes:
            say(f"note: {note}")
        for unused in c.unused_algorithm_settings():
            say(f"note: {unused} is set but not used by loss {c.loss}, truncated {c.truncated}")
        if self.no_clip_fraction:
            say(f"note: {self.no_clip_fraction}")
        if self.adapter is not None:
            say(f"note: {self.adapter.describe()}")
        if c.eval_every and self.evaluate_command is None:
            say(
                f"note: tinker.eval_every is {c.eval_every}, but rl gave no evaluation command "
                f"({evaluation.COMMAND_VARIABLE}): no checkpoint is evaluated during this run"
            )
        elif c.eval_every and self.evaluation_url is None:
            say(
                f"note: tinker.eval_every is {c.eval_every}, but this trainer serves on {c.serve_host}, "
                "not on loopback, where rl asks it: no checkpoint is evaluated during this run"
            )
            self.evaluate_command = None
        say("settings: " + ", ".join(f"{k}={v}" for k, v in c.summary().items()))
        if c.starting_step > 0 and self.totals_from is None:
            say(f"note: no metrics row up to step {c.starting_step} holds token totals: this run's totals start from 0")
        elif c.starting_step > 0 and self.totals_from != c.starting_step:
            say(
                f"note: token totals continue from step {self.totals_from}'s row (step {c.starting_step} "
                "has none): the steps between are not in them"
            )
        if not self.priced:
            say("no price is set (the operator's [prices]): this run counts tokens only, no cost")
        elif c.starting_step > 0 and self.cost_from_step is None:
            say(f"note: no metrics row up to step {c.starting_step} holds cost/total: this run's cost total starts from 0")
        caps = {key: getattr(c, key) for key in ("max_cost", "max_tokens", "max_hours") if getattr(c, key) is not None}
        if caps:
            shown = ", ".join(f"{key}={value:g}" for key, value in caps.items())
            say(
                f"caps (what this run and the runs it continues spent, checked before each step, the first "
                f"included): {shown} ({c.currency} for max_cost)"
            )
            if c.max_cost is not None and c.price_machine_per_hour is not None and self.spend.next_step() is None:
                say("note: the machine's time of a first step cannot be predicted before one has run: max_cost may be passed by that step's machine cost")
        # The Tinker API's host first: one that cannot be reached fails the run in seconds.
        await self.tinker.check_reachable()
        from transformers import AutoTokenizer  # slow import: after /health is up

        tokenizer = await asyncio.to_thread(AutoTokenizer.from_pretrained, c.tokenizer_name)
        self.policy.load(tokenizer)
        self.policy.samples = SampleMemory(turn_end=turn_end_tokens(tokenizer))
        say(f"tokenizer loaded from {c.tokenizer_name}")
        if c.max_steps_off_policy is not None:
            say(
                f"a group with a completion sampled more than {c.max_steps_off_policy} optimizer step(s) "
                "before the weights it would train is dropped (max_steps_off_policy)"
            )

        await self.tinker.connect()
        say(f"LoRA training client {self.tinker.model_id} on {c.base_model} (rank {c.lora_rank})")
        self.probe = probe_tokens(tokenizer)
        if c.measures_kl_base():
            self.base_sampler = await self.tinker.base_sampling_client()
            say(f"the KL to the base model {c.base_model} is measured each step (kl_coef {c.kl_coef:g})")
        if c.resume_state:
            # The parent's rows up to this step are already in checkpoints.jsonl (rl copies
            # them); this run's sampler copy of the state is only for sampling.
            await self.tinker.load_state(c.resume_state)
            await self.check_loaded(c.resume_state)
            say(f"training state (weights + optimizer) loaded from {c.resume_state}; continuing after step {c.starting_step}")
            path = await self.tinker.save_for_sampler(f"resumed_step_{c.starting_step}")
            self.use_sampler(await self.tinker.sampling_client(path), path)
        else:
            path = await self.tinker.save_for_sampler("step_0")
            # The starting state too: what a comparison with the trained weights, or a restart
            # from scratch with the same initialisation, loads (a few hundred KB on a LoRA).
            state_path = await self.tinker.save_state("step_0")
            fingerprint = await self.tinker.fingerprint(self.probe)
            self.use_sampler(await self.tinker.sampling_client(path), path)
            self.checkpoints.record(0, "step_0", path, state_path, fingerprint)
        announce(f"Sampling client updated: {path}")

        trainer_id = await self.runapi.register(
            {
                "wandb_group": c.wandb_group,
                "wandb_project": c.wandb_project,
                "batch_size": c.batch_size,
                "max_token_len": c.max_token_trainer_length,
                "checkpoint_dir": c.checkpoint_dir,
                "save_checkpoint_interval": c.save_checkpoint_interval,
                "starting_step": c.starting_step,
                "num_steps": c.total_steps,
            }
        )
        self.policy.registered = True
        say(f"registered with run-api at {c.rollout_server_url} (trainer {trainer_id}); {c.total_steps} steps of {c.batch_size} completions")
        self.wandb = Wandb.start(c, say)

    async def train_step(self, n: int) -> None:
        c = self.config
        last = n == c.total_steps
        self.phases.enter("wait", n)
        clock = StepClock()
        batch, waited = await self.runapi.next_batch(c.batch_timeout_secs)
        clock.add("wait", waited)
        started = time.monotonic()
        self.phases.enter("other", n)
        if os.environ.get(FAULT_VARIABLE) == str(n):
            # The tests' way to make a step fail for real, with the engine and everything up.
            raise RuntimeError(f"failure injected at step {n} by {FAULT_VARIABLE}")
        samples = self.policy.samples
        provenance = Provenance(samples, self.trained_steps, c.max_steps_off_policy) if samples is not None else None
        prepared = prepare_batch(batch, c.max_token_trainer_length, Shaping.of(c), provenance)
        for group in prepared.groups:
            if group.skip == SKIP_MALFORMED:
                say(f"step {n}: group {group.index} skipped, malformed: {group.problem}")
        stale = prepared.skipped(SKIP_STALE)
        if stale:
            say(
                f"step {n}: {stale} group(s) dropped as stale: sampled more than {c.max_steps_off_policy} "
                f"optimizer step(s) before the weights now (version {self.trained_steps})"
            )

        # Sampler logprobs the batch lacks (atroposlib's ManagedServer sends them; a plain
        # chat env does not) are computed with the current sampling client.
        missing = prepared.sequences_missing_logprobs()
        client = self.policy.client
        if missing:
            self.phases.enter("logprobs", n)
        with clock.part("logprobs"):
            for seq in missing:
                seq.logprobs = await self.tinker.compute_logprobs(client, seq.tokens)
                prepared.groups[seq.group].recomputed = True
        self.phases.enter("rollouts", n)
        with clock.part("rollouts"):
            self.rollouts.write(n, rollout_rows(prepared, self.policy.decode_all))

        sequences = aligned_sequences(prepared)
        metrics: Dict[str, Any] = {"step": n, "_timestamp": time.time(), "train/learning_rate": c.learning_rate}
        reward = prepared.reward_mean()
        if reward is not None:
            metrics[REWARD_MEAN] = reward
        # A verifiers environment's named rewards and metrics (group_overrides.rewards).
        metrics.update(prepared.named_reward_means())
        metrics.update(batch_counts(prepared, len(sequences)))
        metrics.update(prepared.truncation_stats())
        metrics["logprobs/recomputed"] = len(missing)
        metrics.update(off_policy_steps(prepared))
        if c.max_steps_off_policy is not None:
            metrics.update(off_policy_counts(prepared))
        if sequences and self.base_sampler is not None:
            # The base weights' logprobs of each completion: the KL estimate, and with kl_coef
            # its penalty taken from the advantages before they are sent.
            self.phases.enter("logprobs", n)
            with clock.part("logprobs"):
                base = await self.tinker.compute_all_logprobs(
                    self.base_sampler, [s.input_tokens + s.target_tokens[-1:] for s in sequences]
                )
            metrics.update(kl_penalty(sequences, base, c.kl_coef))

        loss = None
        if sequences:
            sampler = [lp for s in sequences for lp in s.sampler_logprobs()]
            metrics.update(summary(sampler))
            # forward_backward and the optimizer step are one call here: both count as the first.
            self.phases.enter("forward_backward", n)
            fb, optim, secs, adapted = await self.tinker.train(sequences, c.learning_rate, self.adapter)
            self.trained_steps += 1
            for part in ("forward_backward", "optim"):
                clock.add(part, secs[part])
            outputs = list(fb.loss_fn_outputs)
            # With the adapter, its forward pass's logprobs (the same weights, before the step).
            per_sequence = adapted.logprobs if adapted else [tensor_list(o.get("logprobs")) for o in outputs]
            trained = training_logprobs(sequences, per_sequence)
            metrics.update(ratio_stats(sequences, per_sequence, self.clip_bounds))
            metrics.update(summary(trained, "_training"))
            if sampler and trained:
                metrics["logprobs/diff"] = metrics["logprobs/mean"] - metrics["logprobs/mean_training"]
            engine_metrics = dict(fb.metrics or {})
            if adapted is not None:
                # The asked loss's, not the importance_sampling surrogate's (losses.py).
                loss = adapted.loss
                metrics.update(adapted.metrics())
            elif "loss:sum" in engine_metrics:
                loss = float(engine_metrics["loss:sum"])
            else:
                # An engine that reports no loss:sum (skyrl-tx 0.3.0's JAX backend): the sum of
                # the per-token losses it returns, which is what loss:sum means.
                loss = float(sum(sum(tensor_list(o.get("elementwise_loss"))) for o in outputs))
                metrics["train/loss_from_outputs"] = 1
            metrics["train/loss"] = loss
            for key, value in engine_metrics.items():
                metrics[f"engine/{key}"] = value
            for key, value in dict(getattr(optim, "metrics", None) or {}).items():
                metrics[f"engine/optim/{key}"] = value
            metrics.update(advantage_stats(prepared))

        saved = bool(sequences) or last
        if saved:
            await self.save(n, last, clock)
        self.phases.enter("other", n)
        metrics["time/wait_secs"] = waited
        metrics["time/step_secs"] = time.monotonic() - started
        if saved and self.evaluate_command and evaluation.is_due(n, c.total_steps, c.eval_every, self.last_evaluated):
            with clock.part("eval"):
                self.phases.enter("eval", n)
                metrics.update(await self.evaluate(n))
                self.phases.enter("other", n)
            metrics["time/eval_secs"] = clock.secs["eval"]
            self.last_evaluated = n
        tokens = token_counts(prepared, sequences)
        metrics.update(tokens)
        for key in TOKEN_TOTALS:
            self.totals[key] += tokens[key[: -len("_total")]]
        metrics.update(self.totals)
        timing = clock.metrics(tokens)
        metrics.update(timing)
        cost = step_cost(c, tokens, timing["time/total_secs"]) if self.priced else None
        self.spend.add(cost, sum(tokens.values()), timing["time/total_secs"])
        if cost is not None:
            metrics[COST_STEP] = cost
            metrics[COST_TOTAL] = self.spend.cost_total
            metrics[COST_ESTIMATE] = self.spend.estimate_at_completion(c.total_steps - n)
        metrics["_timestamp"] = time.time()  # when the step ended (the key stays second)
        self.metrics.append(metrics)
        if self.wandb is not None:
            self.wandb.log(metrics, step=n)
        shown = f"{loss:.4f}" if loss is not None and math.isfinite(loss) else ("skipped" if loss is None else str(loss))
        say(
            f"step {n}/{c.total_steps}: reward/mean={metrics.get(REWARD_MEAN, float('nan')):.4f} "
            f"loss={shown} groups={metrics['batch/groups']} skipped={metrics['batch/skipped_groups']} "
            f"datums={len(sequences)} wait={waited:.1f}s step={metrics['time/step_secs']:.1f}s "
            f"bottleneck={metrics['time/bottleneck']}"
        )

    async def save(self, n: int, last: bool, clock: StepClock) -> None:
        c = self.config
        name = "final" if last else f"step_{n}"
        self.phases.enter("save", n)
        with clock.part("save"):
            sampler_path = await self.tinker.save_for_sampler(name)
            state_path = fingerprint = None
            if last or (c.save_every > 0 and n % c.save_every == 0):
                state_path = await self.tinker.save_state(name)
                fingerprint = await self.tinker.fingerprint(self.probe)
            # Recorded as soon as saved: a failure to sample from it must not hide that it exists.
            self.checkpoints.record(n, name, sampler_path, state_path, fingerprint)
            if state_path:
                self.state_saved_at = n
        self.phases.enter("sampler_update", n)
        with clock.part("sampler_update"):
            self.use_sampler(await self.tinker.sampling_client(sampler_path), sampler_path)
        announce(f"Sampling client updated: {sampler_path}")
        if state_path:
            say(f"training state (weights + optimizer) saved: {state_path}")

    def use_sampler(self, client, path: str) -> None:
        """Samples from `client` from now on; they carry the weights' version (no await
        between the two, so no request sees one without the other)."""
        self.policy.swap(client, path)
        self.policy.weights_version = self.trained_steps

    async def check_caps(self, n: int) -> None:
        """Before step `n`: when this run's spend and the next step as its last steps predict
        it would pass a cap, saves the state of step n-1 (unless it is saved), records the
        `capped` row and raises Capped."""
        c = self.config
        hours = (time.monotonic() - self.started_at) / 3600.0
        cap = cap_passed(c, self.spend, hours)
        if cap is None:
            return
        last = n - 1
        self.phase, self.step = "capped", last
        if self.state_saved_at != last:
            name = f"step_{last}"
            state_path = await self.tinker.save_state(name)
            fingerprint = await self.tinker.fingerprint(self.probe)
            self.checkpoints.record(last, name, self.policy.sampler_path, state_path, fingerprint)
            self.state_saved_at = last
            say(f"training state (weights + optimizer) saved: {state_path}")
        self.metrics.append({"event": "capped", "step": last, **cap, "currency": c.currency})
        run_id = os.path.basename(os.path.normpath(self.run_dir))
        message = (
            f"before step {n}/{c.total_steps}, {describe_cap(cap, c.currency)}; the training state "
            f"after step {last} is saved: rl_resume_training {json.dumps({'run_id': run_id})} continues it "
            "(with a higher cap or none)"
        )
        say(f"capped {message}")
        raise Capped(message)

    async def check_loaded(self, state_path: str) -> None:
        """Fails unless the weights now are the ones saved at `state_path`: an engine can answer
        a load of a state whose files are gone as if it loaded it, and training would go on
        from fresh weights under the parent's name."""
        expected = self.checkpoints.fingerprint_of(state_path)
        if expected is None:
            say(f"note: {state_path} has no recorded fingerprint (saved by an older rl): its load is not verified")
            return
        found = await self.tinker.fingerprint(self.probe)
        if not fingerprints_match(expected, found):
            raise StateNotLoaded(
                f"the training state {state_path} did not load: the weights' log-probability of a "
                f"fixed sequence is {sum(found):.6g}, the saved state's was {sum(expected):.6g} "
                "(its files at the engine are missing or damaged); start from an earlier saved "
                "state with rl_fork_training (rl_list_checkpoints shows them; a resume always "
                "takes the last)"
            )
        # Said with the figure, so that a reader (and the fork test) sees how close the weights it
        # starts from are to the parent's at that step, not only that they passed.
        moved = max_difference(expected, found)
        say(
            f"verified: the loaded weights are those saved at {state_path}: the log-probabilities "
            f"of the {len(found)} probe tokens differ from the saved state's by at most {moved:.3g} nats"
        )

    async def evaluate(self, n: int) -> Dict[str, Any]:
        """The held-out evaluation of the checkpoint just saved, which the server now serves
        (training waits: the weights stay those of step n)."""
        c = self.config
        # rl cuts each model at eval_timeout_secs; the contract's margin covers the test's
        # start and reading too (rl adds the same to the run's completion grace).
        bound = c.eval_timeout_secs + EVALUATE_MARGIN_SECS
        return await evaluation.evaluate(
            self.evaluate_command, n, self.evaluation_url, self.policy.model_name, bound, say
        )

    async def finish(self) -> None:
        path = self.policy.sampler_path
        self.metrics.append({"event": "final_weights", "path": path})
        if self.wandb is not None:
            self.wandb.finish(0)
            self.wandb = None
        announce(f"Final weights are available here: {path}")

    async def linger(self) -> None:
        """Keep serving while the env may still need completions.

        atroposlib 0.4.0's `serve` stops only once current_step + queued batches >
        total_steps (checked against run-api), so right after the last step it may still be
        sampling one more batch; without the trainer it would retry forever."""
        c = self.config
        if c.linger_secs <= 0:
            return
        deadline = time.monotonic() + c.linger_secs
        while time.monotonic() < deadline:
            status = await self.runapi.status()
            if status is None:
                return
            try:
                queued = int(status.get("queue_size", 0)) * c.group_size // max(1, c.batch_size)
                if int(status.get("current_step", 0)) + queued > c.total_steps:
                    return
            except (TypeError, ValueError):
                return
            await asyncio.sleep(0.2)

    async def close(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self.server_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.server_task), 3)
            except (asyncio.TimeoutError, asyncio.CancelledError, Exception):
                self.server_task.cancel()
        try:
            await asyncio.wait_for(self.runapi.close(), 2)
        except Exception:
            pass
        self.metrics.close()
        self.checkpoints.close()

    def where(self) -> str:
        if self.phase == "setup":
            return "setup failed"
        if self.phase == "step":
            return f"step {self.step} failed"
        return f"{self.phase} failed"

    def fail_wandb(self, code: int) -> None:
        if self.wandb is not None:
            self.wandb.finish(code)
            self.wandb = None
