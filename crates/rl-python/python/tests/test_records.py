import json
import os
import tempfile
import unittest

from rl_trainer.batch import aligned_sequences, prepare_batch, token_counts
from rl_trainer.engine import to_datum
from types import SimpleNamespace

from rl_trainer.records import (
    Checkpoints,
    JsonLines,
    Lineage,
    Rollouts,
    Spend,
    Wandb,
    cap_passed,
    cost_total,
    describe_cap,
    first_step_bound,
    is_priced,
    rollout_rows,
    step_cost,
    token_totals,
)

P = -100


class RecordsTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def read(self, path):
        with open(path) as f:
            return [json.loads(line) for line in f]

    def test_rollouts_keep_the_newest_files(self):
        rollouts = Rollouts(os.path.join(self.dir, "rollouts"), keep=3)
        for step in range(1, 6):
            rollouts.write(step, [{"step": step}])
        names = sorted(os.listdir(os.path.join(self.dir, "rollouts")))
        self.assertEqual(names, ["step_000003.jsonl", "step_000004.jsonl", "step_000005.jsonl"])
        self.assertEqual(self.read(rollouts.path_for(5)), [{"step": 5}])

    def test_rollouts_order_by_step_not_name(self):
        rollouts = Rollouts(self.dir, keep=2)
        for step in (999999, 1000000, 1000001):
            rollouts.write(step, [])
        self.assertEqual([os.path.basename(p) for p in rollouts.files()], ["step_1000000.jsonl", "step_1000001.jsonl"])

    def test_keep_zero_writes_nothing(self):
        rollouts = Rollouts(os.path.join(self.dir, "rollouts"), keep=0)
        self.assertIsNone(rollouts.write(1, [{"a": 1}]))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "rollouts")))

    def test_jsonl_appends_whole_lines(self):
        path = os.path.join(self.dir, "sub", "metrics.jsonl")
        lines = JsonLines(path)
        lines.append({"step": 1, "x": float("nan")})
        lines.append({"event": "final_weights", "path": "tinker://m/final"})
        lines.close()
        with open(path) as f:
            text = f.read()
        self.assertEqual(text.count("\n"), 2)
        self.assertIn("NaN", text)  # Python's JSON; rl's reader takes it

    def test_checkpoint_rows(self):
        path = os.path.join(self.dir, "checkpoints.jsonl")
        cps = Checkpoints(path)
        cps.record(0, "step_0", "tinker://m/step_0", None)
        cps.record(5, "final", "tinker://m/final", "tinker://m/weights/final")
        cps.close()
        rows = self.read(path)
        self.assertEqual([r["name"] for r in rows], ["step_0", "final"])
        self.assertIsNone(rows[0]["state_path"])
        self.assertEqual(set(rows[1]), {"step", "name", "sampler_path", "state_path", "time"})
        self.assertTrue(rows[1]["time"].endswith("Z"))

    def test_rollout_rows(self):
        g1 = {"tokens": [[1, 2, 3, 4], [1, 2, 5]], "masks": [[P, P, 3, 4], [P, P, 5]], "scores": [0.0, 1.0]}
        g2 = {"tokens": [[1, 9]], "masks": [[P, 9]], "scores": [1.0]}
        prepared = prepare_batch([g1, g2, {"tokens": [], "masks": [], "scores": []}], 64)
        rows = rollout_rows(prepared, lambda toks: " ".join(map(str, toks)))
        self.assertEqual(rows[0]["prompt"], "1 2")
        self.assertEqual(rows[0]["completion"], "3 4")
        self.assertEqual(rows[1]["advantage"], 0.5)
        self.assertFalse(rows[1]["skipped"])
        self.assertTrue(rows[2]["skipped"])  # a lone completion: advantage 0
        self.assertEqual(rows[3]["skip_reason"], "empty")
        self.assertEqual(len(rows), 4)

    def test_a_steps_token_counts_are_the_sums_of_its_rollout_rows(self):
        batch = [
            # trained: prompts of 2, completions of 2 and 1 tokens
            {"tokens": [[1, 2, 3, 4], [1, 2, 5]], "masks": [[P, P, 3, 4], [P, P, 5]], "scores": [0.0, 1.0]},
            # skipped (every score alike): sampled and paid for, never trained
            {"tokens": [[1, 2, 6], [1, 2, 7, 8]], "masks": [[P, P, 6], [P, P, 7, 8]], "scores": [1.0, 1.0]},
            # one completion cut to the limit of 6, one that has nothing to learn from
            {"tokens": [[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3]], "masks": [[P, P, 3, 4, 5, 6, 7, 8], [P, P, P]], "scores": [0.0, 2.0]},
            # a multi-turn completion: tokens the environment put between turns are completion tokens too
            {"tokens": [[1, 9, 9, 2, 9], [1, 9, 8, 3, 9]], "masks": [[P, 9, P, P, 9], [P, 9, P, P, 9]], "scores": [0.0, 1.0]},
            # malformed and empty groups: nothing readable, nothing counted
            {"tokens": [[1, 2]], "masks": [[P, P], [P]], "scores": [1.0]},
            {"tokens": [], "masks": [], "scores": []},
        ]
        for g in batch:
            if len(g["tokens"]) == len(g["masks"]):
                g["inference_logprobs"] = [[1.0 if m == P else -0.5 for m in masks] for masks in g["masks"]]
        prepared = prepare_batch(batch, 6)
        sequences = aligned_sequences(prepared)
        counts = token_counts(prepared, sequences)
        rows = rollout_rows(prepared, lambda toks: " ".join(map(str, toks)))
        sums = {kind: sum(row.get(f"{kind}_tokens", 0) for row in rows) for kind in ("prompt", "completion", "trained")}
        self.assertEqual(counts, {"tokens/prompt": sums["prompt"], "tokens/sampled": sums["completion"], "tokens/trained": sums["trained"]})
        self.assertEqual(counts, {"tokens/prompt": 2 * 4 + 2 + 3 + 1 + 1, "tokens/sampled": 2 + 1 + 1 + 2 + 4 + 0 + 4 + 4, "tokens/trained": 3 + 2 + 5 + 4 + 4})
        # trained: what forward_backward is sent, the datums' model input
        self.assertEqual(counts["tokens/trained"], sum(to_datum(s).model_input.length for s in sequences))
        by_completion = {(row["group"], row["index"]): row.get("trained_tokens") for row in rows}
        self.assertEqual(by_completion[(1, 0)], 0)  # skipped group
        self.assertEqual(by_completion[(2, 1)], 0)  # nothing to learn from
        self.assertEqual(by_completion[(2, 0)], 5)  # cut to 6 tokens, the last only a target
        self.assertIsNone(by_completion[(4, None)])  # the malformed group's row counts nothing

    def test_token_totals_come_from_the_last_row_at_or_before_the_step(self):
        path = os.path.join(self.dir, "metrics.jsonl")
        totals = lambda p, s, t: {"tokens/prompt_total": p, "tokens/sampled_total": s, "tokens/trained_total": t}
        with open(path, "w") as f:
            for row in [
                {"step": 0, "eval/mean_score": 0.1},
                {"step": 1, **totals(10, 20, 25)},
                {"step": 2, **totals(20, 40, 50)},
                {"step": 3, "train/loss": 1.0},  # no totals: an older trainer's row
                {"step": 4, **totals(40, 80, 100)},
            ]:
                f.write(json.dumps(row) + "\n")
            f.write("not json\n")
        self.assertEqual(token_totals(path, 2), (totals(20, 40, 50), 2))
        self.assertEqual(token_totals(path, 3), (totals(20, 40, 50), 2))  # step 3 has none
        self.assertEqual(token_totals(path, 9), (totals(40, 80, 100), 4))
        self.assertEqual(token_totals(path, 0), (totals(0, 0, 0), None))
        self.assertEqual(token_totals(os.path.join(self.dir, "absent.jsonl"), 5), (totals(0, 0, 0), None))

    def test_wandb_gets_the_numbers_and_the_bottlenecks_name(self):
        logged = []
        run = type("Run", (), {"log": lambda self, values, step: logged.append((values, step))})()
        Wandb(run).log({"step": 4, "_timestamp": 1.0, "tokens/trained": 8, "time/bottleneck": "wait", "engine/note": "x"}, step=4)
        self.assertEqual(logged, [({"tokens/trained": 8, "time/bottleneck": "wait"}, 4)])


if __name__ == "__main__":
    unittest.main()


class CostTests(unittest.TestCase):
    def config(self, **values):
        keys = ("price_prompt_per_million", "price_sampled_per_million", "price_trained_per_million", "price_machine_per_hour", "max_cost", "max_tokens", "max_hours")
        # A batch of 1 sequence of at most 1 token unless said: a first step's bound of ~nothing.
        sizes = {"batch_size": values.get("batch_size", 1), "max_token_trainer_length": values.get("max_token_trainer_length", 1)}
        return SimpleNamespace(**{key: values.get(key) for key in keys}, **sizes)

    def test_a_steps_cost_is_its_tokens_at_their_prices_and_the_machines_time(self):
        config = self.config(price_prompt_per_million=1.0, price_trained_per_million=3.0, price_machine_per_hour=7.2)
        tokens = {"tokens/prompt": 2_000_000, "tokens/sampled": 5_000_000, "tokens/trained": 1_000_000}
        self.assertAlmostEqual(step_cost(config, tokens, 1800.0), 2.0 + 3.0 + 3.6)
        self.assertTrue(is_priced(config))
        self.assertFalse(is_priced(self.config(max_tokens=5)))

    def test_the_estimate_at_completion_takes_the_pace_of_the_last_five_steps(self):
        spend = Spend(Lineage(cost=10.0))
        for cost in (100.0, 1.0, 1.0, 1.0, 2.0, 5.0):
            spend.add(cost, 10, 1.0)
        self.assertAlmostEqual(spend.cost_total, 120.0)
        self.assertAlmostEqual(spend.estimate_at_completion(4), 120.0 + 4 * 2.0)
        self.assertAlmostEqual(spend.estimate_at_completion(0), 120.0)

    def test_the_cap_decision_adds_the_predicted_next_step_to_what_the_run_spent(self):
        config = self.config(price_sampled_per_million=1.0, max_cost=10.0)
        spend = Spend()
        for cost, tokens, secs in ((1.0, 100, 10.0), (3.0, 100, 10.0), (2.0, 100, 10.0), (4.0, 400, 40.0)):
            spend.add(cost, tokens, secs)
        # spent 10, the next step predicted from the last three: (3 + 2 + 4) / 3 = 3
        cap = cap_passed(config, spend, 0.0)
        self.assertEqual(
            cap,
            {"cap": "max_cost", "limit": 10.0, "spent": 10.0, "next_step": 3.0, "predicted": "recent_steps", "parents": False},
        )
        self.assertIsNone(cap_passed(self.config(max_cost=13.5, batch_size=1, max_token_trainer_length=1), spend, 0.0))
        tokens = cap_passed(self.config(max_tokens=800), spend, 0.0)
        self.assertEqual((tokens["cap"], tokens["spent"], tokens["next_step"]), ("max_tokens", 700, 200.0))
        hours = cap_passed(self.config(max_hours=1.0), spend, 0.995)
        self.assertEqual(hours["cap"], "max_hours")
        self.assertAlmostEqual(hours["next_step"], 20.0 / 3600)
        self.assertIn("max_cost 10 USD: this run spent 10 USD", describe_cap(cap, "USD"))

    def test_before_any_step_the_first_is_predicted_at_its_token_bound(self):
        # 4 sequences of at most 100 tokens: 400 prompt-or-sampled and 400 trained at most.
        config = self.config(price_prompt_per_million=1.0, price_sampled_per_million=2.0, price_trained_per_million=3.0,
                             max_cost=0.0019, batch_size=4, max_token_trainer_length=100)
        self.assertEqual(first_step_bound(config), (400 * (2.0 + 3.0) / 1e6, 800.0, 0.0))
        cap = cap_passed(config, Spend(), 0.0)
        self.assertEqual((cap["cap"], cap["predicted"], cap["spent"]), ("max_cost", "token_bound", 0.0))
        self.assertIn("would take up to 0.002 more (a first step's bound", describe_cap(cap, "USD"))
        self.assertIsNone(cap_passed(self.config(max_cost=0.0021, price_sampled_per_million=2.0, price_trained_per_million=3.0,
                                                 batch_size=4, max_token_trainer_length=100), Spend(), 0.0))
        # Time already passed caps at once; a first step's time is not predicted.
        late = cap_passed(self.config(max_hours=0.0001, batch_size=4, max_token_trainer_length=100), Spend(), 0.001)
        self.assertEqual(late["cap"], "max_hours")
        self.assertIn("used 0.001 h (its trainer's time", describe_cap(late, "USD"))

    def test_a_continued_runs_parents_count_and_predict_its_first_step(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "metrics.jsonl")
            rows = (
                {"step": 0, "eval/accuracy": 0.5},
                {"step": 1, "cost/step": 1.0, "cost/total": 1.0, "time/total_secs": 60.0, "tokens/prompt": 10, "tokens/sampled": 20, "tokens/trained": 30,
                 "tokens/prompt_total": 10, "tokens/sampled_total": 20, "tokens/trained_total": 30},
                {"event": "capped", "step": 1, "spent": 9.0},
                {"step": 2, "cost/step": 3.0, "cost/total": 4.0, "time/total_secs": 120.0, "tokens/prompt": 10, "tokens/sampled": 20, "tokens/trained": 30,
                 "tokens/prompt_total": 20, "tokens/sampled_total": 40, "tokens/trained_total": 60},
                {"step": 3, "cost/step": 100.0, "cost/total": 104.0, "time/total_secs": 1.0},
            )
            with open(path, "w") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")
            lineage = Lineage.read(path, 2)
        self.assertEqual((lineage.cost, lineage.tokens, lineage.secs), (4.0, 120, 180.0))
        spend = Spend(lineage)
        self.assertEqual(spend.next_step(), (2.0, 60.0, 90.0))
        cap = cap_passed(self.config(max_hours=0.07), spend, 0.0)
        self.assertAlmostEqual(cap["spent"], 0.05)
        self.assertTrue(cap["parents"])
        self.assertIn("this run and the runs it continues used 0.05 h", describe_cap(cap, "USD"))
        self.assertIsNone(cap_passed(self.config(max_cost=6.5), spend, 0.0))
        self.assertEqual(cap_passed(self.config(max_cost=5.5), spend, 0.0)["spent"], 4.0)

    def test_a_resumed_runs_cost_total_comes_from_the_last_row_at_or_before_its_step(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "metrics.jsonl")
            with open(path, "w") as f:
                for row in ({"step": 1, "cost/total": 1.5}, {"step": 2, "cost/total": 3.0}, {"event": "capped", "step": 2, "spent": 9.0},
                            {"step": 3, "tokens/prompt": 1}, {"step": 4, "cost/total": 8.0}):
                    f.write(json.dumps(row) + "\n")
                f.write("not json\n")
            self.assertEqual(cost_total(path, 3), (3.0, 2))
            self.assertEqual(cost_total(path, 0), (0.0, None))
            self.assertEqual(cost_total(os.path.join(tmp, "missing"), 3), (0.0, None))
