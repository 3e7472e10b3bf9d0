"""The verifiers v1 adapter against the real verifiers (>= 0.4) and rl's two v1 fixture
environments (fixtures/verifiers/digit-sum, unit-convert), each driven through a fake
model server on 127.0.0.1: `/inference/v1/generate` for training (token ids and
logprobs back), streamed `/v1/chat/completions` for pre-flight.

Needs the Python verifiers 0.4 is installed in (with `uv` beside it), e.g.
`target/vf1-venv/bin/python -m unittest tests.test_verifiers_v1` from
crates/rl-python/python; skipped with the reason elsewhere."""

import asyncio
import importlib.util
import json
import re
import shutil
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from rl_env import item_key

REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / "fixtures" / "verifiers"
TOKENIZER = REPO / "fixtures" / "tokenizer"


def why_not_runnable():
    try:
        if importlib.util.find_spec("verifiers.v1") is None:
            return f"verifiers.v1 is not importable in {sys.executable}"
    except ImportError as e:
        return f"verifiers.v1 is not importable in {sys.executable}: {e}"
    if importlib.util.find_spec("transformers") is None:
        return f"transformers is not importable in {sys.executable}"
    if shutil.which("uv", path=str(Path(sys.executable).parent)) is None and shutil.which("uv") is None:
        return "no `uv` beside this Python (verifiers' null harness prepares its program with it)"
    return None


SKIP_REASON = why_not_runnable()
# Logprob the fake sampler reports for every sampled token: any value a prompt position
# never carries (those are 1.0).
SAMPLED_LOGPROB = -0.25
# The chat template that renders tools and Hermes calls (`fixtures/tokenizer`, also the one the
# engine tests' tiny model wears), and the two tokens the hermes-style (`qwen3`) tool parser
# looks for, added to rl's fixture tokenizer for the tool test.
TOOL_TEMPLATE = (TOKENIZER / "tools_chat_template.jinja").read_text(encoding="utf-8")
TOOL_RENDERER = {"name": "default", "tool_parser": "qwen3"}


class FakeModelServer:
    """A model endpoint on 127.0.0.1 that answers with `reply(request_body) -> text or
    ("tool", name, arguments)` and records every request (method, path, body, headers)."""

    def __init__(self, reply, tokenizer=None, fail=None):
        self.reply, self.tokenizer, self.fail = reply, tokenizer, fail
        self.requests = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def send_json(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                fake.record("GET", self.path, None, self.headers)
                self.send_json(404, {"error": {"message": "not served here"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.record("POST", self.path, body, self.headers)
                if fake.fail is not None:
                    return self.send_json(*fake.fail)
                if self.path == "/inference/v1/generate":
                    return self.send_json(200, fake.generate(body))
                if self.path == "/v1/chat/completions":
                    return self.chat(body)
                self.send_json(404, {"error": {"message": f"no route {self.path}"}})

            def chat(self, body):
                reply = fake.reply(body)
                if isinstance(reply, tuple):
                    _, name, arguments = reply
                    delta = {"role": "assistant", "content": None, "tool_calls": [
                        {"index": 0, "id": "call_1", "type": "function",
                         "function": {"name": name, "arguments": json.dumps(arguments)}}]}
                    finish = "tool_calls"
                else:
                    delta, finish = {"role": "assistant", "content": reply}, "stop"
                head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": body["model"]}
                chunks = [
                    {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                    {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                    {**head, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}},
                ]
                if not body.get("stream"):
                    raise AssertionError("verifiers' chat program is expected to stream")
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in chunks:
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def record(self, method, path, body, headers):
        with self.lock:
            self.requests.append((method, path, body, dict(headers)))

    def generate(self, body):
        tok = self.tokenizer
        reply = self.reply(body)
        if isinstance(reply, tuple):
            _, name, arguments = reply
            reply = "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"
        ids = tok.encode(reply, add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
        return {
            "request_id": "gen-1",
            "prompt_token_ids": body["token_ids"],
            "choices": [{
                "token_ids": ids,
                "logprobs": {"content": [{"token": f"token_id:{i}", "logprob": SAMPLED_LOGPROB} for i in ids]},
                "finish_reason": "stop",
            }],
        }

    def posts(self, path):
        with self.lock:
            return [r for r in self.requests if r[0] == "POST" and r[1] == path]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def prompt_text(tokenizer, body):
    """The conversation the model is asked to continue, as text (either route)."""
    if "token_ids" in body:
        return tokenizer.decode(body["token_ids"], skip_special_tokens=False)
    return "\n".join(
        f"{m['role']}: {m.get('content') or ''}" for m in body["messages"]
    )


def open_fixture(name, own_args, environ=None):
    """The fixture's adapter as rl_verifiers opens it (its module imported from its folder),
    loaded with `own_args`."""
    from rl_verifiers.v1 import open_adapter

    root = str(FIXTURES / name)
    if root not in sys.path:
        sys.path.insert(0, root)
    adapter = open_adapter(importlib.import_module(name.replace("-", "_")), environ or {})
    adapter.load(own_args)
    return adapter


def timed(label, start):
    print(f"[timing] {label}: {time.monotonic() - start:.1f} s", file=sys.stderr)


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class DigitSumTest(unittest.TestCase):
    """Single turn: one sequence per rollout, graded rewards."""

    @classmethod
    def setUpClass(cls):
        from transformers import AutoTokenizer

        cls.tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER))
        start = time.monotonic()
        cls.adapter = open_fixture("digit-sum", {"num_tasks": "6", "max_digits": 3})
        timed("loading digit-sum", start)
        cls.tasks = list(cls.adapter.tasks())

    def run_group(self, reply, training, size=2, task=0, **server):
        from rl_verifiers.adapter import Endpoint

        fake = FakeModelServer(reply, self.tokenizer, **server)
        self.addCleanup(fake.close)
        endpoint = Endpoint(fake.base_url, "policy", "sk-fake", training, str(TOKENIZER) if training else None)

        async def go():
            async with self.adapter.serving():
                start = time.monotonic()
                rollouts = await self.adapter.run_group(
                    self.tasks[task], size, endpoint, {"max_tokens": 24, "temperature": 1.0, "top_p": None}
                )
                timed(f"one group of {size} ({'training' if training else 'pre-flight'})", start)
                return rollouts

        return asyncio.run(asyncio.wait_for(go(), 300)), fake

    def expected_reward(self, reply):
        answer = self.tasks[0].payload.data.answer
        guess = int(re.findall(r"\d+", reply)[-1])
        closeness = 1.0 / (1.0 + abs(guess - answer) / max(1, answer))
        digits = sum(c.isdigit() for c in reply.replace(" ", "")) / len(reply.replace(" ", ""))
        return float(guess == answer) + 0.5 * closeness + 0.25 * digits

    def test_a_taskset_without_tools_names_none(self):
        self.assertEqual(self.adapter.tool_names(), [])

    def test_own_fields_are_the_taskset_configs(self):
        fields = self.adapter.own_fields()
        self.assertEqual((fields["num_tasks"], fields["max_digits"], fields["seed"]), (32, 4, 0))
        self.assertNotIn("id", fields)

    def test_tasks_come_from_the_config_with_content_keys(self):
        self.assertEqual(len(self.tasks), 6)  # "6" coerced by the config's type
        keys = [t.key for t in self.tasks]
        self.assertEqual(keys, [t.key for t in self.adapter.tasks()])
        self.assertEqual(len(set(keys)), len({t.payload.data.number for t in self.tasks}))
        data = self.tasks[0].payload.data
        self.assertEqual(data.answer, sum(int(d) for d in str(data.number)))
        # The key is the content's, not the position's.
        self.assertEqual(keys[0], item_key(data.model_dump(mode="json", exclude_none=True, exclude={"idx"})))

    def test_unknown_own_field_is_refused(self):
        from rl_verifiers.environment import LoadError

        with self.assertRaisesRegex(LoadError, "num_taks: not a field of DigitSumConfig"):
            open_fixture("digit-sum", {"num_taks": 3})

    def test_a_package_without_a_taskset_is_refused(self):
        from rl_verifiers.environment import LoadError
        from rl_verifiers.v1 import V1Adapter

        with self.assertRaisesRegex(LoadError, "digit_sum.taskset is not a verifiers v1 taskset package"):
            V1Adapter("digit_sum.taskset")

    def test_training_group_gives_masked_sequences_and_graded_rewards(self):
        answer = self.tasks[0].payload.data.answer
        replies = iter([str(answer), f"about {answer + 3}"])
        lock = threading.Lock()

        def reply(body):
            with lock:
                return next(replies)

        rollouts, fake = self.run_group(reply, training=True)
        self.assertEqual([r.error for r in rollouts], [None, None])
        self.assertEqual(
            sorted(r.reward for r in rollouts),
            sorted([self.expected_reward(str(answer)), self.expected_reward(f"about {answer + 3}")]),
        )
        best = max(rollouts, key=lambda r: r.reward)
        self.assertEqual(best.rewards["correct"], 1.0)
        self.assertEqual(set(best.rewards), {"correct", "closeness", "digits_only", "reply_chars"})
        generate = fake.posts("/inference/v1/generate")
        self.assertEqual(len(generate), 2)
        for rollout in rollouts:
            self.assertEqual(len(rollout.sequences), 1)
            seq = rollout.sequences[0]
            prompt = generate[0][2]["token_ids"]
            completion = self.tokenizer.encode(rollout.messages[-1]["content"], add_special_tokens=False) + [2]
            self.assertEqual(seq.tokens, prompt + completion)
            self.assertEqual(seq.masks, [-100] * len(prompt) + completion)
            self.assertEqual(seq.logprobs, [1.0] * len(prompt) + [SAMPLED_LOGPROB] * len(completion))
            self.assertEqual([m["role"] for m in seq.messages], ["system", "user", "assistant"])
            self.assertFalse(rollout.truncated)
        _, _, body, headers = generate[0]
        self.assertEqual(body["model"], "policy")
        self.assertEqual(headers["Authorization"], "Bearer sk-fake")
        self.assertEqual(body["sampling_params"]["max_tokens"], 24)
        self.assertEqual(body["sampling_params"]["logprobs"], 1)
        self.assertEqual(body["sampling_params"]["stop_token_ids"], [2])

    def test_preflight_group_streams_chat_and_scores_text(self):
        answer = self.tasks[0].payload.data.answer
        rollouts, fake = self.run_group(lambda body: f"It is {answer}", training=False)
        for rollout in rollouts:
            self.assertIsNone(rollout.error)
            self.assertEqual(rollout.sequences, [])
            self.assertAlmostEqual(rollout.reward, self.expected_reward(f"It is {answer}"))
            self.assertEqual(rollout.messages[-1], {"role": "assistant", "content": f"It is {answer}"})
        chat = fake.posts("/v1/chat/completions")
        self.assertEqual(len(chat), 2)
        self.assertEqual(chat[0][2]["messages"][-1]["content"], self.tasks[0].payload.data.prompt)
        self.assertEqual(chat[0][3]["Authorization"], "Bearer sk-fake")

    def test_a_failing_endpoint_is_each_rollouts_error(self):
        rollouts, _ = self.run_group(lambda body: "1", training=True, fail=(400, {"error": {"message": "no"}}))
        self.assertEqual(len(rollouts), 2)
        for rollout in rollouts:
            self.assertIsNotNone(rollout.error)
            self.assertEqual(rollout.sequences, [])
            self.assertEqual(rollout.reward, 0.0)


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class UnitConvertTest(unittest.TestCase):
    """Multi-turn with a tool: the model calls `convert`, then answers."""

    @classmethod
    def setUpClass(cls):
        from transformers import AutoTokenizer

        cls.folder = tempfile.mkdtemp(prefix="rl-vf1-tokenizer-")
        tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER))
        tokenizer.add_special_tokens({"additional_special_tokens": ["<tool_call>", "</tool_call>"]})
        tokenizer.chat_template = TOOL_TEMPLATE
        tokenizer.save_pretrained(cls.folder)
        cls.tokenizer = AutoTokenizer.from_pretrained(cls.folder)
        start = time.monotonic()
        cls.adapter = open_fixture("unit-convert", {"num_tasks": 3}, {"RL_VERIFIERS_RENDERER": json.dumps(TOOL_RENDERER)})
        timed("loading unit-convert", start)
        cls.tasks = list(cls.adapter.tasks())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.folder, ignore_errors=True)

    def reply(self, body):
        """Call the tool first; once a tool result is in the conversation, answer with it."""
        text = prompt_text(self.tokenizer, body)
        if "token_ids" in body:
            results = re.findall(r"<tool_response>(.*?)</tool_response>", text, re.S)
        else:
            results = [m.get("content") for m in body["messages"] if m["role"] == "tool"]
        if results:
            return str(results[-1])
        value, from_unit, to_unit = re.findall(r"Convert (\S+) (\w+) to (\w+)\.", text)[-1]
        return ("tool", "convert", {"value": float(value), "from_unit": from_unit, "to_unit": to_unit})

    def run_group(self, training):
        from rl_verifiers.adapter import Endpoint

        fake = FakeModelServer(self.reply, self.tokenizer)
        self.addCleanup(fake.close)
        endpoint = Endpoint(fake.base_url, "policy", "sk-fake", training, self.folder if training else None)

        async def go():
            async with self.adapter.serving():
                start = time.monotonic()
                rollouts = await self.adapter.run_group(self.tasks[0], 2, endpoint, {"max_tokens": 64})
                timed(f"one tool group of 2 ({'training' if training else 'pre-flight'})", start)
                return rollouts

        return asyncio.run(asyncio.wait_for(go(), 300)), fake

    def test_the_tool_is_named_and_its_rendering_decides_the_start(self):
        """issue 56 #2: the training renderer is asked whether the prompt shows the tools; the
        fixture tokenizer's own template shows none (refused, the fix named), the tool test's
        template does, and an eval endpoint's prompts are its own to render."""
        from rl_verifiers.adapter import Endpoint
        from rl_verifiers.tool_rendering import refusal

        self.assertEqual(self.adapter.tool_names(), ["convert"])
        shown = self.adapter.rendering(Endpoint("http://127.0.0.1:9/v1", "policy", "k", True, self.folder))
        self.assertIn("(its chat template)", shown.how)
        tool = {"type": "function", "function": {"name": "convert", "description": "d", "parameters": {"type": "object", "properties": {"value": {}}}}}
        self.assertIn("Tools: convert(value)", shown.render([{"role": "user", "content": "hi"}], [tool], True))
        self.assertIsNone(refusal("unit-convert", self.adapter.tool_names(), shown))
        hidden = self.adapter.rendering(Endpoint("http://127.0.0.1:9/v1", "policy", "k", True, str(TOKENIZER)))
        reason = refusal("unit-convert", self.adapter.tool_names(), hidden)
        self.assertIn("unit-convert gives the model tools (convert), but the renderer `default` of", reason)
        self.assertIn("renders no tools into the prompt", reason)
        self.assertIn("RL_VERIFIERS_RENDERER", reason)
        self.assertIsNone(self.adapter.rendering(Endpoint("http://127.0.0.1:9/v1", "policy", "k", False, None)))

    def test_a_typed_renderer_must_render_as_the_chat_template_does(self):
        """A typed renderer (`qwen3`) renders tools its own way; with a model whose template
        renders them otherwise, a comparison (rl's chat route: the template) would ask other
        prompts than training did: refused, the difference shown. A typed renderer that cannot
        be made for the tokenizer (a special token missing) is refused with its error."""
        import contextlib
        import io

        from transformers import AutoTokenizer

        from rl_verifiers.adapter import Endpoint
        from rl_verifiers.tool_rendering import at_load, refusal

        typed = open_fixture("unit-convert", {"num_tasks": 3}, {"RL_VERIFIERS_RENDERER": json.dumps({"name": "qwen3"})})
        folder = tempfile.mkdtemp(prefix="rl-vf1-qwen3-tokens-")
        self.addCleanup(shutil.rmtree, folder, True)
        tokenizer = AutoTokenizer.from_pretrained(self.folder)
        tokenizer.add_special_tokens({"additional_special_tokens": ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]})
        tokenizer.save_pretrained(folder)
        reason = refusal("unit-convert", typed.tool_names(), typed.rendering(Endpoint("http://127.0.0.1:9/v1", "p", "k", True, folder)))
        self.assertIn("the renderer `qwen3` of", reason)
        self.assertIn("renders a prompt with tools otherwise than the model's chat template", reason)
        self.assertIn("'<|im_start|>system\\n# Tools", reason)
        self.assertIn("Tools: rl_probe_tool()", reason)

        said, printed = [], io.StringIO()
        with contextlib.redirect_stdout(printed):
            ended = at_load(typed, Endpoint("http://127.0.0.1:9/v1", "p", "k", True, self.folder), checking=True, say=said.append)
        self.assertEqual(ended, 0)
        verdict = json.loads(printed.getvalue())
        self.assertIn("cannot be rendered as the run's client would: AssertionError: Special token '<tool_response>' not found", verdict["refused"])
        self.assertIn("RL_VERIFIERS_RENDERER", verdict["refused"])

    def test_own_fields(self):
        fields = self.adapter.own_fields()
        self.assertEqual((fields["num_tasks"], fields["max_value"]), (16, 100))
        self.assertEqual(len(self.tasks), 3)

    def test_training_group_trains_every_sampled_turn(self):
        rollouts, fake = self.run_group(training=True)
        self.assertEqual(len(fake.posts("/inference/v1/generate")), 4)  # two turns each
        for rollout in rollouts:
            self.assertIsNone(rollout.error)
            self.assertEqual(rollout.rewards["tool_calls"], 1.0)
            self.assertEqual(rollout.rewards["correct"], 1.0)
            self.assertAlmostEqual(rollout.reward, 1.5)
            self.assertEqual([m["role"] for m in rollout.messages], ["system", "user", "assistant", "tool", "assistant"])
            self.assertEqual(rollout.messages[2]["tool_calls"][0]["function"]["name"], "convert")
            sampled_spans = 0
            for seq in rollout.sequences:
                self.assertEqual(len(seq.tokens), len(seq.masks))
                self.assertEqual(len(seq.tokens), len(seq.logprobs))
                for token, mask, logprob in zip(seq.tokens, seq.masks, seq.logprobs):
                    self.assertIn((mask, logprob), [(-100, 1.0), (token, SAMPLED_LOGPROB)])
                self.assertEqual(seq.masks[-1], 2)  # every branch ends in a sampled turn's end
                sampled_spans += sum(
                    1 for i, m in enumerate(seq.masks) if m != -100 and (i == 0 or seq.masks[i - 1] == -100)
                )
            # Both turns' sampled tokens are trained on, in one branch or in two.
            self.assertEqual(sampled_spans, 2)
            tool_call = self.tokenizer.convert_tokens_to_ids("<tool_call>")
            self.assertTrue(any(tool_call in [m for m in s.masks if m != -100] for s in rollout.sequences))

    def test_preflight_group_calls_the_tool(self):
        rollouts, fake = self.run_group(training=False)
        chat = fake.posts("/v1/chat/completions")
        self.assertEqual(len(chat), 4)
        self.assertEqual([t["function"]["name"] for t in chat[0][2]["tools"]], ["convert"])
        for rollout in rollouts:
            self.assertIsNone(rollout.error)
            self.assertEqual(rollout.sequences, [])
            self.assertEqual(rollout.rewards["tool_calls"], 1.0)
            self.assertAlmostEqual(rollout.reward, 1.5)


if __name__ == "__main__":
    unittest.main()


# Tasksets written by the tests below (no fixture of their own: each is a few lines).
ENDLESS_TASKSET = '''
import itertools
import verifiers.v1 as vf

class EndlessData(vf.TaskData):
    number: int

class EndlessTask(vf.Task[EndlessData]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(str(sum(int(d) for d in str(self.data.number))) in trace.last_reply)

class EndlessTaskset(vf.Taskset[EndlessTask, vf.TasksetConfig]):
    INFINITE = True

    def load(self):
        for number in itertools.count(10):
            yield EndlessTask(EndlessData(prompt=f"Sum the digits of {number}.", number=number), self.config.task)

__all__ = ["EndlessTaskset"]
'''
PICTURE_TASKSET = '''
import verifiers.v1 as vf

PIXEL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

class PictureTask(vf.Task[vf.TaskData]):
    @vf.reward(weight=1.0)
    async def answered(self, trace: vf.Trace) -> float:
        return float(bool(trace.last_reply))

class PictureTaskset(vf.Taskset[PictureTask, vf.TasksetConfig]):
    def load(self):
        text = vf.TextContentPart(text="How many dots?")
        image = vf.ImageUrlContentPart(image_url=vf.ImageUrlSource(url=PIXEL))
        for n in range(3):
            data = vf.TaskData(name=f"dots-{n}", prompt=[vf.UserMessage(content=[text, image])])
            yield PictureTask(data, self.config.task)

__all__ = ["PictureTaskset"]
'''


def written_taskset(test, name, source):
    """The adapter of taskset package `name` (its `__init__.py` is `source`) in a folder the
    test removes, loaded with no own settings."""
    from rl_verifiers.v1 import open_adapter

    folder = tempfile.mkdtemp()
    test.addCleanup(shutil.rmtree, folder, True)
    (Path(folder) / name).mkdir()
    (Path(folder) / name / "__init__.py").write_text(source)
    sys.path.insert(0, folder)
    test.addCleanup(sys.path.remove, folder)
    adapter = open_adapter(importlib.import_module(name), {})
    adapter.load({})
    return adapter


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class WhatRlTrainsTest(unittest.TestCase):
    """Tasksets beyond the fixtures': an endless one (`INFINITE`, a generator `load`) is drawn
    lazily and trains; one whose prompts hold images is refused as it loads."""

    def test_an_endless_taskset_loads_draws_without_end_and_trains(self):
        from transformers import AutoTokenizer

        from rl_env import HELD_OUT, TRAINING, Split
        from rl_verifiers.adapter import Endpoint
        from rl_verifiers.environment import TaskDraw

        adapter = written_taskset(self, "endless_sum_taskset", ENDLESS_TASKSET)
        self.assertFalse(adapter.env.taskset.bounded)

        async def draw(split, count):
            tasks = TaskDraw(adapter, split)
            return [await tasks.next() for _ in range(count)]

        training = asyncio.run(draw(Split(items=TRAINING, fraction=0.2, seed=0), 300))
        held_out = asyncio.run(draw(Split(items=HELD_OUT, fraction=0.2, seed=0), 20))
        numbers = [task.payload.data.number for task in training]
        self.assertEqual(len(set(numbers)), 300, "each drawn task is a new one")
        self.assertGreater(max(numbers), 300)
        self.assertFalse({t.key for t in training} & {t.key for t in held_out})
        self.assertEqual(len({t.key for t in held_out}), 20)

        tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER))
        answer = str(sum(int(d) for d in str(numbers[0])))
        fake = FakeModelServer(lambda body: answer, tokenizer)
        self.addCleanup(fake.close)
        endpoint = Endpoint(fake.base_url, "policy", "sk-fake", True, str(TOKENIZER))

        async def group():
            async with adapter.serving():
                return await adapter.run_group(training[0], 2, endpoint, {"max_tokens": 8, "temperature": 1.0})

        rollouts = asyncio.run(asyncio.wait_for(group(), 300))
        self.assertEqual([r.error for r in rollouts], [None, None])
        self.assertEqual([r.rewards["correct"] for r in rollouts], [1.0, 1.0])
        self.assertTrue(all(len(r.sequences) == 1 for r in rollouts))

    def test_a_taskset_whose_prompts_hold_images_is_refused_as_it_loads(self):
        import verifiers.v1 as vf

        from rl_verifiers.environment import LoadError
        from rl_verifiers.v1 import untrainable

        with self.assertRaisesRegex(LoadError, "task dots-0's prompt holds an image: rl trains text models only"):
            written_taskset(self, "picture_taskset", PICTURE_TASKSET)
        text = vf.TaskData(prompt=[vf.UserMessage(content=[vf.TextContentPart(text="hi")])])
        self.assertIsNone(untrainable(text))
        self.assertIsNone(untrainable(vf.TaskData(prompt="hi")))
