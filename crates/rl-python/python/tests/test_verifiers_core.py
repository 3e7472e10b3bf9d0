"""rl_verifiers' parts that need no verifiers: the run config and flags, a group's conversion and
counts, run-api's environment protocol, the serve and process loops (against a fake adapter and
a fake run-api on 127.0.0.1), the task draw through the held-out slice, and rl_env's dispatch."""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import httpx

from rl_env import HELD_OUT, TRAINING, Split
from rl_env.groups import GroupCounts
from rl_verifiers import config, scored
from rl_verifiers.adapter import PROMPT_LOGPROB, PROMPT_MASK, Endpoint, Rollout, Sequence, Task
from rl_verifiers.environment import TaskDraw, module_of
from rl_verifiers.legacy import describe_error, rollout_of
from rl_verifiers.process import ProcessError, process
from rl_verifiers.runapi import EnvironmentApi, RunApiError
from rl_verifiers.serve import serve, uneven_refused
from tests.verifiers_fakes import FakeRunApi, read_lines

PROGRAMS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sequence(prompt, completion, reward_messages=None):
    return Sequence(
        tokens=prompt + completion,
        masks=[PROMPT_MASK] * len(prompt) + completion,
        logprobs=[PROMPT_LOGPROB] * len(prompt) + [-0.5] * len(completion),
        messages=reward_messages or [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
    )


class FakeAdapter:
    """An environment of `count` tasks whose rollout i of a group scores i / size (or
    `alike`), with one two-token branch each; `fail` makes every rollout fail."""

    kind = "verifiers-v0"

    def __init__(self, count=3, fail=False, alike=False, eval_count=0):
        self.count = count
        self.fail = fail
        self.alike = alike
        self.eval_count = eval_count
        self.groups = []

    def own_fields(self):
        return {"num_examples": 32}

    def load(self, own_args):
        pass

    def serving(self):
        return _null()

    def tool_names(self):
        return []

    def rendering(self, endpoint):
        return None

    def tasks(self):
        return [Task(key=f"task-{i}", payload={"q": i}) for i in range(self.count)]

    def eval_tasks(self):
        if not self.eval_count:
            return None
        return [Task(key=f"eval-{i}", payload={"q": -i}) for i in range(self.eval_count)]

    async def run_group(self, task, size, endpoint, sampling):
        self.groups.append((task.key, size, endpoint.training, dict(sampling)))
        if self.fail:
            return [Rollout(reward=0.0, error="ModelError: the model is down") for _ in range(size)]
        rollouts = []
        for i in range(size):
            reward = 0.5 if self.alike else i / size
            rollouts.append(
                Rollout(
                    reward=reward,
                    rewards={"similarity": reward},
                    sequences=[sequence([1, 2], [7, 8])] if endpoint.training else [],
                    messages=[{"role": "user", "content": str(task.payload)}, {"role": "assistant", "content": str(i)}],
                )
            )
        return rollouts


class HangingAdapter(FakeAdapter):
    """A FakeAdapter whose groups after the first `sent_first` never end (a scoring that hangs)."""

    def __init__(self, sent_first=0):
        super().__init__(count=5)
        self.sent_first = sent_first

    async def run_group(self, task, size, endpoint, sampling):
        if len(self.groups) >= self.sent_first:
            self.groups.append((task.key, size, endpoint.training, dict(sampling)))
            await asyncio.sleep(3600)
        return await super().run_group(task, size, endpoint, sampling)


class _null:
    async def __aenter__(self):
        return None

    async def __aexit__(self, *exc):
        return False


def split(items=TRAINING, fraction=0.0):
    return Split(items=items, fraction=fraction, seed=0)


class ConfigTests(unittest.TestCase):
    def test_flags_override_the_config_file_and_split_by_the_environments_fields(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "run.yaml")
            with open(path, "w") as f:
                f.write("env:\n  group_size: 8\n  num_examples: 4\n  use_wandb: false\n  frobnicate: 1\n"
                        "openai:\n- base_url: http://127.0.0.1:1/v1\n  model_name: m\n  api_key: x\n")
            invocation = config.parse_invocation(["serve", "--config", path, "--env.group_size", "2", "--env.min_length=5"])
        run, own, ignored = config.split_env(invocation.env, {"num_examples": 32, "min_length": 3})
        self.assertEqual(run.group_size, 2)
        self.assertEqual(own, {"num_examples": 4, "min_length": 5})
        self.assertEqual(ignored, ["frobnicate"])
        self.assertEqual(invocation.openai["model_name"], "m")

    def test_values_are_coerced_by_the_fields_default_and_bad_ones_refused(self):
        self.assertIs(config.coerce("false", True, "x"), False)
        self.assertEqual(config.coerce("3", 1, "x"), 3)
        self.assertEqual(config.coerce("3", 1.0, "x"), 3.0)
        self.assertEqual(config.coerce("[1, 2]", [], "x"), [1, 2])
        self.assertEqual(config.coerce("None", 1, "x"), None)
        self.assertEqual(config.coerce("None", "text", "x"), "None")
        self.assertEqual(config.coerce("7", None, "x"), 7)
        for value, default in (("abc", 1), ("maybe", True), ("x", 1.0), ("3", [])):
            with self.assertRaises(config.ConfigError) as ctx:
                config.coerce(value, default, "env.field")
            self.assertIn("env.field", str(ctx.exception))

    def test_malformed_flags_are_refused(self):
        for argv in (["serve", "--env.group_size"], ["serve", "--foo", "1"], ["serve", "stray"], ["train"], []):
            with self.assertRaises(config.ConfigError):
                config.parse_invocation(argv)

    def test_a_preflights_key_comes_from_the_variable_never_from_argv(self):
        invocation = config.parse_invocation(
            ["process", "--openai.base_url", "http://h/v1/", "--openai.model_name", "m", "--openai.api_key", "sk-argv"]
        )
        run = config.RunSettings()
        self.assertEqual(config.endpoint(invocation, run, False, {"OPENAI_API_KEY": "sk-env"}).api_key, "sk-env")
        endpoint = config.endpoint(invocation, run, False, {})
        self.assertEqual(endpoint.api_key, config.NO_KEY)
        self.assertEqual(endpoint.base_url, "http://h/v1")
        serve_invocation = config.Invocation(mode="serve", openai={"base_url": "http://h/v1", "model_name": "m", "api_key": "x"})
        self.assertEqual(config.endpoint(serve_invocation, run, True, {}).api_key, "x")
        with self.assertRaises(config.ConfigError):
            config.endpoint(config.Invocation(mode="process"), run, False, {})


class ScoredTests(unittest.TestCase):
    def test_every_branch_is_an_entry_and_each_rollout_keeps_its_index(self):
        rollouts = [
            Rollout(reward=1.0, rewards={"a": 1.0}, sequences=[sequence([1], [5]), sequence([1, 5, 2], [6])]),
            Rollout(reward=0.0, error="ModelError: down"),
            Rollout(reward=0.5, rewards={"a": 0.5, "b": 2.0}, sequences=[sequence([1], [9])]),
        ]
        outcome = scored.run_group(rollouts, token_limit=64)
        group = outcome.group
        self.assertEqual(outcome.errors, ["ModelError: down"])
        self.assertEqual(group["scores"], [1.0, 1.0, 0.5])
        self.assertEqual(group["group_overrides"]["rollout_of"], [0, 0, 2])
        self.assertEqual(group["group_overrides"]["rewards"], {"a": [1.0, None, 0.5], "b": [None, None, 2.0]})
        self.assertEqual(group["masks"][1], [PROMPT_MASK, PROMPT_MASK, PROMPT_MASK, 6])
        self.assertEqual(group["inference_logprobs"][1], [1.0, 1.0, 1.0, -0.5])
        self.assertEqual(len(group["messages"]), 3)

    def test_a_group_of_another_size_than_group_size_is_not_sent_and_says_why(self):
        # run-api batches groups of one size only: 3 sequences where 3 rollouts were asked
        # would pass, 3 where 4 were asked (one failed, one gave two branches) never would.
        rollouts = [
            Rollout(reward=1.0, sequences=[sequence([1], [5]), sequence([1, 5, 2], [6])]),
            Rollout(reward=0.0, error="ModelError: down"),
            Rollout(reward=0.5, sequences=[sequence([1], [9])]),
        ]
        outcome = scored.run_group(rollouts, token_limit=64)
        self.assertIs(uneven_refused(outcome, 3), outcome)
        refused = uneven_refused(outcome, 4)
        self.assertIsNone(refused.group)
        self.assertEqual(refused.errors[0], "ModelError: down")
        self.assertIn("a group of 3 sequences from 2 usable rollouts, not group_size (4)", refused.errors[1])

    def test_a_sequence_reaching_the_limit_is_cut_and_a_prompt_reaching_it_is_unusable(self):
        long_completion = Rollout(reward=1.0, sequences=[sequence([1, 2], [3, 4, 5, 6])])
        long_prompt = Rollout(reward=0.0, sequences=[sequence([1, 2, 3, 4, 5], [6])])
        no_tokens = Rollout(reward=0.0)
        outcome = scored.run_group([long_completion, long_prompt, no_tokens], token_limit=5)
        self.assertEqual(outcome.group["tokens"], [[1, 2, 3, 4]])
        self.assertEqual(outcome.group["masks"], [[PROMPT_MASK, PROMPT_MASK, 3, 4]])
        self.assertEqual(len(outcome.errors), 2)
        self.assertIn("token limit of 5", outcome.errors[0])
        self.assertIn("no token ids", outcome.errors[1])
        self.assertIsNone(scored.run_group([no_tokens], token_limit=5).group)

    def test_a_preflight_group_is_one_score_and_conversation_per_rollout(self):
        rollouts = [
            Rollout(reward=0.25, rewards={"a": 0.25}, messages=[{"role": "assistant", "content": None}]),
            Rollout(reward=0.0, error="boom"),
        ]
        outcome = scored.preflight_group(rollouts)
        self.assertEqual(outcome.group["scores"], [0.25])
        self.assertEqual(outcome.group["messages"], [[{"role": "assistant", "content": ""}]])
        self.assertEqual(outcome.group["group_overrides"], {"rollout_of": [0], "rewards": {"a": [0.25, None]}})
        self.assertNotIn("tokens", outcome.group)

    def test_counts_are_written_with_the_keys_rust_reads(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "groups.json")
            counts = GroupCounts(path)
            self.assertEqual(scored.count(counts, scored.Outcome({"scores": [0.0, 1.0]}, ["e1"])), "with_signal")
            self.assertEqual(scored.count(counts, scored.Outcome({"scores": [1.0, 1.0]})), "alike")
            self.assertEqual(scored.count(counts, scored.Outcome(None, ["e2", "e3"])), "failed")
            with open(path) as f:
                written = json.load(f)
        self.assertEqual((written["made"], written["with_signal"], written["alike"], written["failed"]), (2, 1, 1, 1))
        self.assertEqual(written["alike_scores"], {"1.0": 1})
        self.assertEqual(written["errors"], {"rollout": {"count": 3, "first": "e1"}})

    def test_a_v0_rollout_output_becomes_a_rollout(self):
        output = {
            "prompt": [{"role": "user", "content": "abc"}],
            "completion": [{"role": "assistant", "content": "cba"}],
            "reward": 1.0,
            "metrics": {"similarity": 1.0},
            "is_truncated": False,
            "trajectory": [
                {"prompt": [{"role": "user", "content": "abc"}], "completion": [{"role": "assistant", "content": "cba"}],
                 "tokens": {"prompt_ids": [1, 2], "completion_ids": [3, 4], "completion_mask": [1, 0], "completion_logprobs": [-0.1, -0.2]}}
            ],
        }
        rollout = rollout_of(output, training=True)
        self.assertIsNone(rollout.error)
        self.assertEqual(rollout.sequences[0].tokens, [1, 2, 3, 4])
        self.assertEqual(rollout.sequences[0].masks, [PROMPT_MASK, PROMPT_MASK, 3, PROMPT_MASK])
        self.assertEqual(rollout.sequences[0].logprobs, [1.0, 1.0, -0.1, 1.0])
        output["trajectory"][0]["tokens"] = None
        self.assertIn("without token ids", rollout_of(output, training=True).error)
        self.assertEqual(rollout_of(output, training=False).sequences, [])
        error = {"error": "ModelError", "message": "m", "error_chain_repr": "r", "error_chain_str": "ModelError -> APIError:\n down"}
        self.assertEqual(describe_error(error), "ModelError -> APIError: down")


class RunApiTests(unittest.TestCase):
    def test_registration_is_asked_again_until_run_api_takes_it(self):
        answers = iter([{"status": "wait for trainer to start"}, {"status": "success", "env_id": 3}])
        seen = []

        def handler(request):
            seen.append((request.method, request.url.path, json.loads(request.content or b"null")))
            if request.url.path == "/register-env":
                return httpx.Response(200, json=next(answers))
            if request.url.path == "/status-env":
                return httpx.Response(200, json={"current_step": 1, "queue_size": 0})
            return httpx.Response(200, json={"status": "nonsense"})

        async def go():
            api = EnvironmentApi("http://run-api", lambda line: None, transport=httpx.MockTransport(handler))
            registered = await api.register_env({"group_size": 4}, poll_secs=0.01)
            status = await api.status_env(3)
            with self.assertRaises(RunApiError):
                await api.send_group({"tokens": []})
            await api.close()
            return registered, status

        registered, status = asyncio.run(go())
        self.assertEqual(registered["env_id"], 3)
        self.assertEqual(status["current_step"], 1)
        self.assertEqual(seen[2], ("GET", "/status-env", {"env_id": 3}))


class LoopTests(unittest.TestCase):
    def test_serve_registers_sends_groups_with_signal_and_ends_at_the_last_step(self):
        adapter = FakeAdapter()
        with FakeRunApi(total_steps=2, waits=1) as run_api, tempfile.TemporaryDirectory() as folder:
            run = config.RunSettings(group_size=4, total_steps=2, batch_size=4, max_num_workers=2, rollout_server_url=run_api.url)
            counts = GroupCounts(os.path.join(folder, "groups.json"))
            endpoint = Endpoint("http://127.0.0.1:9/v1", "m", "k", training=True)
            code = asyncio.run(serve(adapter, run, endpoint, TaskDraw(adapter, split()), counts, lambda line: None))
            groups = list(run_api.groups)
            registrations = list(run_api.registrations)
        self.assertEqual(code, 0)
        self.assertGreaterEqual(len(groups), 2)
        self.assertEqual(groups[0]["env_id"], 0)
        self.assertEqual(groups[0]["scores"], [0.0, 0.25, 0.5, 0.75])
        self.assertEqual(groups[0]["group_overrides"]["rollout_of"], [0, 1, 2, 3])
        self.assertEqual(len(registrations), 2)
        self.assertEqual(registrations[-1]["group_size"], 4)
        self.assertTrue(all(training for _, _, training, _ in adapter.groups))
        self.assertGreaterEqual(counts.with_signal, 2)

    def test_with_batch_size_unset_the_trainers_batch_bounds_the_groups_ahead(self):
        """Issue 56: `batch_size` -1 (the default) left the off-policy bound unapplied, and a
        6-step run had all its groups made from the base weights. The trainer's batch (run-api's
        `/info`, 4 sequences: 2 groups of 2) and `max_batches_offpolicy` 1 allow 2 groups ahead."""
        adapter = FakeAdapter()
        with FakeRunApi(total_steps=6, waits=0, batch_size=4, holds_groups=True) as run_api:
            run = config.RunSettings(
                group_size=2, total_steps=6, batch_size=-1, max_num_workers=8,
                max_batches_offpolicy=1, rollout_server_url=run_api.url,
            )
            endpoint = Endpoint("http://127.0.0.1:9/v1", "m", "k", training=True)
            said = []

            async def go():
                serving = asyncio.ensure_future(serve(adapter, run, endpoint, TaskDraw(adapter, split()), GroupCounts(None), said.append))
                deadline = time.monotonic() + 10
                while len(run_api.groups) < 2 and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                await asyncio.sleep(1.5)  # several status polls: no third group may start
                serving.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await serving

            asyncio.run(go())
            self.assertEqual(len(run_api.groups), 2)
        self.assertTrue(any("batches of 4" in line for line in said), said)

    def test_serve_sends_no_alike_group_and_waits_for_the_go_file(self):
        adapter = FakeAdapter(alike=True)
        with FakeRunApi(total_steps=1, waits=0) as run_api, tempfile.TemporaryDirectory() as folder:
            go_file = os.path.join(folder, "go")
            run = config.RunSettings(group_size=2, total_steps=1, batch_size=2, max_num_workers=1, rollout_server_url=run_api.url)
            counts = GroupCounts(None)
            endpoint = Endpoint("http://127.0.0.1:9/v1", "m", "k", training=True)

            async def go():
                serving = asyncio.ensure_future(serve(adapter, run, endpoint, TaskDraw(adapter, split()), counts, lambda line: None, go_file=go_file))
                await asyncio.sleep(0.5)
                registered_early = bool(run_api.registrations)
                with open(go_file, "w"):
                    pass
                while counts.alike < 3:
                    await asyncio.sleep(0.05)
                registered = bool(run_api.registrations)
                run_api.groups.append({})  # the trainer moves on by itself
                return registered_early, registered, await asyncio.wait_for(serving, 30)

            registered_early, registered, code = asyncio.run(go())
            self.assertEqual([group for group in run_api.groups if group], [])
        self.assertFalse(registered_early)
        self.assertTrue(registered)
        self.assertEqual(code, 0)

    def test_groups_abandoned_after_worker_timeout_refresh_updated_not_last_sent(self):
        """The stalling-sum case: a group is sent, then groups hang and are abandoned as failed;
        the file says when the last was sent, apart from when the last ended."""
        adapter = HangingAdapter(sent_first=1)
        with FakeRunApi(total_steps=2, waits=0) as run_api, tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "groups.json")
            run = config.RunSettings(group_size=2, total_steps=2, batch_size=2, max_num_workers=1, worker_timeout=0.2, rollout_server_url=run_api.url)
            counts = GroupCounts(path)
            endpoint = Endpoint("http://127.0.0.1:9/v1", "m", "k", training=True)

            async def go():
                serving = asyncio.ensure_future(serve(adapter, run, endpoint, TaskDraw(adapter, split()), counts, lambda line: None))
                deadline = time.monotonic() + 30
                while counts.failed < 2:
                    self.assertFalse(serving.done(), "serve ended before two groups timed out")
                    self.assertLess(time.monotonic(), deadline, "no group timed out")
                    await asyncio.sleep(0.05)
                with open(path) as f:
                    written = json.load(f)
                run_api.groups.append({})  # the trainer moves on by itself
                return written, await asyncio.wait_for(serving, 30)

            written, code = asyncio.run(go())
            sent = [group for group in run_api.groups if group]
        self.assertEqual(code, 0)
        self.assertEqual(len(sent), 1)
        self.assertEqual((written["made"], written["with_signal"]), (1, 1))
        self.assertGreaterEqual(written["failed"], 2)
        self.assertIn("longer than worker_timeout (0.2 s)", written["errors"]["rollout"]["first"])
        self.assertIsNotNone(written["last_sent"])
        self.assertGreater(written["updated"], written["last_sent"])

    def test_process_writes_one_line_per_group_text_only(self):
        adapter = FakeAdapter(count=5)
        with tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "groups.jsonl")
            run = config.RunSettings(group_size=3, total_steps=4, max_num_workers=2, data_path_to_save_groups=out)
            endpoint = Endpoint("http://127.0.0.1:9/v1", "m", "k", training=False)
            code = asyncio.run(process(adapter, run, endpoint, TaskDraw(adapter, split()), GroupCounts(None), lambda line: None))
            lines = read_lines(out)
        self.assertEqual(code, 0)
        self.assertEqual(len(lines), 4)
        self.assertEqual(sorted(lines[0]["scores"]), [0.0, 1 / 3, 2 / 3])
        self.assertEqual(len(lines[0]["messages"]), 3)
        self.assertFalse(any(training for _, _, training, _ in adapter.groups))

    def test_process_gives_up_on_a_failing_model_naming_the_error(self):
        adapter = FakeAdapter(fail=True)
        with tempfile.TemporaryDirectory() as folder:
            run = config.RunSettings(group_size=2, total_steps=2, data_path_to_save_groups=os.path.join(folder, "o.jsonl"))
            counts = GroupCounts(None)
            endpoint = Endpoint("http://127.0.0.1:9/v1", "m", "k", training=False)
            with self.assertRaises(ProcessError) as ctx:
                asyncio.run(process(adapter, run, endpoint, TaskDraw(adapter, split()), counts, lambda line: None))
        self.assertIn("ModelError: the model is down", str(ctx.exception))
        self.assertEqual(len(adapter.groups), 2 * 3)
        self.assertEqual(counts.failed, 6)


class DrawTests(unittest.TestCase):
    def draw_all(self, draw, limit=50):
        async def go():
            keys = []
            for _ in range(limit):
                task = await draw.next()
                if task is None:
                    break
                keys.append(task.key)
            return keys

        return asyncio.run(go())

    def test_training_goes_round_and_held_out_takes_its_slice_once(self):
        adapter = FakeAdapter(count=40)
        training = self.draw_all(TaskDraw(adapter, split(TRAINING, 0.3)), limit=100)
        held_out = self.draw_all(TaskDraw(adapter, split(HELD_OUT, 0.3)))
        self.assertEqual(len(training), 100)
        self.assertTrue(held_out)
        self.assertEqual(len(set(held_out)), len(held_out))
        self.assertFalse(set(training) & set(held_out))
        self.assertEqual(len(set(training)) + len(held_out), 40)

    def test_an_eval_split_of_its_own_is_the_held_out_tasks(self):
        adapter = FakeAdapter(count=3, eval_count=2)
        self.assertEqual(self.draw_all(TaskDraw(adapter, split(HELD_OUT, 0.0))), ["eval-0", "eval-1"])
        self.assertEqual(self.draw_all(TaskDraw(adapter, split(TRAINING, 0.2)), limit=4), ["task-0", "task-1", "task-2", "task-0"])


class EntryTests(unittest.TestCase):
    def test_the_module_is_what_rl_says_else_the_file(self):
        self.assertEqual(module_of("/envs/pkg/reverse_text.py", {}), ("/envs/pkg", "reverse_text"))
        self.assertEqual(module_of("/envs/pkg/__init__.py", {}), ("/envs", "pkg"))
        self.assertEqual(module_of("/x.py", {"RL_ENV_MODULE": "m", "RL_ENV_ROOT": "/r"}), ("/r", "m"))

    def test_rl_env_hands_a_verifiers_kind_to_rl_verifiers_and_refuses_an_unknown_one(self):
        env = dict(os.environ, PYTHONPATH=PROGRAMS, RL_ENV_KIND="verifiers-v9")
        result = subprocess.run(
            [sys.executable, "-m", "rl_env", "/nowhere/env.py", "process"], env=env, capture_output=True, text=True, timeout=60
        )
        self.assertEqual(result.returncode, 2)
        self.assertIn("RL_ENV_KIND is 'verifiers-v9'", result.stderr.strip().splitlines()[-1])

    def test_an_environment_that_cannot_import_ends_with_one_line(self):
        with tempfile.TemporaryDirectory() as folder:
            env_file = os.path.join(folder, "broken_env.py")
            with open(env_file, "w") as f:
                f.write("import no_such_module_anywhere\n")
            env = dict(os.environ, PYTHONPATH=PROGRAMS, RL_ENV_KIND="verifiers-v0")
            result = subprocess.run(
                [sys.executable, "-m", "rl_env", env_file, "process", "--openai.base_url", "http://127.0.0.1:9/v1",
                 "--openai.model_name", "m"],
                env=env, capture_output=True, text=True, timeout=60,
            )
        self.assertEqual(result.returncode, 2)
        last = result.stderr.strip().splitlines()[-1]
        self.assertIn("broken_env", last)
        self.assertIn("ModuleNotFoundError", last)


if __name__ == "__main__":
    unittest.main()


class ToolRenderingTests(unittest.TestCase):
    """The rule (issue 56 #2), pure: a rendering that shows no tool refuses an environment that
    has tools, with how it renders and the fix; one that shows them, no tools, or a rendering
    that is not rl's (None) refuse nothing."""

    def rendering(self, shows):
        from rl_verifiers.tool_rendering import Rendering

        def render(messages, tools, add_generation_prompt):
            listed = "".join(f"<{t['function']['name']}>" for t in tools or []) if shows else ""
            return listed + "".join(m["content"] for m in messages)

        return Rendering(how="the template of tiny", render=render, fix="use another model")

    def test_the_rule(self):
        from rl_verifiers.tool_rendering import refusal, verdict

        reason = refusal("env", ["a", "b"], self.rendering(shows=False))
        self.assertEqual(
            reason,
            "env gives the model tools (a, b), but the template of tiny renders no tools into the prompt: "
            "the model would never see them (a run would train without them, and rl's chat route "
            "refuses them in every pre-flight, comparison and served request). Use another model",
        )
        self.assertIsNone(refusal("env", ["a"], self.rendering(shows=True)))
        self.assertIsNone(refusal("env", [], self.rendering(shows=False)))
        self.assertIsNone(refusal("env", ["a"], None))
        hidden = self.rendering(shows=False)
        answer = json.loads(verdict(["a"], hidden, refusal("env", ["a"], hidden)))
        self.assertEqual(answer["refused"], reason.replace("(a, b)", "(a)"))
        self.assertEqual(answer["rendering"], "the template of tiny")
        self.assertEqual(json.loads(verdict([], None, None)), {"tools": [], "rendering": None, "refused": None, "chat_template_of": None})
