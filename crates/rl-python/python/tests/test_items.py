"""The held-out slice: stable across processes, kept out of training, asked once each."""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import unittest

from rl_env import HELD_OUT, TRAINING, ItemsError, Split, canonical, in_held_out, item_key

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class CyclingEnv:
    """Yields its items over and over, as atroposlib environments over a dataset do."""

    def __init__(self, items):
        self.items = items
        self.index = 0

    async def get_next_item(self):
        item = self.items[self.index % len(self.items)]
        self.index += 1
        return item


class EvalSplitEnv(CyclingEnv):
    def __init__(self, items, evals):
        super().__init__(items)
        self.evals = list(evals)

    async def get_next_eval_item(self):
        return self.evals.pop(0) if self.evals else None


def questions(n):
    return [{"question": f"what is {i} + {i}?", "answer": str(2 * i)} for i in range(n)]


def drain(env, limit):
    async def run():
        got = []
        for _ in range(limit):
            item = await env.get_next_item()
            if item is None:
                break
            got.append(item)
        return got

    return asyncio.run(run())


class KeyTest(unittest.TestCase):
    def test_sets_and_key_order_do_not_change_the_key(self):
        a = (frozenset({("role", "user"), ("content", "hi")}), {"b": 1, "a": [1, 2]})
        b = (frozenset({("content", "hi"), ("role", "user")}), {"a": [1, 2], "b": 1})
        self.assertEqual(item_key(a), item_key(b))
        self.assertNotEqual(item_key(a), item_key((a[0], {"a": [2, 1], "b": 1})))

    def test_the_key_is_the_same_in_another_process_with_another_string_hash_seed(self):
        item = (frozenset({("role", "user"), ("content", "x"), ("name", "y")}), "42")
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); from rl_env import item_key; "
            "print(item_key((frozenset({('role','user'),('content','x'),('name','y')}), '42')))"
        )
        keys = {
            subprocess.run(
                [sys.executable, "-c", code, PYTHON_DIR],
                env={**os.environ, "PYTHONHASHSEED": seed},
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            ).stdout.strip()
            for seed in ("1", "2", "3")
        }
        self.assertEqual(keys, {item_key(item)})

    def test_objects_are_keyed_by_their_fields_or_a_stable_repr(self):
        self.assertEqual(canonical({"when": 1.5, 2: {3}}), {"2": [3], "when": 1.5})
        self.assertEqual(canonical(b"\x00"), "b'\\x00'")

        class Item:
            def __init__(self, question):
                self.question = question

        self.assertEqual(item_key(Item("q")), item_key(Item("q")))
        self.assertNotEqual(item_key(Item("q")), item_key(Item("r")))
        with self.assertRaisesRegex(ItemsError, "no stable content"):
            item_key({"handle": object()})

    def test_the_slice_is_about_the_fraction_asked_and_moves_with_the_seed(self):
        keys = [item_key(item) for item in questions(4000)]
        share = sum(in_held_out(key, 0.1, 0) for key in keys) / len(keys)
        self.assertAlmostEqual(share, 0.1, delta=0.02)
        first = {key for key in keys if in_held_out(key, 0.1, 0)}
        second = {key for key in keys if in_held_out(key, 0.1, 1)}
        self.assertLess(len(first & second), len(first) // 3)


class SplitTest(unittest.TestCase):
    def split(self, items, fraction=0.2, report=None):
        return Split(items=items, fraction=fraction, seed=7, report_path=report)

    def test_training_never_sees_a_held_out_item_and_evaluation_sees_each_once(self):
        items = questions(50)
        held = [item for item in items if in_held_out(item_key(item), 0.2, 7)]
        self.assertGreater(len(held), 2)

        training = CyclingEnv(items)
        self.split(TRAINING).attach(training)
        trained = drain(training, 300)
        self.assertEqual(len(trained), 300)
        self.assertFalse(any(item in held for item in trained))

        with tempfile.TemporaryDirectory() as folder:
            report = os.path.join(folder, "items.json")
            evaluation = CyclingEnv(items)
            self.split(HELD_OUT, report=report).attach(evaluation)
            asked = drain(evaluation, 300)
            self.assertEqual(asked, [item for item in items if item in held])
            with open(report, encoding="utf-8") as f:
                written = json.load(f)
        self.assertEqual(written["source"], "held-out slice")
        self.assertEqual(written["drawn"], len(held))
        self.assertTrue(written["exhausted"])

    def test_an_eval_split_is_asked_and_training_keeps_every_training_item(self):
        items = questions(20)
        training = EvalSplitEnv(items, [])
        split = self.split(TRAINING)
        split.attach(training)
        self.assertEqual(drain(training, 20), items)
        self.assertEqual(split.source, "eval split kept apart by the environment")

        evals = [{"question": "eval", "answer": str(i)} for i in range(5)]
        evaluation = EvalSplitEnv(items, evals + evals[:2])
        split = self.split(HELD_OUT)
        split.attach(evaluation)
        self.assertEqual(drain(evaluation, 50), evals)
        self.assertEqual(split.source, "eval split")

    def test_an_environment_of_only_held_out_items_cannot_train(self):
        held = [item for item in questions(200) if in_held_out(item_key(item), 0.2, 7)][:3]
        env = CyclingEnv(held)
        self.split(TRAINING).attach(env)
        with self.assertRaisesRegex(ItemsError, "fell in the held-out slice"):
            drain(env, 1)

    def test_no_slice_and_no_eval_split_is_refused_for_evaluation(self):
        with self.assertRaisesRegex(ItemsError, "no held-out slice"):
            self.split(HELD_OUT, fraction=0.0).attach(CyclingEnv(questions(3)))

    def test_the_variables_are_checked(self):
        self.assertEqual(Split.from_environment({}).items, TRAINING)
        for environ in (
            {"RL_ITEMS": "all"},
            {"RL_HELD_OUT_FRACTION": "nan"},
            {"RL_HELD_OUT_FRACTION": "0.9"},
            {"RL_HELD_OUT_SEED": "x"},
        ):
            with self.assertRaises(ItemsError, msg=str(environ)):
                Split.from_environment(environ)


class RunnerTest(unittest.TestCase):
    def test_the_file_runs_as_main_from_its_folder_with_its_arguments(self):
        with tempfile.TemporaryDirectory() as folder:
            with open(os.path.join(folder, "helper.py"), "w", encoding="utf-8") as f:
                f.write("VALUE = 'sibling'\n")
            with open(os.path.join(folder, "env.py"), "w", encoding="utf-8") as f:
                f.write(
                    "import sys, helper\n"
                    "if __name__ == '__main__':\n"
                    "    print(helper.VALUE, sys.argv[1:], sys.argv[0].endswith('env.py'))\n"
                )
            done = subprocess.run(
                [sys.executable, "-m", "rl_env", os.path.join(folder, "env.py"), "process", "--x", "1"],
                env={**os.environ, "PYTHONPATH": PYTHON_DIR, "RL_ITEMS": "training"},
                capture_output=True,
                text=True,
                timeout=120,
            )
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), "sibling ['process', '--x', '1'] True")

    def test_a_wrong_variable_exits_2_with_the_reason(self):
        done = subprocess.run(
            [sys.executable, "-m", "rl_env", "env.py", "serve"],
            env={**os.environ, "PYTHONPATH": PYTHON_DIR, "RL_ITEMS": "everything"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        self.assertEqual(done.returncode, 2)
        self.assertIn("RL_ITEMS is 'everything'", done.stderr)


if __name__ == "__main__":
    unittest.main()
