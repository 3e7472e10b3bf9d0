"""Evaluation during training: when it is due, how rl's answer becomes `eval/*` numbers, and
what a failing, silent or hanging evaluation does to the step (nothing but `eval/failed`)."""

import asyncio
import json
import os
import sys
import tempfile
import unittest

from rl_trainer import evaluation

ANSWER = {
    "run_id": "0123abcd",
    "step": 4,
    "message": "step 4: mean score 0.5000",
    "metrics": {"eval/mean_score": 0.5, "eval/percent_correct": 25.0, "eval/prompts": 4, "other": 1, "eval/flag": True},
}


def fake_rl(folder, body):
    """A stand-in for `rl ... runs evaluate RUN_ID` that records its arguments."""
    script = os.path.join(folder, "rl.py")
    with open(script, "w") as f:
        f.write("import json, sys, time\n")
        f.write(f"open({os.path.join(folder, 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n")
        f.write(body)
    return [sys.executable, script, "--json", "runs", "evaluate", "0123abcd"]


class EvaluationTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.said = []

    def tearDown(self):
        self.tmp.cleanup()

    def run_evaluation(self, body, timeout=30.0):
        command = fake_rl(self.tmp.name, body)
        return asyncio.run(evaluation.evaluate(command, 4, "http://127.0.0.1:9/v1", "tiny", timeout, self.said.append))

    def test_due_every_n_steps_after_the_last_and_always_at_the_end(self):
        due, last = [], 0
        for n in range(1, 11):
            if evaluation.is_due(n, 10, 4, last):
                due.append(n)
                last = n
        self.assertEqual(due, [4, 8, 10])
        # Counted from the last evaluated step: a step that saved nothing postpones it.
        self.assertTrue(evaluation.is_due(6, 10, 4, 2))
        self.assertFalse(evaluation.is_due(5, 10, 4, 2))
        self.assertFalse(any(evaluation.is_due(n, 10, 0, 0) for n in range(1, 11)))

    def test_the_trainer_is_asked_where_it_listens_on_loopback(self):
        self.assertEqual(evaluation.loopback_url("127.0.0.1", 5), "http://127.0.0.1:5/v1")
        self.assertEqual(evaluation.loopback_url("127.0.0.2", 5), "http://127.0.0.2:5/v1")
        self.assertEqual(evaluation.loopback_url("localhost", 5), "http://localhost:5/v1")
        self.assertEqual(evaluation.loopback_url("::1", 5), "http://[::1]:5/v1")
        self.assertEqual(evaluation.loopback_url("0.0.0.0", 5), "http://127.0.0.1:5/v1")
        self.assertEqual(evaluation.loopback_url("::", 5), "http://[::1]:5/v1")
        self.assertIsNone(evaluation.loopback_url("10.1.2.3", 5))
        self.assertIsNone(evaluation.loopback_url("node7.cluster", 5))

    def test_the_command_comes_from_rl_or_not_at_all(self):
        self.assertEqual(evaluation.command_from({evaluation.COMMAND_VARIABLE: '["/bin/rl", "runs"]'}), ["/bin/rl", "runs"])
        for bad in ["", "not json", "{}", "[]", '["", "x"]', "[1]"]:
            self.assertIsNone(evaluation.command_from({evaluation.COMMAND_VARIABLE: bad}), bad)
        self.assertIsNone(evaluation.command_from({}))

    def test_only_finite_eval_numbers_are_taken(self):
        answer = {"metrics": {"eval/a": 1, "eval/b": float("nan"), "eval/c": "x", "d": 2.0, "eval/e": False}}
        self.assertEqual(evaluation.metrics_of(answer), {"eval/a": 1.0})
        self.assertEqual(evaluation.metrics_of(["eval/a"]), {})
        self.assertEqual(evaluation.metrics_of({"metrics": [1]}), {})

    def test_rl_is_asked_for_the_step_and_its_numbers_are_kept(self):
        metrics = self.run_evaluation(f"print('noise')\nprint(json.dumps({ANSWER!r}))\n")
        self.assertEqual(metrics, {"eval/mean_score": 0.5, "eval/percent_correct": 25.0, "eval/prompts": 4.0})
        with open(os.path.join(self.tmp.name, "argv.json")) as f:
            argv = json.load(f)
        self.assertEqual(argv, ["--json", "runs", "evaluate", "0123abcd", "--step", "4", "--base-url", "http://127.0.0.1:9/v1", "--model", "tiny"])
        self.assertTrue(any("step 4: mean score" in line for line in self.said), self.said)

    def test_an_indented_answer_is_read_whole(self):
        metrics = self.run_evaluation(f"print(json.dumps({ANSWER!r}, indent=2))\n")
        self.assertEqual(metrics["eval/mean_score"], 0.5)

    def test_a_refused_evaluation_is_said_with_rls_reason_and_counted(self):
        body = "print(json.dumps({'error': 'base_url: not on loopback'}))\nsys.exit(1)\n"
        self.assertEqual(self.run_evaluation(body), {"eval/failed": 1.0})
        self.assertTrue(any("evaluation failed: base_url: not on loopback" in line for line in self.said), self.said)

    def test_a_crash_quotes_its_error_output(self):
        body = "sys.stderr.write('Traceback: boom\\n')\nsys.exit(3)\n"
        self.assertEqual(self.run_evaluation(body), {"eval/failed": 1.0})
        self.assertTrue(any("boom" in line for line in self.said), self.said)

    def test_a_hanging_evaluation_is_cut(self):
        self.assertEqual(self.run_evaluation("time.sleep(60)\n", timeout=1.0), {"eval/failed": 1.0})
        self.assertTrue(any("cut after" in line for line in self.said), self.said)

    def test_a_missing_program_is_said(self):
        metrics = asyncio.run(evaluation.evaluate([os.path.join(self.tmp.name, "no-rl")], 2, "u", "m", 5, self.said.append))
        self.assertEqual(metrics, {"eval/failed": 1.0})
        self.assertTrue(any("not started" in line for line in self.said), self.said)


if __name__ == "__main__":
    unittest.main()
