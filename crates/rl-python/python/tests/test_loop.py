"""One training step at a time, with fakes in place of run-api and the Tinker SDK."""

import asyncio
import contextlib
import io
import json
import os
import sys
import tempfile
import time
import unittest
from unittest import mock
from types import SimpleNamespace

from rl_trainer.config import parse_config
from rl_trainer.engine import to_datum
from rl_trainer.loop import PROBE_TEXT, STEP_PARTS, Capped, PhaseFile, StateNotLoaded, Trainer, fingerprints_match, max_difference, probe_tokens

from tests.test_server import FakeSamplingClient, FakeTokenizer

P = -100


def group(scores, logprobs=True):
    prompt = [5, 6]
    completions = [[10 + i, 20 + i, 30] for i in range(len(scores))]
    g = {
        "tokens": [prompt + c for c in completions],
        "masks": [[P, P] + c for c in completions],
        "scores": list(scores),
    }
    if logprobs:
        g["inference_logprobs"] = [[1.0, 1.0, -1.0, -2.0, -3.0] for _ in completions]
    return g


class FakeRunApi:
    #: Seconds each batch takes to come, really waited (a step's parts add up to its time).
    wait = 0.01

    def __init__(self, batches):
        self.batches = list(batches)

    async def next_batch(self, timeout_secs=0.0):
        began = time.monotonic()
        await asyncio.sleep(self.wait)
        return self.batches.pop(0), time.monotonic() - began

    async def status(self):
        return {"current_step": 99, "queue_size": 0}

    async def close(self):
        pass

    async def register(self, registration):
        self.registration = registration
        return "trainer-1"


class FakeTinker:
    retries = 0
    timeout = 5.0

    def __init__(self, loss_sum=True):
        self.loss_sum = loss_sum
        self.trained = []
        self.saved = []
        self.states = []
        self.logprob_calls = 0

    def say(self, message):
        pass

    #: Seconds the engine's calls take, really waited, as the SDK's futures would be.
    fb_secs, optim_secs, save_secs, sampler_secs = 0.02, 0.005, 0.01, 0.015

    async def save_for_sampler(self, name):
        await asyncio.sleep(self.save_secs)
        self.saved.append(name)
        return f"tinker://m/{name}"

    async def check_reachable(self):
        pass

    async def connect(self):
        pass

    model_id = "m"

    #: The fingerprint each saved state's weights have; any other load leaves fresh weights
    #: (an engine that answers a load of a state it does not have as if it loaded it).
    state_fingerprints = {}

    async def load_state(self, path):
        self.loaded = path
        self.weights = self.state_fingerprints.get(path, -100.0)

    async def fingerprint(self, tokens):
        self.fingerprinted = list(tokens)
        return [getattr(self, "weights", -100.0) - len(self.trained), -1.0]

    async def save_state(self, name):
        self.states.append(name)
        return f"tinker://m/weights/{name}"

    async def sampling_client(self, path):
        await asyncio.sleep(self.sampler_secs)
        return FakeSamplingClient()

    async def compute_logprobs(self, client, tokens):
        self.logprob_calls += 1
        return [0.0] + [-0.5] * (len(tokens) - 1)

    async def train(self, sequences, lr, adapter=None):
        datums = [to_datum(s) for s in sequences]
        began = time.monotonic()
        await asyncio.sleep(self.fb_secs)
        fb_done = time.monotonic()
        await asyncio.sleep(self.optim_secs)
        secs = {"forward_backward": fb_done - began, "optim": time.monotonic() - fb_done}
        self.trained.append((len(datums), lr))
        outputs = [
            {"logprobs": {"data": [-0.1] * len(d.model_input.to_ints())}, "elementwise_loss": {"data": [0.25] * len(d.model_input.to_ints())}}
            for d in datums
        ]
        metrics = {"loss:sum": 1.5, "tokens:sum": 12.0} if self.loss_sum else {}
        return SimpleNamespace(loss_fn_outputs=outputs, metrics=metrics), SimpleNamespace(metrics=None), secs, None


class LoopTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.run_dir = os.path.join(self.tmp.name, "run")

    def tearDown(self):
        self.tmp.cleanup()

    def trainer(self, batches, steps=3, save_every=2, keep=2, loss_sum=True, resume=None, eval_every=0, costs=None, env=None):
        tinker = {"base_url": "http://127.0.0.1:2", "save_every": save_every, "keep_rollouts": keep, "learning_rate": 0.01, "eval_every": eval_every}
        tinker.update(costs or {})
        if resume:
            tinker.update({"resume_state": resume[0], "starting_step": resume[1]})
        config = parse_config(
            {
                "env": {"total_steps": steps, "group_size": 2, "batch_size": 4, "tokenizer_name": "/t", "use_wandb": False, **(env or {})},
                "openai": [{"base_url": "http://127.0.0.1:1/v1"}],
                "tinker": tinker,
            }
        )
        trainer = Trainer(config, self.run_dir, "tml-test")
        trainer.runapi = FakeRunApi(batches)
        trainer.tinker = FakeTinker(loss_sum)
        trainer.policy.tinker = trainer.tinker
        trainer.policy.load(FakeTokenizer())
        trainer.probe = probe_tokens(FakeTokenizer())
        trainer.policy.swap(FakeSamplingClient(), "tinker://m/step_0")
        trainer.policy.registered = True
        return trainer

    def rows(self, name):
        with open(os.path.join(self.run_dir, name)) as f:
            return [json.loads(line) for line in f]

    def run_steps(self, trainer, steps):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            for n in range(1, steps + 1):
                asyncio.run(trainer.train_step(n))
            asyncio.run(trainer.finish())
        trainer.metrics.close()
        trainer.checkpoints.close()
        return out.getvalue()

    def test_steps_train_save_and_record(self):
        batches = [[group([0.0, 1.0]), group([1.0, 1.0])], [group([1.0, 1.0]), group([0.5, 0.5])], [group([0.0, 1.0], logprobs=False)]]
        trainer = self.trainer(batches)
        out = self.run_steps(trainer, 3)
        fake = trainer.tinker

        metrics = self.rows("metrics.jsonl")
        first, skipped, last, final = metrics
        self.assertEqual(first["step"], 1)
        self.assertEqual(first["train/loss"], 1.5)  # the engine's loss:sum
        self.assertEqual(first["engine/tokens:sum"], 12.0)
        self.assertEqual((first["batch/groups"], first["batch/skipped_groups"], first["batch/datums"]), (2, 1, 2))
        self.assertAlmostEqual(first["reward/mean"], 0.75)
        self.assertEqual(first["logprobs/mean"], -2.0)
        self.assertAlmostEqual(first["logprobs/mean_training"], -0.1, places=6)
        self.assertIn("advantages/std", first)
        self.assertEqual(first["train/learning_rate"], 0.01)
        self.assertGreaterEqual(first["time/wait_secs"], FakeRunApi.wait)

        # step 2: every group skipped -> no training, no checkpoint, no loss
        self.assertNotIn("train/loss", skipped)
        self.assertEqual((skipped["batch/groups"], skipped["batch/skipped_groups"], skipped["batch/datums"]), (2, 2, 0))
        # step 3 (last): logprobs computed, trained, saved as final with its state
        self.assertEqual(last["logprobs/recomputed"], 2)
        self.assertEqual(fake.logprob_calls, 2)
        self.assertEqual(final, {"event": "final_weights", "path": "tinker://m/final"})

        self.assertEqual(fake.trained, [(2, 0.01), (2, 0.01)])
        self.assertEqual(fake.saved, ["step_1", "final"])
        self.assertEqual(fake.states, ["final"])  # step 2 (save_every) made no checkpoint at all
        cps = self.rows("checkpoints.jsonl")
        self.assertEqual([(c["step"], c["name"], c["state_path"]) for c in cps], [(1, "step_1", None), (3, "final", "tinker://m/weights/final")])
        self.assertIn("Sampling client updated: tinker://m/step_1\n", out)
        self.assertIn("Final weights are available here: tinker://m/final\n", out)
        self.assertEqual(trainer.policy.sampler_path, "tinker://m/final")

        rollouts = sorted(os.listdir(os.path.join(self.run_dir, "rollouts")))
        self.assertEqual(rollouts, ["step_000002.jsonl", "step_000003.jsonl"])  # keep_rollouts 2

    def test_a_steps_tokens_are_its_rollouts_and_its_parts_add_up_to_its_time(self):
        batches = [[group([0.0, 1.0]), group([1.0, 1.0])], [group([1.0, 1.0]), group([0.5, 0.5])], [group([0.0, 1.0], logprobs=False)]]
        trainer = self.trainer(batches, keep=3, eval_every=3)

        async def fake_evaluate(command, step, base_url, model, timeout, say):
            await asyncio.sleep(0.03)
            return {"eval/mean_score": 0.5}

        trainer.evaluate_command = ["rl"]
        with mock.patch("rl_trainer.evaluation.evaluate", fake_evaluate):
            self.run_steps(trainer, 3)
        rows = self.rows("metrics.jsonl")[:3]
        totals = {"prompt": 0, "sampled": 0, "trained": 0}
        for n, row in enumerate(rows, 1):
            rollouts = self.rows(os.path.join("rollouts", f"step_{n:06d}.jsonl"))
            for kind, column in (("prompt", "prompt_tokens"), ("sampled", "completion_tokens"), ("trained", "trained_tokens")):
                self.assertEqual(row[f"tokens/{kind}"], sum(r[column] for r in rollouts), (n, kind))
                totals[kind] += row[f"tokens/{kind}"]
                self.assertEqual(row[f"tokens/{kind}_total"], totals[kind], (n, kind))

            parts = {p: row[f"time/{p}_secs"] for p in STEP_PARTS if f"time/{p}_secs" in row}
            self.assertTrue(all(v >= 0 for v in parts.values()), parts)
            self.assertAlmostEqual(sum(parts.values()), row["time/total_secs"], delta=1e-9)
            # The step's time as the older keys measure it, around the same work.
            outside = row["time/wait_secs"] + row["time/step_secs"] + row.get("time/eval_secs", 0.0)
            self.assertAlmostEqual(outside, row["time/total_secs"], delta=0.01)
            self.assertEqual(row["time/bottleneck"], max(parts, key=parts.get))
            self.assertAlmostEqual(row["time/bottleneck_share"], parts[row["time/bottleneck"]] / row["time/total_secs"])
            for kind in ("trained", "sampled"):
                self.assertAlmostEqual(row[f"throughput/{kind}_tokens_per_sec"], row[f"tokens/{kind}"] / row["time/total_secs"])
        first, skipped, last = rows
        fake = trainer.tinker
        self.assertEqual((first["tokens/prompt"], first["tokens/sampled"], first["tokens/trained"]), (8, 12, 8))
        # Every group skipped: sampled and counted, nothing trained, saved or swapped.
        self.assertEqual((skipped["tokens/sampled"], skipped["tokens/trained"]), (12, 0))
        for part in ("forward_backward", "optim", "save", "sampler_update"):
            self.assertEqual(skipped[f"time/{part}_secs"], 0.0)
        self.assertNotIn("time/eval_secs", first)  # only a step that evaluated has it
        for row in (first, last):
            self.assertGreaterEqual(row["time/forward_backward_secs"], fake.fb_secs)
            self.assertGreaterEqual(row["time/optim_secs"], fake.optim_secs)
            self.assertGreaterEqual(row["time/save_secs"], fake.save_secs)
            self.assertGreaterEqual(row["time/sampler_update_secs"], fake.sampler_secs)
        self.assertGreaterEqual(last["time/eval_secs"], 0.03)
        # Which part is the largest is the machine's to say (a busy one stretches `other`): that
        # eval is a part, counted in the total, is what this step shows.
        self.assertIn("eval", {p for p in STEP_PARTS if f"time/{p}_secs" in last})
        self.assertLess(last["time/save_secs"], 2 * fake.save_secs + 0.05)  # the sampler's update is not in it

    def test_state_every_save_every_steps_and_skipped_last_step(self):
        batches = [[group([0.0, 1.0])], [group([0.0, 1.0])], [group([2.0, 2.0])]]
        trainer = self.trainer(batches, steps=3, save_every=2, loss_sum=False)
        self.run_steps(trainer, 3)
        fake = trainer.tinker
        self.assertEqual(fake.saved, ["step_1", "step_2", "final"])
        self.assertEqual(fake.states, ["step_2", "final"])
        self.assertEqual(len(fake.trained), 2)  # the last step had nothing to learn, but saved
        metrics = self.rows("metrics.jsonl")
        # no loss:sum from the engine: the sum of the per-token losses it returned
        self.assertEqual(metrics[0]["train/loss"], 0.25 * 4 * 2)
        self.assertEqual(metrics[0]["train/loss_from_outputs"], 1)
        self.assertNotIn("train/loss", metrics[2])

    def test_every_eval_every_steps_the_saved_checkpoint_is_evaluated_into_its_row(self):
        batches = [[group([0.0, 1.0])], [group([1.0, 1.0])], [group([0.0, 1.0])], [group([1.0, 0.0])]]
        trainer = self.trainer(batches, steps=4, eval_every=2)
        asked = []

        async def fake_evaluate(command, step, base_url, model, timeout, say):
            asked.append((step, base_url, model, trainer.policy.sampler_path))
            return {"eval/mean_score": step / 10}

        trainer.evaluate_command = ["rl", "runs", "evaluate", "0123abcd"]
        with mock.patch("rl_trainer.evaluation.evaluate", fake_evaluate):
            self.run_steps(trainer, 4)
        # Step 2 saved nothing (every group alike): the next saved step is evaluated instead,
        # and the last always is; each against the checkpoint it just saved, on loopback.
        self.assertEqual(
            asked,
            [(3, "http://127.0.0.1:1/v1", trainer.config.model_name, "tinker://m/step_3"), (4, "http://127.0.0.1:1/v1", trainer.config.model_name, "tinker://m/final")],
        )
        rows = self.rows("metrics.jsonl")
        self.assertEqual([row.get("eval/mean_score") for row in rows], [None, None, 0.3, 0.4, None])
        self.assertIn("time/eval_secs", rows[2])

    def test_a_new_run_evaluates_its_untrained_weights_first(self):
        trainer = self.trainer([[group([0.0, 1.0])], [group([1.0, 0.0])]], steps=2, eval_every=5)
        asked = []

        async def fake_evaluate(command, step, base_url, model, timeout, say):
            asked.append((step, trainer.policy.sampler_path))
            return {"eval/mean_score": 0.1 * (step + 1)}

        trainer.evaluate_command = ["rl"]
        trainer.linger = lambda: asyncio.sleep(0)
        fake_transformers = SimpleNamespace(AutoTokenizer=SimpleNamespace(from_pretrained=lambda name: FakeTokenizer()))
        with mock.patch("rl_trainer.evaluation.evaluate", fake_evaluate), mock.patch.dict(sys.modules, {"transformers": fake_transformers}), contextlib.redirect_stdout(io.StringIO()):
            asyncio.run(trainer.run())
        trainer.metrics.close()
        trainer.checkpoints.close()
        self.assertEqual(asked, [(0, "tinker://m/step_0"), (2, "tinker://m/final")])
        rows = self.rows("metrics.jsonl")
        self.assertEqual(rows[0], {"step": 0, "eval/mean_score": 0.1})
        self.assertEqual(rows[2]["eval/mean_score"], 0.30000000000000004)

    def test_without_rls_command_nothing_is_evaluated(self):
        trainer = self.trainer([[group([0.0, 1.0])]], steps=1, eval_every=1)
        trainer.evaluate_command = None
        self.run_steps(trainer, 1)
        self.assertNotIn("eval/mean_score", self.rows("metrics.jsonl")[0])

    def resumed(self, parent_rows, state_fingerprints, parent_metrics=(), costs=None):
        """A run resumed from tinker://p/weights/step_3, its checkpoints.jsonl and
        metrics.jsonl holding the parent's `parent_rows` and `parent_metrics` (as rl copies
        them), run to its end: (trainer, output)."""
        os.makedirs(self.run_dir, exist_ok=True)
        for name, rows in (("checkpoints.jsonl", parent_rows), ("metrics.jsonl", parent_metrics)):
            with open(os.path.join(self.run_dir, name), "w") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")
        batches = [[group([0.0, 1.0])], [group([1.0, 0.0])]]
        trainer = self.trainer(batches, steps=5, save_every=2, resume=("tinker://p/weights/step_3", 3), costs=costs)
        trainer.tinker.state_fingerprints = state_fingerprints
        fake_transformers = SimpleNamespace(AutoTokenizer=SimpleNamespace(from_pretrained=lambda name: FakeTokenizer()))
        trainer.linger = lambda: asyncio.sleep(0)
        out = io.StringIO()
        try:
            with mock.patch.dict(sys.modules, {"transformers": fake_transformers}), contextlib.redirect_stdout(out):
                asyncio.run(trainer.run())
        finally:
            trainer.metrics.close()
            trainer.checkpoints.close()
        return trainer, out.getvalue()

    PARENT = {"step": 3, "name": "step_3", "sampler_path": "tinker://p/step_3", "state_path": "tinker://p/weights/step_3", "fingerprint": [-42.5, -1.0]}

    def test_a_resumed_run_loads_its_state_and_trains_only_the_steps_left(self):
        trainer, out = self.resumed([self.PARENT], {"tinker://p/weights/step_3": -42.5})
        fake = trainer.tinker
        self.assertEqual(fake.loaded, "tinker://p/weights/step_3")
        self.assertEqual(trainer.runapi.registration["starting_step"], 3)
        self.assertEqual(fake.saved, ["resumed_step_3", "step_4", "final"])
        self.assertEqual(fake.states, ["step_4", "final"])  # no step_0 state of its own
        self.assertEqual([row.get("step") for row in self.rows("metrics.jsonl")], [4, 5, None])
        rows = self.rows("checkpoints.jsonl")
        self.assertEqual([c["step"] for c in rows], [3, 4, 5])
        # Every state saved carries its weights' fingerprint, taken on the same fixed tokens.
        self.assertEqual([c.get("fingerprint") for c in rows[1:]], [[-42.5 - 1, -1.0], [-42.5 - 2, -1.0]])
        self.assertEqual(fake.fingerprinted, FakeTokenizer().encode(PROBE_TEXT)[:32])
        self.assertIn("verified: the loaded weights are those saved at tinker://p/weights/step_3", out)
        self.assertIn("differ from the saved state's by at most 0 nats", out)
        self.assertIn("continuing after step 3", out)

    def test_a_resumed_runs_token_totals_continue_its_parents(self):
        totals = {"tokens/prompt_total": 100, "tokens/sampled_total": 300, "tokens/trained_total": 250}
        parent = [{"step": 2, "tokens/prompt_total": 60}, {"step": 3, "tokens/trained": 80, **totals}]
        trainer, out = self.resumed([self.PARENT], {"tinker://p/weights/step_3": -42.5}, parent)
        rows = [row for row in self.rows("metrics.jsonl") if row.get("step", 0) > 3]
        self.assertEqual([row["step"] for row in rows], [4, 5])
        running = dict(totals)
        for row in rows:
            for key in totals:
                running[key] += row[key[: -len("_total")]]
                self.assertEqual(row[key], running[key], (row["step"], key))
        self.assertEqual(rows[0]["tokens/trained_total"], 250 + 8)
        self.assertNotIn("token totals", out)

    def test_a_resumed_run_without_its_parents_totals_counts_from_zero_and_says_so(self):
        trainer, out = self.resumed([self.PARENT], {"tinker://p/weights/step_3": -42.5}, [{"step": 3, "train/loss": 1.0}])
        first = [row for row in self.rows("metrics.jsonl") if row.get("step") == 4][0]
        self.assertEqual(first["tokens/sampled_total"], first["tokens/sampled"])
        self.assertIn("no metrics row up to step 3 holds token totals: this run's totals start from 0", out)

    # ------------------------------------------------------------------ costs and caps

    PRICES = {"price_prompt_per_million": 1.0, "price_sampled_per_million": 2.0, "price_trained_per_million": 4.0}

    def test_a_priced_step_logs_its_cost_the_total_and_the_estimate(self):
        batches = [[group([0.0, 1.0])], [group([1.0, 0.0])], [group([0.0, 1.0])]]
        trainer = self.trainer(batches, steps=3, costs=self.PRICES)
        self.run_steps(trainer, 3)
        rows = [row for row in self.rows("metrics.jsonl") if "step" in row]
        total = 0.0
        for row in rows:
            expected = (row["tokens/prompt"] * 1.0 + row["tokens/sampled"] * 2.0 + row["tokens/trained"] * 4.0) / 1e6
            self.assertAlmostEqual(row["cost/step"], expected)
            total += expected
            self.assertAlmostEqual(row["cost/total"], total)
        # Every step alike: the estimate at completion is the whole run's cost from the first.
        self.assertAlmostEqual(rows[0]["cost/estimate_at_completion"], 3 * rows[0]["cost/step"])
        self.assertAlmostEqual(rows[-1]["cost/estimate_at_completion"], rows[-1]["cost/total"])

    def test_the_local_engines_machine_is_paid_by_the_steps_time(self):
        trainer = self.trainer([[group([0.0, 1.0])]], steps=1, costs={"price_machine_per_hour": 3600.0})
        self.run_steps(trainer, 1)
        row = self.rows("metrics.jsonl")[0]
        self.assertAlmostEqual(row["cost/step"], row["time/total_secs"])  # 1 a second

    def test_without_a_price_no_cost_is_logged(self):
        trainer = self.trainer([[group([0.0, 1.0])]], steps=1, costs={"max_tokens": 10_000})
        self.run_steps(trainer, 1)
        row = self.rows("metrics.jsonl")[0]
        self.assertFalse([key for key in row if key.startswith("cost/")], row)
        self.assertIn("tokens/prompt_total", row)

    def run_whole(self, trainer):
        """setup, the steps and the end, as __main__ runs them; the Capped raised, if any."""
        fake_transformers = SimpleNamespace(AutoTokenizer=SimpleNamespace(from_pretrained=lambda name: FakeTokenizer()))
        trainer.linger = lambda: asyncio.sleep(0)
        out = io.StringIO()
        raised = None
        try:
            with mock.patch.dict(sys.modules, {"transformers": fake_transformers}), contextlib.redirect_stdout(out):
                asyncio.run(trainer.run())
        except Capped as e:
            raised = e
        finally:
            trainer.metrics.close()
            trainer.checkpoints.close()
        return raised, out.getvalue()

    def test_a_cap_the_next_step_would_pass_saves_the_state_and_ends_the_run_capped(self):
        batches = [[group([0.0, 1.0])] for _ in range(5)]
        # Each step costs the same: cap between two and three steps' cost.
        probe = self.trainer(list(batches), steps=1, costs=self.PRICES)
        self.run_steps(probe, 1)
        one = self.rows("metrics.jsonl")[0]["cost/step"]
        os.remove(os.path.join(self.run_dir, "metrics.jsonl"))
        os.remove(os.path.join(self.run_dir, "checkpoints.jsonl"))
        # One group of two 5-token sequences a step: a first step's bound (2 sequences of 5
        # tokens at the prices) is 1.25 steps' cost, under the cap.
        tight = {"batch_size": 2, "max_token_length": 5}
        trainer = self.trainer(batches, steps=5, save_every=0, costs={**self.PRICES, "max_cost": 2.5 * one, "currency": "EUR"}, env=tight)
        raised, out = self.run_whole(trainer)
        self.assertIsNotNone(raised, out)
        self.assertIn("before step 3/5, max_cost", str(raised))
        self.assertIn("EUR", str(raised))
        self.assertIn('rl_resume_training {"run_id": "run"} continues it', str(raised))
        rows = self.rows("metrics.jsonl")
        self.assertEqual([row.get("step") for row in rows], [1, 2, 2])
        capped = rows[-1]
        self.assertEqual(capped["event"], "capped")
        self.assertEqual((capped["cap"], capped["currency"]), ("max_cost", "EUR"))
        self.assertAlmostEqual(capped["limit"], 2.5 * one)
        self.assertAlmostEqual(capped["spent"], 2 * one)
        self.assertAlmostEqual(capped["next_step"], one)
        # save_every 0: step 2 saved no state of its own, so the cap saved it.
        self.assertEqual(trainer.tinker.states, ["step_0", "step_2"])
        checkpoints = self.rows("checkpoints.jsonl")
        self.assertEqual(checkpoints[-1]["step"], 2)
        self.assertEqual(checkpoints[-1]["state_path"], "tinker://m/weights/step_2")
        self.assertIsNotNone(checkpoints[-1].get("fingerprint"))

    def test_a_state_already_saved_is_not_saved_again_and_tokens_and_hours_cap_too(self):
        batches = [[group([0.0, 1.0])] for _ in range(4)]
        trainer = self.trainer(batches, steps=4, save_every=1, costs={"max_tokens": 1})
        raised, _ = self.run_whole(trainer)
        # Capped before the first step, from its bound: no step trained, step 0's state (saved
        # in setup) not saved again.
        self.assertIn("max_tokens 1", str(raised))
        self.assertIn("before step 1/4", str(raised))
        self.assertIn("would use up to", str(raised))
        self.assertEqual(trainer.tinker.states, ["step_0"])
        rows = self.rows("metrics.jsonl")
        self.assertEqual([row.get("event") for row in rows], ["capped"])
        self.assertEqual((rows[-1]["cap"], rows[-1]["predicted"]), ("max_tokens", "token_bound"))
        os.remove(os.path.join(self.run_dir, "metrics.jsonl"))
        hours = self.trainer([[group([0.0, 1.0])] for _ in range(4)], steps=4, costs={"max_hours": 1e-9})
        raised, _ = self.run_whole(hours)
        self.assertIn("max_hours", str(raised))

    def test_a_resumed_run_whose_parents_spent_its_cost_cap_trains_no_step(self):
        parent = [{"step": 3, "cost/total": 5.0, "cost/step": 1.0, "time/total_secs": 2.0}]
        costs = {**self.PRICES, "max_cost": 5.5}  # the parent's 5.0 counts, and a step of 1.0 is predicted
        with self.assertRaises(Capped) as capped:
            self.resumed([self.PARENT], {"tinker://p/weights/step_3": -42.5}, parent, costs)
        self.assertIn("before step 4/5, max_cost 5.5 USD: this run and the runs it continues spent 5 USD", str(capped.exception))
        self.assertIn("its next step would take about 1 more", str(capped.exception))
        self.assertEqual([row.get("step") for row in self.rows("metrics.jsonl")], [3, 3])

    def test_a_resumed_runs_cost_total_continues_its_parents(self):
        parent = [{"step": 3, "cost/total": 5.0, "tokens/prompt_total": 1}]
        costs = {**self.PRICES, "max_cost": 100.0}
        trainer, out = self.resumed([self.PARENT], {"tinker://p/weights/step_3": -42.5}, parent, costs)
        rows = [row for row in self.rows("metrics.jsonl") if row.get("step", 0) > 3 and "event" not in row]
        self.assertEqual([row["step"] for row in rows], [4, 5])
        self.assertAlmostEqual(rows[0]["cost/total"], 5.0 + rows[0]["cost/step"])
        self.assertAlmostEqual(rows[1]["cost/total"], 5.0 + rows[0]["cost/step"] + rows[1]["cost/step"])
        self.assertNotIn("cost/total starts from 0", out)

    def test_fingerprints_match_token_by_token(self):
        saved = [-2.5, -0.75, -7.125]
        self.assertTrue(fingerprints_match(saved, [-2.5, -0.7504, -7.125]))
        self.assertFalse(fingerprints_match(saved, [-2.5, -0.76, -7.125]))
        # A move on one token is not hidden by an opposite move on another.
        self.assertFalse(fingerprints_match(saved, [-2.49, -0.76, -7.125]))
        self.assertFalse(fingerprints_match(saved, saved[:2]))
        self.assertFalse(fingerprints_match(saved, [-2.5, float("nan"), -7.125]))
        self.assertAlmostEqual(max_difference(saved, [-2.5, -0.7504, -7.125]), 0.0004)
        self.assertEqual(max_difference([], []), 0.0)

    def test_a_state_that_did_not_load_as_saved_fails_the_resume_naming_it(self):
        with self.assertRaises(StateNotLoaded) as refused:
            self.resumed([self.PARENT], {})
        self.assertIn("tinker://p/weights/step_3 did not load", str(refused.exception))
        self.assertIn("-43.5", str(refused.exception))  # the saved state's, summed

    def test_the_off_policy_bound_drops_a_group_its_sampler_drew_before_the_last_step(self):
        """Weights version = optimizer steps: step 1 trains from version 0, step 2 from 1. The
        memory says completions [10, 20, 30] were last drawn by version 0, [11, 21, 30] by 1."""
        from rl_trainer.samples import SampleMemory

        def of(*completions, scores=(0.0, 1.0)):
            return {
                "tokens": [[5, 6] + c for c in completions],
                "masks": [[P, P] + c for c in completions],
                "scores": list(scores),
                "inference_logprobs": [[1.0, 1.0, -1.0, -2.0, -3.0] for _ in completions],
            }

        old, new, unknown = [10, 20, 30], [11, 21, 30], [12, 22, 30]
        batches = [[of(old, new)], [of(old, new), of(new, unknown)]]
        trainer = self.trainer(batches, steps=2, costs={"max_steps_off_policy": 0})
        memory = trainer.policy.samples = SampleMemory()
        memory.record(old, 0, False)
        memory.record(new, 1, False)
        out = self.run_steps(trainer, 2)
        first, second = self.rows("metrics.jsonl")[:2]
        self.assertEqual(trainer.trained_steps, 2)
        self.assertEqual(trainer.policy.weights_version, 2)  # the final weights' sampler
        # Step 1: both drawn at or after version 0: trained.
        self.assertEqual(
            {k: first[k] for k in ("batch/stale_groups", "batch/unknown_age_completions", "batch/max_age_steps", "batch/skipped_groups")},
            {"batch/stale_groups": 0, "batch/unknown_age_completions": 0, "batch/max_age_steps": 0, "batch/skipped_groups": 0},
        )
        # Step 2: `old` is one optimizer step behind (> 0): its group dropped; the other kept,
        # its unknown completion counted.
        self.assertEqual(
            {k: second[k] for k in ("batch/stale_groups", "batch/unknown_age_completions", "batch/max_age_steps", "batch/skipped_groups")},
            {"batch/stale_groups": 1, "batch/unknown_age_completions": 1, "batch/max_age_steps": 0, "batch/skipped_groups": 1},
        )
        self.assertIn("step 2: 1 group(s) dropped as stale", out)
        rollouts = self.rows(os.path.join("rollouts", "step_000002.jsonl"))
        self.assertEqual([r["skip_reason"] for r in rollouts], ["stale", "stale", None, None])

    def test_without_the_bound_no_off_policy_count_is_logged(self):
        trainer = self.trainer([[group([0.0, 1.0])]], steps=1)
        self.run_steps(trainer, 1)
        self.assertFalse(any(k in self.rows("metrics.jsonl")[0] for k in ("batch/stale_groups", "batch/max_age_steps")))

    def test_a_state_saved_without_a_fingerprint_is_loaded_unverified(self):
        parent = dict(self.PARENT)
        del parent["fingerprint"]
        trainer, out = self.resumed([parent], {})
        self.assertIn("has no recorded fingerprint", out)
        self.assertEqual(trainer.tinker.saved[-1], "final")


if __name__ == "__main__":
    unittest.main()


class PhaseFileTests(unittest.TestCase):
    setUp, tearDown = LoopTests.setUp, LoopTests.tearDown
    trainer, rows, run_steps = LoopTests.trainer, LoopTests.rows, LoopTests.run_steps

    def phase_file(self):
        with open(os.path.join(self.run_dir, "trainer-phase.json")) as f:
            return json.load(f)

    def test_each_part_of_a_step_is_written_where_the_run_folder_says_once_per_change(self):
        batches = [[group([0.0, 1.0], logprobs=False)], [group([0.0, 1.0])]]
        trainer = self.trainer(batches, steps=2, save_every=1)
        enter = trainer.phases.enter
        written = []

        def spy(phase, step):
            before = trainer.phases.current
            enter(phase, step)
            if trainer.phases.current != before:
                written.append((phase, step))

        trainer.phases.enter = spy
        waiting = []
        next_batch = trainer.runapi.next_batch

        async def watched(timeout_secs=0.0):
            waiting.append(self.phase_file())  # on disk before the wait begins
            return await next_batch(timeout_secs)

        trainer.runapi.next_batch = watched
        began = time.time()
        self.run_steps(trainer, 2)
        step = ["other", "rollouts", "forward_backward", "save", "sampler_update", "other"]
        self.assertEqual(
            [p for p, n in written if n == 1], ["wait", "other", "logprobs", "rollouts", "forward_backward", "save", "sampler_update", "other"]
        )
        self.assertEqual([p for p, n in written if n == 2], ["wait"] + step)
        self.assertEqual([(w["phase"], w["step"]) for w in waiting], [("wait", 1), ("wait", 2)])
        last = self.phase_file()
        self.assertEqual((last["phase"], last["step"]), ("other", 2))
        self.assertGreaterEqual(last["since"], began)
        self.assertLessEqual(last["since"], time.time())
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "trainer-phase.json.tmp")))

    def test_the_same_phase_is_not_rewritten_and_an_unwritable_folder_fails_nothing(self):
        path = os.path.join(self.tmp.name, "phase.json")
        phases = PhaseFile(path)
        phases.enter("wait", 3)
        first = os.stat(path).st_mtime_ns
        os.utime(path, ns=(1, 1))
        phases.enter("wait", 3)
        self.assertEqual(os.stat(path).st_mtime_ns, 1)
        phases.enter("optim", 3)
        self.assertNotEqual(os.stat(path).st_mtime_ns, 1)
        self.assertGreater(first, 1)
        PhaseFile(os.path.join(self.tmp.name, "gone", "phase.json")).enter("wait", 1)
