"""The v0 adapter against the real verifiers 0.3.x and rl's fixture environment
(fixtures/verifiers/reverse-text), with a fake OpenAI-compatible endpoint and a fake run-api
on 127.0.0.1: the adapter itself, then `process` and `serve` end to end through
`python -m rl_env`. Run in a verifiers v0 Python:

    cd crates/rl-python/python && ../../../target/vf0-venv/bin/python -m unittest tests.test_verifiers_v0

Elsewhere (the test venv has no verifiers) every test here is skipped, saying so."""

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

# Datasets' progress bars (one per dataset the fixture maps) would bury the test's own output.
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

from tests.verifiers_fakes import FakeChat, FakeRunApi, find, read_lines, run_config

PROGRAMS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(PROGRAMS))), "fixtures", "verifiers", "reverse-text")
ENV_FILE = os.path.join(FIXTURE, "reverse_text.py")


def verifiers_v0() -> bool:
    if importlib.util.find_spec("verifiers") is None:
        return False
    from importlib.metadata import version

    return version("verifiers").startswith("0.3.")


NEEDS = "needs verifiers 0.3.x (the v0 API): run with target/vf0-venv/bin/python"


def fixture_adapter(**own_args):
    if FIXTURE not in sys.path:
        sys.path.insert(0, FIXTURE)
    import reverse_text

    from rl_verifiers.legacy import open_adapter

    adapter = open_adapter(reverse_text)
    adapter.load(own_args)
    return adapter


def rl_env(args, timeout=180, **variables):
    env = dict(os.environ, PYTHONPATH=PROGRAMS, RL_ENV_KIND="verifiers-v0", **variables)
    for name in ("RL_ITEMS", "RL_HELD_OUT_FRACTION", "RL_ENV_GO_FILE", "RL_ENV_MODULE", "RL_ENV_ROOT", "RL_RUN_DIR"):
        if name not in variables:
            env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "rl_env", ENV_FILE, *args], env=env, capture_output=True, text=True, timeout=timeout)


@unittest.skipUnless(verifiers_v0(), NEEDS)
class AdapterTests(unittest.TestCase):
    def run_group(self, adapter, chat, training, size=4):
        from rl_verifiers.adapter import Endpoint

        task = next(iter(adapter.tasks()))

        async def go():
            async with adapter.serving():
                endpoint = Endpoint(chat.url + "/v1", "tiny", "sk-test", training=training)
                return await adapter.run_group(task, size, endpoint, {"max_tokens": 32, "temperature": 1.0})

        return task, asyncio.run(go())

    def test_own_fields_tasks_and_eval_split_are_the_environments(self):
        adapter = fixture_adapter(num_examples=5, eval_examples=2)
        self.assertEqual(adapter.own_fields()["num_examples"], 32)
        self.assertEqual(adapter.own_fields()["min_length"], 3)
        tasks = list(adapter.tasks())
        self.assertEqual(len(tasks), 5)
        self.assertEqual(len(list(adapter.eval_tasks())), 2)
        self.assertEqual(tasks[0].payload["prompt"][-1]["content"][::-1], tasks[0].payload["answer"])
        self.assertEqual([t.key for t in fixture_adapter(num_examples=5).tasks()], [t.key for t in tasks])
        self.assertIsNone(fixture_adapter(num_examples=5).eval_tasks())

    def test_a_training_group_carries_token_ids_logprobs_and_graded_rewards(self):
        adapter = fixture_adapter(num_examples=4)
        with FakeChat() as chat:
            task, rollouts = self.run_group(adapter, chat, training=True)
            requests = list(chat.requests)
        body = requests[0]["body"]
        self.assertIs(body["logprobs"], True)
        self.assertIs(body["return_token_ids"], True)
        self.assertEqual(body["max_completion_tokens"], 32)
        self.assertEqual(requests[0]["authorization"], "Bearer sk-test")
        self.assertEqual(len(rollouts), 4)
        self.assertEqual({r.error for r in rollouts}, {None})
        self.assertGreater(len({r.reward for r in rollouts}), 1, "the graded reward tells the answers apart")
        for rollout in rollouts:
            self.assertEqual(set(rollout.rewards), {"similarity", "exact", "num_turns"})
            (branch,) = rollout.sequences
            completion = rollout.messages[-1]["content"]
            self.assertEqual(branch.tokens[-len(completion):], list(completion.encode()))
            self.assertEqual(branch.masks[-len(completion):], list(completion.encode()))
            self.assertTrue(all(mask == -100 for mask in branch.masks[: -len(completion)]))
            self.assertEqual(branch.logprobs[-1], -0.5)
            self.assertEqual(branch.logprobs[0], 1.0)

    def test_tools_are_named_and_their_template_left_to_the_trainers_python(self):
        """issue 56 #2: a v0 run's turns are rendered by the trainer's chat template (its token
        routes); this Python has no transformers to apply it, so the check names the tokenizer
        for rl to ask the trainer's Python, and a run's load goes on (the trainer's chat route
        refuses, rollout by rollout, tools its template cannot render)."""
        import contextlib
        import io

        from rl_verifiers.adapter import Endpoint
        from rl_verifiers.legacy import open_adapter
        from rl_verifiers.tool_rendering import at_load
        from tests import vf0_tool_env

        self.assertEqual(fixture_adapter(num_examples=2).tool_names(), [])
        adapter = open_adapter(vf0_tool_env)
        adapter.load({})
        self.assertEqual(adapter.tool_names(), ["add"])
        endpoint = Endpoint("http://127.0.0.1:9/v1", "tiny", "k", True, "/models/tiny")
        said, printed = [], io.StringIO()
        with contextlib.redirect_stdout(printed):
            self.assertEqual(at_load(adapter, endpoint, checking=True, say=said.append), 0)
        self.assertEqual(
            json.loads(printed.getvalue()),
            {"tools": ["add"], "rendering": None, "refused": None, "chat_template_of": "/models/tiny"},
        )
        self.assertIsNone(at_load(adapter, endpoint, checking=False, say=said.append))
        self.assertEqual(said, [])
        self.assertIsNone(adapter.rendering(Endpoint("http://127.0.0.1:9/v1", "tiny", "k", False, "/models/tiny")))

    def test_a_text_only_group_asks_for_no_tokens(self):
        adapter = fixture_adapter(num_examples=4)
        with FakeChat() as chat:
            _, rollouts = self.run_group(adapter, chat, training=False, size=2)
            body = chat.requests[0]["body"]
        self.assertNotIn("return_token_ids", body)
        self.assertNotIn("logprobs", body)
        self.assertEqual([r.sequences for r in rollouts], [[], []])
        self.assertEqual(rollouts[0].messages[-1]["role"], "assistant")

    def test_a_failing_endpoint_fails_each_rollout_with_its_error(self):
        adapter = fixture_adapter(num_examples=4)
        with FakeChat(status=500) as chat:
            _, rollouts = self.run_group(adapter, chat, training=True, size=2)
        self.assertEqual(len(rollouts), 2)
        for rollout in rollouts:
            self.assertIsNotNone(rollout.error)
            self.assertIn("Error", rollout.error)

    def test_what_is_no_v0_environment_or_runs_in_prime_sandboxes_is_refused(self):
        import types

        from rl_verifiers.environment import LoadError
        from rl_verifiers.legacy import open_adapter, sandboxed_part

        with self.assertRaises(LoadError):
            open_adapter(types.ModuleType("no_loader"))
        module = types.ModuleType("returns_text")
        module.load_environment = lambda: "text"
        with self.assertRaises(LoadError) as ctx:
            open_adapter(module).load({})
        self.assertIn("not a verifiers Environment", str(ctx.exception))
        sandboxed = type("SandboxEnv", (), {"__module__": "verifiers.legacy.envs.sandbox_env"})
        mine = type("MyEnv", (sandboxed,), {})
        self.assertEqual(sandboxed_part(mine()), "MyEnv")
        group = type("EnvGroup", (), {})()
        group.envs = [object(), mine()]
        self.assertEqual(sandboxed_part(group), "MyEnv")
        self.assertIsNone(sandboxed_part(fixture_adapter(num_examples=2).env))

    def test_a_completion_style_environment_is_refused_naming_why(self):
        import types

        import verifiers as vf
        from datasets import Dataset

        from rl_verifiers.environment import LoadError
        from rl_verifiers.legacy import open_adapter

        module = types.ModuleType("completion_style")
        rows = Dataset.from_list([{"prompt": "2 + 2 =", "answer": "4"}])
        module.load_environment = lambda: vf.SingleTurnEnv(dataset=rows, message_type="completion", rubric=vf.Rubric())
        with self.assertRaises(LoadError) as ctx:
            open_adapter(module).load({})
        said = str(ctx.exception)
        self.assertIn("message_type='completion'", said)
        self.assertIn("refuses environments that are not chat", said)


@unittest.skipUnless(verifiers_v0(), NEEDS)
class EndToEndTests(unittest.TestCase):
    def test_process_writes_the_groups_a_preflight_reads(self):
        with FakeChat() as chat, tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "groups.jsonl")
            counts = os.path.join(folder, "counts.json")
            result = rl_env(
                ["process", "--env.total_steps", "3", "--env.group_size", "4", "--env.use_wandb", "false",
                 "--env.data_path_to_save_groups", out, "--env.num_examples", "8", "--env.max_num_workers", "2",
                 "--openai.base_url", chat.url + "/v1", "--openai.model_name", "tiny", "--openai.server_type", "openai",
                 "--openai.health_check", "false", "--openai.api_key", "None"],
                OPENAI_API_KEY="sk-from-variable", RL_GROUPS_FILE=counts,
            )
            self.assertEqual(result.returncode, 0, result.stderr)
            lines = read_lines(out)
            with open(counts) as f:
                counted = json.load(f)
            authorizations = {request["authorization"] for request in chat.requests}
        self.assertEqual(len(lines), 3)
        for line in lines:
            self.assertEqual(len(line["scores"]), 4)
            self.assertEqual(len(line["messages"]), 4)
            self.assertEqual(line["messages"][0][-1]["role"], "assistant")
        self.assertEqual(counted["made"], 3)
        self.assertEqual(authorizations, {"Bearer sk-from-variable"})

    def test_process_of_the_held_out_items_takes_the_environments_eval_split(self):
        with FakeChat() as chat, tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "groups.jsonl")
            report = os.path.join(folder, "items.json")
            result = rl_env(
                ["process", "--env.total_steps", "5", "--env.group_size", "2", "--env.data_path_to_save_groups", out,
                 "--env.num_examples", "8", "--env.eval_examples", "2",
                 "--openai.base_url", chat.url + "/v1", "--openai.model_name", "tiny"],
                RL_ITEMS="held-out", RL_HELD_OUT_FRACTION="0.1", RL_ITEMS_REPORT=report,
            )
            self.assertEqual(result.returncode, 0, result.stderr)
            lines = read_lines(out)
            with open(report) as f:
                items = json.load(f)
        self.assertEqual(len(lines), 2)
        self.assertEqual(items["source"], "eval split")
        self.assertTrue(items["exhausted"])

    def test_serve_trains_through_run_api_until_the_last_step(self):
        with FakeChat() as chat, FakeRunApi(total_steps=2, waits=1) as run_api, tempfile.TemporaryDirectory() as folder:
            config = os.path.join(folder, "run.yaml")
            counts = os.path.join(folder, "counts.json")
            run_config(config, run_api.url, chat.url, num_examples=8, total_steps=2)
            result = rl_env(["serve", "--config", config], RL_GROUPS_FILE=counts)
            self.assertEqual(result.returncode, 0, result.stderr)
            groups = list(run_api.groups)
            registration = find(run_api.requests, "/register-env")
            with open(counts) as f:
                counted = json.load(f)
            bodies = [request["body"] for request in chat.requests]
        self.assertGreaterEqual(len(groups), 2)
        group = groups[0]
        self.assertEqual(len(group["tokens"]), 4)
        self.assertEqual(group["env_id"], 0)
        self.assertEqual(group["group_overrides"]["rollout_of"], [0, 1, 2, 3])
        self.assertEqual(set(group["group_overrides"]["rewards"]), {"similarity", "exact", "num_turns"})
        for tokens, masks, logprobs in zip(group["tokens"], group["masks"], group["inference_logprobs"]):
            self.assertEqual(len(tokens), len(masks))
            self.assertEqual(len(tokens), len(logprobs))
            self.assertLess(len(tokens), 256)
        self.assertEqual(registration["body"]["group_size"], 4)
        self.assertEqual(registration["body"]["desired_name"], "reverse-test")
        self.assertGreaterEqual(counted["with_signal"], 2)
        self.assertTrue(all(body["return_token_ids"] and body["logprobs"] for body in bodies))

    def test_an_environment_that_cannot_load_ends_at_once_with_one_line(self):
        with tempfile.TemporaryDirectory() as folder:
            config = os.path.join(folder, "run.yaml")
            run_config(config, "http://127.0.0.1:9", "http://127.0.0.1:9", min_length=9, max_length=2)
            result = rl_env(["serve", "--config", config], timeout=120)
        self.assertEqual(result.returncode, 2)
        last = result.stderr.strip().splitlines()[-1]
        self.assertTrue(last.startswith("rl_verifiers: the environment cannot load: ValueError: min_length 9"), last)


if __name__ == "__main__":
    unittest.main()
