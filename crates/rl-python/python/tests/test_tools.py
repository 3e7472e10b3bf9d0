"""Tools on the trainer's chat route: the request's tools and tool history rendered by the
model's chat template, tool calls parsed out of the sampled text (plain and streamed), bad
tools refused, verifiers 0.3's token routes (/tokenize, /v1/chat/completions/tokens), and a
real verifiers v0 `ToolEnv` rollout through rl's v0 adapter (target/vf0-venv) whose turns
train as one sequence of exactly the sampled tokens."""

import json
import os
import tempfile
import unittest

from fastapi.testclient import TestClient

from rl_trainer.server import create_app
from rl_trainer.tools import HERMES, ToolSupport, answer_message, parse_hermes
from rl_verifiers.adapter import PROMPT_LOGPROB, PROMPT_MASK, Sequence
from rl_verifiers.scored import joined_turns
from tests.test_server import TOKENIZER, make_policy
from tests.test_streaming import events_of
from tests.test_verifiers_routes import VF0_PYTHON, run_client, served
from tests.tool_fixtures import (
    ADD_TOOL,
    ANSWER_TEXT,
    CALL_TEXT,
    HAVE_TOKENIZER,
    UNTAGGED_TEMPLATE,
    tool_policy,
)

PROGRAMS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fixture_tokenizer():
    """The fixture tokenizer with its own template, which ignores tools."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZER)


QUESTION = [{"role": "user", "content": "What is 2 + 3?"}]
# The history of a turn after the call: the call (arguments a JSON string, content null, as
# verifiers 0.3 sends them back) and the tool's result.
HISTORY = QUESTION + [
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "5"},
]


class ParseTests(unittest.TestCase):
    def test_hermes_calls_and_the_text_around_them(self):
        content, calls = parse_hermes("Let me add.\n" + CALL_TEXT + '\n<tool_call>{"name": "add", "arguments": {"a": 1, "b": 1}}</tool_call>')
        self.assertEqual(content, "Let me add.")
        self.assertEqual([c["function"]["name"] for c in calls], ["add", "add"])
        self.assertEqual(json.loads(calls[0]["function"]["arguments"]), {"a": 2, "b": 3})
        self.assertIsInstance(calls[0]["function"]["arguments"], str)
        self.assertEqual({c["type"] for c in calls}, {"function"})
        self.assertEqual(len({c["id"] for c in calls}), 2)
        self.assertTrue(calls[0]["id"].startswith("call_"))

    def test_anything_but_whole_calls_is_no_call(self):
        for text in (
            "no call here",
            "<tool_call>\nnot json\n</tool_call>",
            '<tool_call>{"arguments": {}}</tool_call>',  # no name
            '<tool_call>{"name": "add", "arguments": [1]}</tool_call>',
            CALL_TEXT + '\n<tool_call>{"name": "add", "argu',  # the last one left open
        ):
            with self.subTest(text=text):
                self.assertIsNone(parse_hermes(text))
                self.assertEqual(answer_message(text, HERMES), {"role": "assistant", "content": text})

    def test_an_unknown_format_is_answered_as_text(self):
        self.assertEqual(answer_message(CALL_TEXT, None), {"role": "assistant", "content": CALL_TEXT})


@unittest.skipUnless(HAVE_TOKENIZER, "fixtures/tokenizer not found")
class TemplateTests(unittest.TestCase):
    def test_the_format_is_read_from_the_template(self):
        self.assertEqual(tool_policy()[0].tool_support(), ToolSupport(renders_tools=True, call_format=HERMES))
        self.assertEqual(tool_policy(UNTAGGED_TEMPLATE)[0].tool_support(), ToolSupport(renders_tools=True, call_format=None))
        policy = make_policy(tokenizer=fixture_tokenizer())
        self.assertEqual(policy.tool_support(), ToolSupport())  # the fixture's template ignores tools


@unittest.skipUnless(HAVE_TOKENIZER, "fixtures/tokenizer not found")
class RouteTests(unittest.TestCase):
    def setUp(self):
        self.policy, self.client, self.tok = tool_policy()
        self.http = TestClient(create_app(self.policy))

    def chat(self, messages=QUESTION, status=200, **extra):
        body = {"model": "tiny", "messages": messages, "tools": [ADD_TOOL], "logprobs": True, "return_token_ids": True}
        body.update(extra)
        answer = self.http.post("/v1/chat/completions", json=body)
        self.assertEqual(answer.status_code, status, answer.text)
        return answer

    def rendered(self, messages, tools):
        text = self.tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        return self.tok.encode(text, add_special_tokens=False)

    def test_the_tools_are_in_the_prompt_as_the_template_renders_them(self):
        out = self.chat().json()
        prompt = self.client.calls[-1][0]
        self.assertEqual(prompt, self.rendered(QUESTION, [ADD_TOOL]))
        self.assertEqual(out["prompt_token_ids"], prompt)
        text = self.tok.decode(prompt, skip_special_tokens=False)
        self.assertIn("<tools>\n" + json.dumps(ADD_TOOL), text)
        self.assertIn("Adds two integers.", text)

    def test_a_call_comes_back_as_tool_calls(self):
        choice = self.chat().json()["choices"][0]
        self.assertEqual(choice["finish_reason"], "tool_calls")
        message = choice["message"]
        self.assertIsNone(message["content"])
        (call,) = message["tool_calls"]
        self.assertEqual((call["type"], call["function"]["name"]), ("function", "add"))
        self.assertEqual(json.loads(call["function"]["arguments"]), {"a": 2, "b": 3})
        self.assertTrue(call["id"])
        # The tokens answered are the sampled ones, the call's text and the end of the turn.
        sampled = self.tok.encode(CALL_TEXT, add_special_tokens=False) + [self.tok.eos_token_id]
        self.assertEqual(choice["token_ids"], sampled)
        self.assertEqual([e["logprob"] for e in choice["logprobs"]["content"]], [-0.5] * len(sampled))

    def test_a_streamed_call_says_what_the_plain_answer_says(self):
        answer = self.chat(stream=True, stream_options={"include_usage": True})
        events = events_of(answer.content)
        self.assertEqual(events[-1], "[DONE]")
        deltas = [c for e in events[:-1] for c in e["choices"]]
        calls = [call for c in deltas for call in c["delta"].get("tool_calls") or []]
        self.assertEqual(len(calls), 1)
        self.assertEqual((calls[0]["index"], calls[0]["type"], calls[0]["function"]["name"]), (0, "function", "add"))
        self.assertEqual(json.loads(calls[0]["function"]["arguments"]), {"a": 2, "b": 3})
        self.assertEqual([c["finish_reason"] for c in deltas if c["finish_reason"]], ["tool_calls"])
        self.assertEqual("".join(c["delta"].get("content") or "" for c in deltas), "")

    def test_the_openai_sdk_reads_the_streamed_call(self):
        from openai import OpenAI

        with served(self.policy) as base_url:
            client = OpenAI(base_url=base_url, api_key="test-key", max_retries=0)
            with client.chat.completions.stream(model="tiny", messages=QUESTION, tools=[ADD_TOOL], max_tokens=64) as stream:
                for _ in stream:
                    pass
                final = stream.get_final_completion()
            plain = client.chat.completions.create(model="tiny", messages=QUESTION, tools=[ADD_TOOL], max_tokens=64)
            client.close()
        for completion in (final, plain):
            choice = completion.choices[0]
            self.assertEqual(choice.finish_reason, "tool_calls")
            self.assertEqual(choice.message.tool_calls[0].function.name, "add")
            self.assertEqual(json.loads(choice.message.tool_calls[0].function.arguments), {"a": 2, "b": 3})

    def test_the_history_of_calls_and_results_is_rendered_by_the_template(self):
        out = self.chat(HISTORY).json()
        prompt = self.client.calls[-1][0]
        text = self.tok.decode(prompt, skip_special_tokens=False)
        self.assertIn('<|im_start|>assistant\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call><|im_end|>', text)
        self.assertIn("<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n<|im_start|>assistant\n", text)
        history = [dict(m) for m in HISTORY]
        history[1] = dict(history[1], content="", tool_calls=[{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}])
        del history[1]["reasoning_content"]
        self.assertEqual(prompt, self.rendered(history, [ADD_TOOL]))
        choice = out["choices"][0]
        self.assertEqual((choice["message"]["content"], choice["finish_reason"]), (ANSWER_TEXT, "stop"))
        self.assertNotIn("tool_calls", choice["message"])

    def test_no_parse_without_tools_or_with_tool_choice_none(self):
        for extra in ({"tools": None}, {"tool_choice": "none"}):
            with self.subTest(extra=extra):
                choice = self.chat(**extra).json()["choices"][0]
                self.assertEqual((choice["message"]["content"], choice["finish_reason"]), (CALL_TEXT, "stop"))

    def test_an_unknown_call_format_answers_the_raw_text(self):
        policy, client, tok = tool_policy(UNTAGGED_TEMPLATE, call_text='{"name": "add", "parameters": {"a": 2, "b": 3}}')
        answer = TestClient(create_app(policy)).post("/v1/chat/completions", json={"messages": QUESTION, "tools": [ADD_TOOL]})
        self.assertEqual(answer.status_code, 200, answer.text)
        choice = answer.json()["choices"][0]
        self.assertEqual(choice["message"], {"role": "assistant", "content": '{"name": "add", "parameters": {"a": 2, "b": 3}}'})
        self.assertEqual(choice["finish_reason"], "stop")
        self.assertIn('"name": "add"', tok.decode(client.calls[-1][0], skip_special_tokens=False))  # the tools were rendered

    def test_a_template_without_tools_refuses_them(self):
        http = TestClient(create_app(make_policy(tokenizer=fixture_tokenizer())))
        answer = http.post("/v1/chat/completions", json={"messages": QUESTION, "tools": [ADD_TOOL]})
        self.assertEqual(answer.status_code, 400, answer.text)
        error = answer.json()["error"]
        self.assertEqual((error["type"], error["param"]), ("invalid_request_error", "tools"))
        self.assertIn("does not render tools", error["message"])

    def test_bad_tools_and_tool_messages_are_400(self):
        function = ADD_TOOL["function"]
        for name, extra in (
            ("not a list", {"tools": {"add": ADD_TOOL}}),
            ("a string tool", {"tools": ["add"]}),
            ("another type", {"tools": [{"type": "retrieval", "function": function}]}),
            ("no function", {"tools": [{"type": "function"}]}),
            ("a bad name", {"tools": [{"type": "function", "function": dict(function, name="two words")}]}),
            ("a number name", {"tools": [{"type": "function", "function": dict(function, name=7)}]}),
            ("parameters a list", {"tools": [{"type": "function", "function": dict(function, parameters=[1])}]}),
            ("description a number", {"tools": [{"type": "function", "function": dict(function, description=1)}]}),
            ("strict a string", {"tools": [{"type": "function", "function": dict(function, strict="yes")}]}),
            ("too many", {"tools": [ADD_TOOL] * 129}),
            ("too big", {"tools": [{"type": "function", "function": dict(function, description="x" * 300_000)}]}),
            ("a forced call", {"tool_choice": "required"}),
            ("a named call", {"tool_choice": {"type": "function", "function": {"name": "add"}}}),
            ("parallel_tool_calls a string", {"parallel_tool_calls": "yes"}),
            ("tool_calls on a user", {"messages": [dict(QUESTION[0], tool_calls=[])]}),
            ("tool_calls a dict", {"messages": QUESTION + [{"role": "assistant", "tool_calls": {"id": "x"}}]}),
            ("a call without a name", {"messages": QUESTION + [{"role": "assistant", "tool_calls": [{"id": "x", "function": {}}]}]}),
            ("arguments a number", {"messages": QUESTION + [{"role": "assistant", "tool_calls": [{"function": {"name": "add", "arguments": 5}}]}]}),
            ("tool_call_id a number", {"messages": QUESTION + [{"role": "tool", "tool_call_id": 5, "content": "5"}]}),
        ):
            with self.subTest(name):
                error = self.chat(status=400, **extra).json()["error"]
                self.assertEqual(error["type"], "invalid_request_error")
                self.assertTrue(error["message"])
        self.assertEqual(self.client.calls, [])  # nothing was sampled

    def test_a_template_that_refuses_the_messages_is_400(self):
        policy, client, tok = tool_policy("{{ raise_exception('roles must alternate') }}")
        answer = TestClient(create_app(policy)).post("/v1/chat/completions", json={"messages": QUESTION})
        self.assertEqual(answer.status_code, 400, answer.text)
        self.assertIn("roles must alternate", answer.json()["error"]["message"])

    def test_the_token_routes_verifiers_stitches_turns_with(self):
        # /tokenize: the template applied as the chat route applies it (vLLM's answer shape).
        body = {"model": "tiny", "messages": HISTORY, "tools": [ADD_TOOL]}
        out = self.http.post("/tokenize", json=body).json()
        self.assertEqual(out["tokens"], self.chat(HISTORY).json()["prompt_token_ids"])
        self.assertEqual((out["count"], out["max_model_len"]), (len(out["tokens"]), 64))
        bare = self.http.post("/tokenize", json=dict(body, add_generation_prompt=False)).json()["tokens"]
        self.assertEqual(out["tokens"][: len(bare)], bare)
        self.assertLess(len(bare), len(out["tokens"]))
        self.assertEqual(self.http.post("/tokenize", json={"prompt": "2 + 3"}).json()["tokens"], self.tok.encode("2 + 3"))
        for bad in ({}, {"messages": []}, {"prompt": 5}, {"messages": QUESTION, "add_special_tokens": True}, {"messages": QUESTION, "tools": "add"}):
            with self.subTest(bad=bad):
                self.assertEqual(self.http.post("/tokenize", json=bad).status_code, 400)
        # /v1/chat/completions/tokens: sampled from the tokens given, answered as a chat.
        prompt = self.http.post("/tokenize", json=dict(body, messages=QUESTION)).json()["tokens"]
        answer = self.http.post("/v1/chat/completions/tokens", json=dict(body, tokens=prompt, return_token_ids=True, logprobs=True))
        self.assertEqual(answer.status_code, 200, answer.text)
        self.assertEqual(self.client.calls[-1][0], prompt)
        self.assertEqual(answer.json()["prompt_token_ids"], prompt)
        self.assertEqual(answer.json()["choices"][0]["finish_reason"], "tool_calls")  # the tokens hold no tool response
        for tokens in (None, [], [-1], "12"):
            with self.subTest(tokens=tokens):
                self.assertEqual(self.http.post("/v1/chat/completions/tokens", json=dict(body, tokens=tokens)).status_code, 400)


class JoinedTurnsTests(unittest.TestCase):
    def seq(self, tokens, masks, name):
        return Sequence(tokens=tokens, masks=masks, logprobs=[PROMPT_LOGPROB if m == PROMPT_MASK else -0.5 for m in masks], messages=[{"role": "user", "content": name}])

    def test_a_turn_that_extends_the_one_before_continues_it(self):
        first = self.seq([1, 2, 3, 4], [PROMPT_MASK, PROMPT_MASK, 3, 4], "first")
        second = self.seq([1, 2, 3, 4, 5, 6, 7], [PROMPT_MASK] * 6 + [7], "second")
        (joined,) = joined_turns([first, second])
        self.assertEqual(joined.tokens, [1, 2, 3, 4, 5, 6, 7])
        self.assertEqual(joined.masks, [PROMPT_MASK, PROMPT_MASK, 3, 4, PROMPT_MASK, PROMPT_MASK, 7])
        self.assertEqual(joined.logprobs, [1.0, 1.0, -0.5, -0.5, 1.0, 1.0, -0.5])
        self.assertEqual(joined.messages[0]["content"], "second")

    def test_a_turn_that_does_not_is_its_own_sequence(self):
        first = self.seq([1, 2, 3], [PROMPT_MASK, 2, 3], "first")
        other = self.seq([1, 2, 9, 4], [PROMPT_MASK] * 3 + [4], "other")  # the past re-tokenized otherwise
        self.assertEqual(joined_turns([first, other]), [first, other])
        self.assertEqual(joined_turns([first]), [first])
        self.assertEqual(joined_turns([]), [])


#: rl's v0 adapter (rl_verifiers.legacy) running one rollout of tests/vf0_tool_env.py's ToolEnv
#: against the served route, as a run (training: token ids asked) or a pre-flight would.
TOOL_ENV_ROLLOUT = r"""
import asyncio, dataclasses, json, os, sys
sys.path.insert(0, sys.argv[2])
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
from rl_verifiers.adapter import Endpoint
from rl_verifiers.legacy import open_adapter
from tests import vf0_tool_env

async def main(base_url, training):
    adapter = open_adapter(vf0_tool_env)
    adapter.load({})
    task = next(iter(adapter.tasks()))
    async with adapter.serving():
        endpoint = Endpoint(base_url, "tiny", "test-key", training=training)
        (rollout,) = await adapter.run_group(task, 1, endpoint, {"max_tokens": 64, "temperature": 1.0})
    print(json.dumps(dataclasses.asdict(rollout)))

asyncio.run(main(sys.argv[1], sys.argv[3] == "training"))
"""


@unittest.skipUnless(HAVE_TOKENIZER, "fixtures/tokenizer not found")
@unittest.skipUnless(os.path.exists(VF0_PYTHON), "target/vf0-venv (verifiers 0.3.1) not found")
class ToolEnvTests(unittest.TestCase):
    def rollout(self, mode):
        self.policy, self.client, self.tok = tool_policy()
        render, self.rendered = self.policy.chat_tokens, []
        self.policy.chat_tokens = lambda *args: self.rendered.append(render(*args)) or self.rendered[-1]
        with served(self.policy) as base_url:
            out = run_client(VF0_PYTHON, TOOL_ENV_ROLLOUT, base_url, PROGRAMS, mode)
        self.assertIsNone(out["error"], out["error"])
        self.assertEqual(len(self.client.calls), 2, "one turn calling the tool, one answering")
        return out

    def sampled(self, text):
        return self.tok.encode(text, add_special_tokens=False) + [self.tok.eos_token_id]

    def assert_the_tool_ran_between_the_turns(self, out):
        (first, _, _), (second, _, _) = self.client.calls
        first_text = self.tok.decode(first, skip_special_tokens=False)
        self.assertIn('"name": "add"', first_text)  # verifiers' tool definition, rendered
        self.assertIn("The first integer.", first_text)
        self.assertIn("<tool_response>\n5\n</tool_response>", self.tok.decode(second, skip_special_tokens=False))
        self.assertEqual(out["reward"], 1.0)
        self.assertEqual(out["rewards"]["total_tool_calls"], 1.0)
        roles = [m["role"] for m in out["messages"]]
        self.assertEqual(roles[-3:], ["assistant", "tool", "assistant"])
        (call,) = out["messages"][-3]["tool_calls"]  # verifiers 0.3 dumps a call as a JSON string
        self.assertEqual(json.loads(call)["name"], "add")
        self.assertEqual(out["messages"][-2]["content"], "5")
        self.assertEqual(out["messages"][-1]["content"], ANSWER_TEXT)

    def test_a_run_trains_the_rollout_as_one_sequence_of_the_sampled_tokens(self):
        out = self.rollout("training")
        self.assert_the_tool_ran_between_the_turns(out)
        (first, _, _), (second, _, _) = self.client.calls
        call, answer = self.sampled(CALL_TEXT), self.sampled(ANSWER_TEXT)
        # The second turn's prompt continues the first turn's tokens as sampled: verifiers'
        # token client stitched it (/tokenize for the tool's reply; the chat route did not
        # render it).
        self.assertEqual(second[: len(first) + len(call)], first + call)
        self.assertNotIn(second, self.rendered)
        (sequence,) = out["sequences"]
        self.assertEqual(sequence["tokens"], second + answer)
        trained = [(i, m) for i, m in enumerate(sequence["masks"]) if m != PROMPT_MASK]
        at_call = list(range(len(first), len(first) + len(call)))
        at_answer = list(range(len(second), len(second) + len(answer)))
        self.assertEqual([i for i, _ in trained], at_call + at_answer)
        self.assertEqual([m for _, m in trained], call + answer)
        self.assertEqual([sequence["logprobs"][i] for i, _ in trained], [-0.5] * len(trained))
        self.assertEqual({lp for i, lp in enumerate(sequence["logprobs"]) if sequence["masks"][i] == PROMPT_MASK}, {PROMPT_LOGPROB})

    def test_a_preflight_rollout_calls_the_tool_too(self):
        out = self.rollout("preflight")
        self.assert_the_tool_ran_between_the_turns(out)
        self.assertEqual(out["sequences"], [])
        self.assertEqual(self.rendered, [call[0] for call in self.client.calls])  # each turn rendered by the route


if __name__ == "__main__":
    unittest.main()


class TrainersRenderingTests(unittest.TestCase):
    """rl asks the trainer's Python (this one: transformers) how a verifiers v0 run's chat
    template renders tools, as the v0 environment's Python cannot (issue 56 #2)."""

    def test_the_trainers_python_applies_the_chat_template(self):
        """`python -m rl_verifiers.tool_rendering`, what rl asks for a verifiers v0 run: the
        fixture tokenizer's template renders no tools; the tools template does."""
        import contextlib
        import io

        from rl_verifiers.tool_rendering import main

        tokenizer = TOKENIZER

        def verdict(*argv):
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                self.assertEqual(main(list(argv)), 0)
            return json.loads(printed.getvalue())

        refused = verdict(tokenizer, "add")["refused"]
        self.assertIn(f"gives the model tools (add), but the chat template of {tokenizer} renders no tools", refused)
        self.assertIsNone(verdict(tokenizer)["refused"])
        from transformers import AutoTokenizer

        with tempfile.TemporaryDirectory() as folder:
            wearing = AutoTokenizer.from_pretrained(tokenizer)
            with open(os.path.join(tokenizer, "tools_chat_template.jinja"), encoding="utf-8") as f:
                wearing.chat_template = f.read()
            wearing.save_pretrained(folder)
            self.assertIsNone(verdict(folder, "add")["refused"])
