import json
import os
import tempfile
import unittest

from rl_trainer.batch import prepare_batch
from rl_trainer.records import Checkpoints, JsonLines, Rollouts, rollout_rows

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


if __name__ == "__main__":
    unittest.main()
