"""`stream: true` on the OpenAI routes, as verifiers 0.4 asks for it, on both servers that
answer it: rl's trainer (`rl_trainer.server`) and the fixture OpenAI server the pre-flight
tests use (`fixtures/openai-server/openai_server.py`).

What verifiers 0.4.0 sends and reads (target/vf1-venv/…/verifiers/v1/):
* its chat program (`harnesses/utils/core.py` `chat`) always posts `stream=True,
  stream_options={"include_usage": True}` with `model`, `messages` (and `tools` when it has
  some); the interception server overlays the rollout's model and sampling knobs
  (`dialects/chat.py` `apply_overrides`) and relays the body unchanged upstream
  (`clients/eval.py` `relay`);
* the interception server reads the upstream's events whole (`interception/server.py`
  `_collect_stream`): it fails without a `data: [DONE]` event, and assembles
  `choices[0].delta.content` / `reasoning*` / `tool_calls`, the last `finish_reason` and
  `usage` (`dialects/chat.py` `ChatStreamParser.feed`);
* the chat program reads the same events with the OpenAI SDK's `AsyncChatCompletionStream`
  and fails a stream whose choices have no `finish_reason` (`core.py` `_read_chat_completion`).
"""

import json
import os
import subprocess
import sys
import unittest
import urllib.error
import urllib.request

from fastapi.testclient import TestClient

from rl_trainer.sampling import ChatRequest, Sample, SamplingSpec, chat_response, parse_chat
from rl_trainer.server import create_app
from rl_trainer.streaming import DONE_EVENT, chat_chunks, completion_chunks, sse_body
from tests.test_server import FakeSamplingClient, make_policy
from tests.test_verifiers_routes import VF1_PYTHON, run_client, served

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE_SERVER = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "fixtures", "openai-server", "openai_server.py"))
SERVER_START_SECS = 30

#: The body verifiers 0.4's chat program posts (core.py `chat`: model, messages, stream,
#: stream_options) after the interception server's overlay of the rollout's sampling
#: (`apply_overrides`: here max_tokens and temperature).
VERIFIERS_BODY = {
    "model": "MODEL",
    "messages": [
        {"role": "system", "content": "Answer with a number."},
        {"role": "user", "content": "What is 4 + 6?"},
    ],
    "stream": True,
    "stream_options": {"include_usage": True},
    "max_tokens": 3,
    "temperature": 1.0,
}


def verifiers_body(model):
    return {**VERIFIERS_BODY, "model": model}


def events_of(raw: bytes):
    """The SSE events of a body: each `data:` payload, JSON decoded except `[DONE]`."""
    out = []
    for event in raw.split(b"\n\n"):
        data = b"\n".join(line[5:].strip() for line in event.splitlines() if line.startswith(b"data:"))
        if data:
            out.append("[DONE]" if data == b"[DONE]" else json.loads(data))
    return out


def assemble(events):
    """What verifiers' `ChatStreamParser` keeps of choice 0 (content, finish_reason, usage),
    and what every chunk must be for the OpenAI SDK (a chat.completion.chunk)."""
    content, finish, usage = [], None, None
    for chunk in events[:-1]:
        assert chunk["object"] == "chat.completion.chunk", chunk
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            if choice["index"] == 0:
                finish = choice.get("finish_reason") or finish
                if choice["delta"].get("content") is not None:
                    content.append(choice["delta"]["content"])
    return "".join(content), finish, usage


class FramingTests(unittest.TestCase):
    def answer(self, n=2, **flags):
        request = ChatRequest(messages=[], n=n, spec=SamplingSpec(), logprobs=True, model="m", **flags)
        samples = [Sample([ord("a"), ord("b")], [-0.5, -0.25], "stop"), Sample([ord("x")], [-1.0], "length")][:n]
        return chat_response(request, "m", [1, 2, 3], samples, lambda ts: "".join(map(chr, ts)), chr)

    def test_chat_chunks_per_choice_then_usage(self):
        answer = self.answer(return_token_ids=True)
        chunks = chat_chunks(answer, include_usage=True)
        shapes = [
            (c["choices"][0]["index"], sorted(c["choices"][0]["delta"]), c["choices"][0]["finish_reason"]) if c["choices"] else "usage"
            for c in chunks
        ]
        self.assertEqual(
            shapes,
            [
                (0, ["content", "role"], None), (0, ["content"], None), (0, [], "stop"),
                (1, ["content", "role"], None), (1, ["content"], None), (1, [], "length"),
                "usage",
            ],
        )
        self.assertEqual(chunks[1]["choices"][0]["delta"]["content"], "ab")
        self.assertEqual(chunks[1]["choices"][0]["logprobs"], answer["choices"][0]["logprobs"])
        self.assertEqual(chunks[1]["choices"][0]["token_ids"], [ord("a"), ord("b")])
        self.assertEqual(chunks[0]["prompt_token_ids"], [1, 2, 3])
        self.assertEqual(chunks[-1]["usage"], answer["usage"])
        self.assertTrue(all(c["usage"] is None for c in chunks[:-1]))  # OpenAI's: null until the last
        self.assertEqual({c["id"] for c in chunks}, {answer["id"]})

    def test_no_usage_chunk_unless_asked(self):
        chunks = chat_chunks(self.answer(n=1), include_usage=False)
        self.assertTrue(all(c["choices"] and "usage" not in c for c in chunks))
        body = sse_body(chunks)
        self.assertEqual(body[-1], DONE_EVENT)
        self.assertTrue(all(e.startswith(b"data: {") and e.endswith(b"\n\n") for e in body[:-1]))

    def test_completion_chunks(self):
        answer = {"id": "cmpl-1", "created": 1, "model": "m", "usage": {"total_tokens": 2},
                  "choices": [{"index": 0, "text": "t", "finish_reason": "stop", "logprobs": None}]}
        chunks = completion_chunks(answer, include_usage=True)
        self.assertEqual([c["object"] for c in chunks], ["text_completion"] * 2)
        self.assertEqual(chunks[0]["choices"], [{"index": 0, "text": "t", "logprobs": None, "finish_reason": "stop"}])
        self.assertEqual((chunks[1]["choices"], chunks[1]["usage"]), ([], {"total_tokens": 2}))

    def test_stream_fields_parsed_and_bad_ones_refused(self):
        messages = [{"role": "user", "content": "x"}]
        req = parse_chat({"messages": messages, "stream": True, "stream_options": {"include_usage": True}})
        self.assertEqual((req.stream, req.include_usage), (True, True))
        req = parse_chat({"messages": messages, "stream": True})
        self.assertEqual((req.stream, req.include_usage), (True, False))
        req = parse_chat({"messages": messages, "stream": None})
        self.assertEqual((req.stream, req.include_usage), (False, False))


class TrainerStreamTests(unittest.TestCase):
    def setUp(self):
        self.client = FakeSamplingClient()
        self.http = TestClient(create_app(make_policy(client=self.client)))

    def post(self, path, body):
        return self.http.post(path, json=body)

    def test_the_verifiers_request_streams_its_answer(self):
        r = self.post("/v1/chat/completions", verifiers_body("tiny"))
        self.assertEqual(r.status_code, 200, r.text)
        self.assertTrue(r.headers["content-type"].startswith("text/event-stream"))
        events = events_of(r.content)
        self.assertEqual(events[-1], "[DONE]")
        _, n, params = self.client.calls[-1]
        self.assertEqual((n, params.max_tokens), (1, 3))
        plain = self.post("/v1/chat/completions", {**verifiers_body("tiny"), "stream": False, "stream_options": None}).json()
        self.assertEqual(assemble(events), ("ab", "stop", plain["usage"]))

    def test_the_stream_says_what_the_plain_answer_says(self):
        body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "n": 2, "logprobs": True, "return_token_ids": True}
        plain = self.post("/v1/chat/completions", body).json()
        events = events_of(self.post("/v1/chat/completions", {**body, "stream": True}).content)
        self.assertEqual(events[-1], "[DONE]")
        for choice in plain["choices"]:
            mine = [c["choices"][0] for c in events[:-1] if c["choices"][0]["index"] == choice["index"]]
            self.assertEqual("".join(c["delta"].get("content", "") for c in mine), choice["message"]["content"])
            self.assertEqual([c["finish_reason"] for c in mine if c["finish_reason"]], [choice["finish_reason"]])
            self.assertEqual([c["logprobs"] for c in mine if c["logprobs"]], [choice["logprobs"]])
            self.assertEqual([c["token_ids"] for c in mine if "token_ids" in c], [choice["token_ids"]])
        self.assertEqual(events[0]["prompt_token_ids"], plain["prompt_token_ids"])
        self.assertFalse(any("usage" in c for c in events[:-1]))  # not asked

    def test_completions_stream(self):
        r = self.post("/v1/completions", {"prompt": ["p", "q"], "max_tokens": 3, "stream": True, "stream_options": {"include_usage": True}})
        self.assertEqual(r.status_code, 200, r.text)
        events = events_of(r.content)
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual([(c["choices"][0]["index"], c["choices"][0]["text"]) for c in events[:2]], [(0, "ab"), (1, "ab")])
        self.assertEqual(events[-2]["choices"], [])
        self.assertEqual(events[-2]["usage"]["completion_tokens"], 6)

    def test_bad_stream_fields_are_400(self):
        base = {"messages": [{"role": "user", "content": "x"}]}
        for path, extra in (
            ("/v1/chat/completions", {"stream": "yes"}),
            ("/v1/chat/completions", {"stream_options": {"include_usage": True}}),
            ("/v1/chat/completions", {"stream": False, "stream_options": {"include_usage": True}}),
            ("/v1/chat/completions", {"stream": True, "stream_options": {"include_usage": "yes"}}),
            ("/v1/chat/completions", {"stream": True, "stream_options": []}),
            ("/v1/completions", {"stream": "yes"}),
        ):
            body = {**({"prompt": "x"} if path == "/v1/completions" else base), **extra}
            with self.subTest(path=path, body=extra):
                r = self.post(path, body)
                self.assertEqual(r.status_code, 400, r.text)
                self.assertIn("stream", r.json()["error"]["param"])

    def test_failures_stay_http_statuses(self):
        http = TestClient(create_app(make_policy(ready=False)))
        r = http.post("/v1/chat/completions", json=verifiers_body("tiny"))
        self.assertEqual((r.status_code, r.headers["content-type"]), (503, "application/json"))

        class Broken(FakeSamplingClient):
            async def sample(self, **kwargs):
                raise RuntimeError("engine on fire")

        http = TestClient(create_app(make_policy(client=Broken())))
        r = http.post("/v1/chat/completions", json=verifiers_body("tiny"))
        self.assertEqual(r.status_code, 500)
        self.assertIn("engine on fire", r.json()["error"]["message"])


class FixtureServer:
    """openai_server.py on an ephemeral 127.0.0.1 port, with its request log."""

    def __init__(self, tmp):
        self.log = os.path.join(tmp, "requests.jsonl")
        self.proc = subprocess.Popen(
            [sys.executable, FIXTURE_SERVER, "--port", "0", "--log", self.log],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            self.close()
            raise AssertionError(f"the fixture server said {line!r}: {self.proc.stderr.read()[-2000:]}")
        self.base_url = line.removeprefix("listening on ")

    def post(self, path, body):
        request = urllib.request.Request(
            self.base_url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=SERVER_START_SECS) as r:
                return r.status, r.headers.get("Content-Type"), r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type"), e.read()

    def requests(self):
        with open(self.log, encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc.stdout.close()
        self.proc.stderr.close()


@unittest.skipUnless(os.path.exists(FIXTURE_SERVER), "fixtures/openai-server/openai_server.py not found")
class FixtureStreamTests(unittest.TestCase):
    def setUp(self):
        import tempfile

        self.tmp = tempfile.TemporaryDirectory()
        self.server = FixtureServer(self.tmp.name)

    def tearDown(self):
        self.server.close()
        self.tmp.cleanup()

    def test_the_verifiers_request_streams_its_answer(self):
        status, kind, raw = self.server.post("/chat/completions", verifiers_body("always-right"))
        self.assertEqual((status, kind), (200, "text/event-stream"))
        events = events_of(raw)
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(
            assemble(events),
            # usage: whitespace-split words of the last user message and of the answer
            ("Let me compute it step by step. The answer is 10.", "stop", {"prompt_tokens": 5, "completion_tokens": 11, "total_tokens": 16}),
        )
        self.assertEqual(self.server.requests()[-1]["stream"], True)

    def test_policies_stream_as_they_answer(self):
        plain = json.loads(self.server.post("/chat/completions", {**verifiers_body("mixed"), "stream": False, "stream_options": None, "n": 3})[2])
        events = events_of(self.server.post("/chat/completions", {**verifiers_body("mixed"), "n": 3})[2])
        for choice in plain["choices"]:
            mine = [c["choices"][0] for c in events[:-1] if c["choices"] and c["choices"][0]["index"] == choice["index"]]
            self.assertEqual("".join(c["delta"].get("content", "") for c in mine), choice["message"]["content"])
        self.assertEqual(events[-2]["usage"], plain["usage"])
        self.assertEqual(self.server.requests()[0]["stream"], False)

        status, kind, raw = self.server.post("/chat/completions", verifiers_body("http-500"))
        self.assertEqual((status, kind), (500, "application/json"))
        status, kind, raw = self.server.post("/chat/completions", verifiers_body("malformed"))
        self.assertEqual((status, kind), (200, "text/event-stream"))
        self.assertEqual([e if e == "[DONE]" else e["object"] for e in events_of(raw)], ["not-a-completion", "[DONE]"])
        status, kind, raw = self.server.post("/chat/completions", verifiers_body("no-such-model"))
        self.assertEqual(status, 404)

    def test_completions_stream(self):
        status, kind, raw = self.server.post("/completions", {"model": "always-right", "prompt": "2 + 2", "stream": True})
        self.assertEqual((status, kind), (200, "text/event-stream"))
        events = events_of(raw)
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(events[0]["object"], "text_completion")
        self.assertEqual((events[0]["choices"][0]["text"], events[0]["choices"][0]["finish_reason"]), ("Let me compute it step by step. The answer is 4.", "stop"))

    def test_bad_stream_fields_are_400(self):
        for extra in ({"stream": "yes"}, {"stream": False}, {"stream_options": []}):
            with self.subTest(extra=extra):
                body = {**verifiers_body("always-right"), **extra}
                if extra.get("stream") is False:
                    body["stream_options"] = {"include_usage": True}
                status, _, raw = self.server.post("/chat/completions", body)
                self.assertEqual(status, 400, raw)
                self.assertIn("stream", json.loads(raw)["error"]["param"])


#: In verifiers 0.4's venv: the OpenAI SDK's own streaming client, verifiers' chat program's
#: `chat` (the exact call its harnesses make, read by `AsyncChatCompletionStream`), and the
#: interception server's relay reader (`EvalClient.relay` + `_collect_stream` +
#: `ChatStreamParser`) on the body the interception server sends upstream.
REAL_CLIENTS = r"""
import asyncio, json, os, sys
import openai
from verifiers.v1.clients.eval import EvalClient
from verifiers.v1.configs.client import EvalClientConfig
from verifiers.v1.dialects.chat import ChatDialect
from verifiers.v1.harnesses.utils.core import chat
from verifiers.v1.interception.server import _collect_stream
from verifiers.v1.types import SamplingConfig

async def main(base_url, model):
    messages = [{"role": "system", "content": "Answer with a number."}, {"role": "user", "content": "What is 4 + 6?"}]
    client = openai.AsyncOpenAI(base_url=base_url, api_key=os.environ["RL_TEST_CLIENT_KEY"], max_retries=0)
    stream = await client.chat.completions.create(model=model, messages=messages, max_tokens=3, stream=True, stream_options={"include_usage": True})
    sdk = {"content": "", "finish_reason": None, "usage": None, "objects": []}
    async for chunk in stream:
        sdk["objects"].append(chunk.object)
        for choice in chunk.choices:
            sdk["content"] += choice.delta.content or ""
            sdk["finish_reason"] = choice.finish_reason or sdk["finish_reason"]
        if chunk.usage is not None:
            sdk["usage"] = chunk.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"})
    completion = await chat(client, model, list(messages), [])
    program = {"content": completion.choices[0].message.content, "role": completion.choices[0].message.role,
               "finish_reason": completion.choices[0].finish_reason,
               "usage": None if completion.usage is None else completion.usage.total_tokens}
    await client.close()

    dialect = ChatDialect()
    body = dialect.apply_overrides({"model": "harness-named", "messages": messages, "stream": True,
                                    "stream_options": {"include_usage": True}}, model, SamplingConfig(max_tokens=3, temperature=1.0))
    relay_client = EvalClient(EvalClientConfig(base_url=base_url, api_key_var="RL_TEST_CLIENT_KEY"))
    response, events = await _collect_stream(dialect, await relay_client.relay(dialect, body, session_id="s-1"))
    await relay_client.close()
    usage = response.usage
    relay = {"content": response.message.content, "finish_reason": response.finish_reason,
             "usage": None if usage is None else usage.prompt_tokens + usage.completion_tokens,
             "ends_done": events.rstrip().endswith(b"data: [DONE]"),
             "body": body}
    print(json.dumps({"sdk": sdk, "program": program, "relay": relay}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@unittest.skipUnless(os.path.exists(VF1_PYTHON), "target/vf1-venv (verifiers 0.4.0, its openai SDK) not found")
class RealClientStreamTests(unittest.TestCase):
    def check(self, out, content, finish, total_tokens):
        self.assertEqual(out["sdk"]["content"], content)
        self.assertEqual(out["sdk"]["finish_reason"], finish)
        self.assertEqual(out["sdk"]["usage"]["total_tokens"], total_tokens)
        self.assertEqual(set(out["sdk"]["objects"]), {"chat.completion.chunk"})
        self.assertEqual(out["program"], {"content": content, "role": "assistant", "finish_reason": finish, "usage": total_tokens})
        self.assertEqual(out["relay"]["content"], content)
        self.assertEqual(out["relay"]["finish_reason"], finish)
        self.assertEqual(out["relay"]["usage"], total_tokens)
        self.assertTrue(out["relay"]["ends_done"])
        # What the interception server relays: the chat program's stream fields, the
        # rollout's model and sampling overlaid.
        body = out["relay"]["body"]
        self.assertEqual((body["stream"], body["stream_options"], body["max_tokens"]), (True, {"include_usage": True}, 3))

    def test_the_trainer_answers_the_real_clients(self):
        client = FakeSamplingClient()
        policy = make_policy(client=client)
        with served(policy) as base_url:
            out = run_client(VF1_PYTHON, REAL_CLIENTS, base_url, "tiny")
        self.assertEqual(len(client.calls), 3)  # the SDK, the chat program, the relay
        prompt = policy.chat_tokens([{"role": "system", "content": "Answer with a number."}, {"role": "user", "content": "What is 4 + 6?"}])
        self.check(out, "ab", "stop", len(prompt) + 3)
        self.assertEqual(out["relay"]["body"]["model"], "tiny")

    @unittest.skipUnless(os.path.exists(FIXTURE_SERVER), "fixtures/openai-server/openai_server.py not found")
    def test_the_fixture_server_answers_the_real_clients(self):
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            server = FixtureServer(tmp)
            try:
                out = run_client(VF1_PYTHON, REAL_CLIENTS, server.base_url, "always-right")
                seen = server.requests()
            finally:
                server.close()
        self.check(out, "Let me compute it step by step. The answer is 10.", "stop", 5 + 11)  # words asked + answered
        self.assertEqual([(r["path"], r["stream"], r["status"]) for r in seen], [("/v1/chat/completions", True, 200)] * 3)


if __name__ == "__main__":
    unittest.main()
