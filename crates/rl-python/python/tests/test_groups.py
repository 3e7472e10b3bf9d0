"""`rl_env.groups`: the groups an environment makes, counted and written whole where rl reads them."""

import asyncio
import json
import os
import tempfile
import unittest

from rl_env.groups import GroupCounts


class Env:
    def __init__(self, results):
        self.results = list(results)

    async def collect_trajectories(self, item):
        result = self.results.pop(0)
        if isinstance(result, Exception):
            raise result
        return result


class GroupCountsTest(unittest.TestCase):
    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.path = os.path.join(folder.name, "env-groups.json")

    def collect(self, results):
        counts = GroupCounts(self.path)
        env = Env(results)
        counts.attach(env)
        for _ in range(len(env.results)):
            try:
                asyncio.run(env.collect_trajectories({}))
            except ValueError:
                pass
        with open(self.path, encoding="utf-8") as f:
            return json.load(f)

    def test_alike_groups_are_counted_by_their_shared_score(self):
        written = self.collect(
            [
                ({"scores": [0.0, 0.0]}, []),
                ({"scores": [0.0, 0.0]}, []),
                ([{"scores": [1.0, 1.0]}, {"scores": [0.0, 1.0]}], []),
                (None, []),
                ValueError("the model is gone"),
            ]
        )
        self.assertEqual(written["made"], 4)
        self.assertEqual(written["with_signal"], 1)
        self.assertEqual(written["alike"], 3)
        self.assertEqual(written["alike_scores"], {"0.0": 2, "1.0": 1})
        self.assertEqual(written["none"], 1)
        self.assertEqual(written["failed"], 1)
        self.assertFalse(os.path.exists(self.path + ".partial"))

    def test_no_file_is_written_unless_named(self):
        counts = GroupCounts(None)
        counts.count_result(({"scores": [1, 1]}, []))
        self.assertEqual(counts.alike, 1)
        self.assertFalse(os.path.exists(self.path))


if __name__ == "__main__":
    unittest.main()
