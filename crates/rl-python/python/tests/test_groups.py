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

    def test_only_a_group_the_trainer_is_sent_is_the_last_sent_and_any_ending_updates(self):
        """A stall's health check blames from `last_sent`: groups failing, dropped alike or
        returning nothing refresh `updated` alone."""
        written = self.collect([({"scores": [0.0, 0.0]}, []), (None, []), ValueError("timed out")])
        self.assertIsNone(written["last_sent"])
        self.assertGreater(written["updated"], 0)
        before = written["updated"]
        written = self.collect([({"scores": [0.0, 1.0]}, []), ValueError("timed out"), ({"scores": [1.0, 1.0]}, [])])
        self.assertIsNotNone(written["last_sent"])
        self.assertGreaterEqual(written["last_sent"], before)
        self.assertGreaterEqual(written["updated"], written["last_sent"])

    def test_alike_groups_are_sent_only_where_atroposlib_is_told_not_to_drop_them(self):
        counts = GroupCounts(None)
        self.assertTrue(counts.is_sent("with_signal"))
        for verdict in ("alike", "too_long", "invalid", "none", "failed"):
            self.assertFalse(counts.is_sent(verdict), verdict)
        counts.env = AtroposLikeEnv(None)
        counts.count_result(({"scores": [1, 1]}, []))
        self.assertIsNone(counts.last_sent)
        counts.env.config.ensure_scores_are_not_same = False
        counts.count_result(({"scores": [1, 1]}, []))
        self.assertTrue(counts.is_sent("alike"))
        self.assertIsNotNone(counts.last_sent)

    def test_no_file_is_written_unless_named(self):
        counts = GroupCounts(None)
        counts.count_result(({"scores": [1, 1]}, []))
        self.assertEqual(counts.alike, 1)
        self.assertFalse(os.path.exists(self.path))


class Server:
    """atroposlib's ServerManager as an environment sees it: asking it is sampling."""

    def __init__(self):
        self.asked = 0

    async def chat_completion(self, **kwargs):
        self.asked += 1
        return None


class Tokenizer:
    def encode(self, text):
        return list(range(len(text.split())))


class AtroposLikeEnv:
    """An environment shaped like atroposlib's BaseEnv: a server, a tokenizer, a token limit,
    `collect_trajectories` and `handle_send_to_api`."""

    def __init__(self, collect, send=None, max_token_length=8):
        self.server = Server()
        self.tokenizer = Tokenizer()
        self.max_token_len = -1
        self.config = type("Config", (), {"max_token_length": max_token_length})()
        self.collect = collect
        self.send = send

    async def collect_trajectories(self, item):
        return await self.collect(self, item)

    async def handle_send_to_api(self, scored, item=None):
        if self.send is not None:
            self.send(scored)


class CausesTest(unittest.TestCase):
    """Issue 40: each reason a run gets nothing to train on is counted apart."""

    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.path = os.path.join(folder.name, "env-groups.json")

    def run_env(self, env, calls=3):
        counts = GroupCounts(self.path)
        counts.attach(env)

        async def handle_env():
            # atroposlib's handle_env: errors of both handlers are logged, never raised.
            try:
                result, _ = await env.collect_trajectories({})
            except Exception:
                return
            if result is None:
                return
            try:
                await env.handle_send_to_api(result)
            except Exception:
                pass

        for _ in range(calls):
            asyncio.run(handle_env())
        with open(self.path, encoding="utf-8") as f:
            return json.load(f)

    def test_rollouts_returned_unscored_are_invalid_and_the_send_error_is_quoted(self):
        async def collect(env, item):
            await env.server.chat_completion()
            return [({"role": "user"}, "42"), ({"role": "user"}, "41")], []

        def send(scored):
            for group in scored:
                group.get("group_overrides")

        written = self.run_env(AtroposLikeEnv(collect, send))
        self.assertEqual(written["made"], 0)
        self.assertEqual(written["invalid"], 3)
        self.assertEqual(written["invalid_first"], "a list of 2 tuple")
        self.assertEqual(written["errors"]["handle_send_to_api"]["count"], 3)
        self.assertEqual(
            written["errors"]["handle_send_to_api"]["first"],
            "AttributeError: 'tuple' object has no attribute 'get'",
        )
        self.assertEqual(written["failed"], 0)

    def test_prompts_are_measured_against_the_environments_own_limit(self):
        """The trainer's limit (registered) may be larger than the one the environment skips by."""

        async def collect(env, item):
            env.max_token_len = 4096
            if len(env.tokenizer.encode("one two three four five six seven eight nine ten")) >= 8:
                return None, []
            return None, []

        written = self.run_env(AtroposLikeEnv(collect, max_token_length=8))
        self.assertEqual(written["prompt_too_long"], 3)
        self.assertEqual(written["token_limit"], 4096)

    def test_prompts_skipped_as_too_long_are_told_from_other_empty_results(self):
        async def collect(env, item):
            prompt = env.tokenizer.encode("one two three four five six seven eight nine ten")
            if len(prompt) >= env.config.max_token_length:
                return None, []
            await env.server.chat_completion()
            return None, []

        written = self.run_env(AtroposLikeEnv(collect, max_token_length=8))
        self.assertEqual(written["unsampled"], 3)
        self.assertEqual(written["prompt_too_long"], 3)
        self.assertEqual(written["longest_prompt"], 10)
        self.assertEqual(written["prompt_limit"], 8)
        self.assertEqual(written["none"], 0)
        written = self.run_env(AtroposLikeEnv(collect, max_token_length=64))
        self.assertEqual(written["none"], 3, "asked the model, then returned nothing")
        self.assertEqual(written["unsampled"], 0)

    def test_groups_reaching_the_token_limit_are_dropped_not_made(self):
        async def collect(env, item):
            await env.server.chat_completion()
            return {"tokens": [[1] * 9, [1] * 3], "masks": [[], []], "scores": [1.0, 0.0]}, []

        written = self.run_env(AtroposLikeEnv(collect, max_token_length=8))
        self.assertEqual(written["too_long"], 3)
        self.assertEqual(written["longest_sequence"], 9)
        self.assertEqual(written["made"], 0)
        self.assertEqual(written["with_signal"], 0)

    def test_an_error_in_collect_trajectories_is_counted_with_its_first_message(self):
        async def collect(env, item):
            raise KeyError("answer")

        written = self.run_env(AtroposLikeEnv(collect))
        self.assertEqual(written["failed"], 3)
        self.assertEqual(written["errors"]["collect_trajectories"], {"count": 3, "first": "KeyError: 'answer'"})


if __name__ == "__main__":
    unittest.main()
