"""What verifiers' clients need of the served inference: chat completions with token ids
(verifiers 0.3's legacy client) and vLLM's /inference/v1/generate (verifiers 0.4's train
client, through `renderers`). The real clients are run from their own venvs
(target/vf0-venv, target/vf1-venv) against the app served on 127.0.0.1."""

import asyncio
import contextlib
import json
import math
import os
import subprocess
import threading
import time
import unittest
from types import SimpleNamespace

from fastapi.testclient import TestClient

from rl_trainer.server import InferenceServer, bind_socket, create_app

from tests.test_server import TOKENIZER, FakeSamplingClient, make_policy

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "target"))
VF0_PYTHON = os.path.join(TARGET, "vf0-venv", "bin", "python")
VF1_PYTHON = os.path.join(TARGET, "vf1-venv", "bin", "python")
CLIENT_TIMEOUT_SECS = 180


def v1_generate_body(**sampling):
    """What renderers 0.1.12's `generate` posts (renderers/client.py: `sp["stop_token_ids"]`,
    `sp["logprobs"] = 1`, `skip_special_tokens` defaulted; verifiers' TrainClient adds the
    sampling config's fields and `routed_experts_prompt_start` on a bridged turn)."""
    params = {"temperature": 1.0, "max_tokens": 3, "stop_token_ids": [7], "logprobs": 1, "skip_special_tokens": False}
    params.update(sampling)
    return {"model": "tiny", "token_ids": [104, 105], "sampling_params": params}


class TokenIdsInChatTests(unittest.TestCase):
    def setUp(self):
        self.client = FakeSamplingClient()
        self.http = TestClient(create_app(make_policy(client=self.client)))

    def chat(self, **extra):
        body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 3, "logprobs": True}
        body.update(extra)
        answer = self.http.post("/v1/chat/completions", json=body)
        self.assertEqual(answer.status_code, 200, answer.text)
        return answer.json()

    def test_asked_token_ids_come_back_with_the_prompts(self):
        out = self.chat(return_token_ids=True, n=2)
        prompt, _, _ = self.client.calls[-1]
        self.assertEqual(out["prompt_token_ids"], prompt)  # the chat template applied
        self.assertEqual([c["token_ids"] for c in out["choices"]], [[97, 98, 0], [120, 121, 122]])
        content = out["choices"][0]["logprobs"]["content"]
        self.assertEqual([e["logprob"] for e in content], [-0.25, -0.5, -0.75])
        self.assertEqual(content[0], {"token": "a", "logprob": -0.25, "bytes": None, "top_logprobs": []})

    def test_tokens_as_ids_when_asked_as_vllm_spells_them(self):
        content = self.chat(return_tokens_as_token_ids=True)["choices"][0]["logprobs"]["content"]
        self.assertEqual([e["token"] for e in content], ["token_id:97", "token_id:98", "token_id:0"])

    def test_not_asked_the_answer_is_todays(self):
        out = self.chat()
        self.assertNotIn("prompt_token_ids", out)
        self.assertNotIn("token_ids", out["choices"][0])
        self.assertEqual(out["choices"][0]["logprobs"]["content"][0]["token"], "a")
        self.assertEqual(self.http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], "return_token_ids": "yes"}).status_code, 400)


class TokenGenerateTests(unittest.TestCase):
    def setUp(self):
        self.client = FakeSamplingClient()
        self.http = TestClient(create_app(make_policy(client=self.client)))

    def test_the_vllm_shape(self):
        answer = self.http.post("/inference/v1/generate", json=v1_generate_body(), headers={"X-Session-ID": "s-1"})
        self.assertEqual(answer.status_code, 200, answer.text)
        out = answer.json()
        self.assertEqual(set(out), {"request_id", "prompt_token_ids", "choices", "usage"})
        self.assertTrue(out["request_id"])
        self.assertEqual(out["prompt_token_ids"], [104, 105])
        self.assertEqual(
            out["choices"],
            [
                {
                    "index": 0,
                    "token_ids": [97, 98, 0],
                    "logprobs": {
                        "content": [
                            {"token": "token_id:97", "logprob": -0.25},
                            {"token": "token_id:98", "logprob": -0.5},
                            {"token": "token_id:0", "logprob": -0.75},
                        ]
                    },
                    "finish_reason": "stop",
                }
            ],
        )
        self.assertEqual(out["usage"], {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5})
        prompt, n, params = self.client.calls[-1]
        self.assertEqual((prompt, n, params.max_tokens, params.temperature, params.stop), ([104, 105], 1, 3, 1.0, [7, 0]))

    def test_sampling_params_by_vllms_names_and_unknown_ones_tolerated(self):
        body = v1_generate_body(
            n=2, top_k=0, top_p=0.9, seed=11, temperature=0.7, max_tokens=5,
            min_p=0.0, repetition_penalty=1.0, reasoning_effort="low", routed_experts_prompt_start=0,
        )
        out = self.http.post("/inference/v1/generate", json=body).json()
        self.assertEqual([c["finish_reason"] for c in out["choices"]], ["stop", "length"])
        self.assertEqual([c["index"] for c in out["choices"]], [0, 1])
        _, n, params = self.client.calls[-1]
        self.assertEqual((n, params.top_k, params.top_p, params.seed, params.temperature, params.max_tokens), (2, -1, 0.9, 11, 0.7, 5))
        body = v1_generate_body(stop=["END"], ignore_eos=True)
        del body["sampling_params"]["max_tokens"]
        self.http.post("/inference/v1/generate", json=body)
        _, _, params = self.client.calls[-1]
        self.assertEqual(params.stop, ["END", chr(7)])  # strings, the stop token's text too; no eos
        self.assertEqual(params.max_tokens, 64 - 2)  # the policy's default: what the context leaves

    def test_bad_bodies_are_400(self):
        for body in (
            {},
            {"token_ids": []},
            {"token_ids": [[1, 2]]},
            {"token_ids": [1, -2]},
            {"token_ids": [1], "sampling_params": []},
            {"token_ids": [1], "sampling_params": {"n": 0}},
            {"token_ids": [1], "sampling_params": {"max_tokens": "many"}},
            {"token_ids": [1], "sampling_params": {"temperature": -1}},
            {"token_ids": [1], "sampling_params": {"logprobs": "yes"}},
            {"token_ids": [1], "features": {"mm_hashes": {}}},
        ):
            with self.subTest(body=body):
                answer = self.http.post("/inference/v1/generate", json=body)
                self.assertEqual(answer.status_code, 400, answer.text)
                self.assertEqual(answer.json()["error"]["type"], "invalid_request_error")

    def test_not_initialized_is_503_and_a_failed_sampler_500(self):
        http = TestClient(create_app(make_policy(ready=False)))
        self.assertEqual(http.post("/inference/v1/generate", json=v1_generate_body()).status_code, 503)

        class Broken(FakeSamplingClient):
            async def sample(self, **kwargs):
                raise RuntimeError("engine on fire")

        answer = TestClient(create_app(make_policy(client=Broken()))).post("/inference/v1/generate", json=v1_generate_body())
        self.assertEqual(answer.status_code, 500)
        self.assertIn("engine on fire", answer.json()["error"]["message"])

    def test_a_logprob_that_is_not_finite_is_never_answered(self):
        class Infinite(FakeSamplingClient):
            async def sample(self, prompt, num_samples, sampling_params):
                result = await super().sample(prompt, num_samples, sampling_params)
                result.sequences[0].logprobs[1] = -math.inf
                return result

        answer = TestClient(create_app(make_policy(client=Infinite()))).post("/inference/v1/generate", json=v1_generate_body())
        self.assertEqual(answer.status_code, 500)
        self.assertIn("not finite", answer.json()["error"]["message"])

    def test_the_model_named_answers_when_several_are_served(self):
        base, trained = FakeSamplingClient(), FakeSamplingClient()
        a, b = make_policy(client=base), make_policy(client=trained)
        a.model_name, b.model_name = "run:r1@base", "run:r1@4"
        http = TestClient(create_app({a.model_name: a, b.model_name: b}))
        body = v1_generate_body()
        body["model"] = "run:r1@4"
        self.assertEqual(http.post("/inference/v1/generate", json=body).status_code, 200)
        self.assertEqual((len(trained.calls), len(base.calls)), (1, 0))
        body["model"] = "other"
        self.assertEqual(http.post("/inference/v1/generate", json=body).status_code, 404)


@contextlib.contextmanager
def served(policy):
    """The app on an ephemeral 127.0.0.1 port, in a thread; its `/v1` base URL."""
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = InferenceServer(create_app(policy), sock)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(),), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.stop()
        thread.join(5)
        loop.close()


def run_client(python, script, *args):
    """Runs `script` in another venv's Python (offline: nothing but 127.0.0.1 is asked);
    its last stdout line is JSON."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RL_TEST_CLIENT_KEY": "test-key", "NO_PROXY": "127.0.0.1"})
    done = subprocess.run(
        [python, "-c", script, *args], capture_output=True, text=True, env=env, timeout=CLIENT_TIMEOUT_SECS, cwd=TARGET
    )
    if done.returncode != 0:
        raise AssertionError(f"the client failed ({done.returncode}): {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


#: verifiers 0.3.1's legacy OpenAIChatCompletionsClient, asked for tokens as a v0 environment
#: asks (`logprobs=True`, `extra_body={"return_token_ids": True}`; its
#: `from_native_response` keeps tokens only when the answer carries them).
V0_CLIENT = r"""
import asyncio, json, sys
from verifiers.legacy.clients import OpenAIChatCompletionsClient
from verifiers.legacy.types import ClientConfig, UserMessage

async def main(base_url):
    client = OpenAIChatCompletionsClient(ClientConfig(api_base_url=base_url, api_key_var="RL_TEST_CLIENT_KEY", max_retries=0))
    sampling = {"n": 1, "max_tokens": 3, "temperature": 1.0, "logprobs": True, "extra_body": {"return_token_ids": True}}
    response = await client.get_response([UserMessage(content="hi")], "tiny", sampling)
    await client.close()
    tokens = response.message.tokens
    print(json.dumps({
        "content": response.message.content,
        "finish_reason": response.message.finish_reason,
        "tokens": None if tokens is None else tokens.model_dump(include={"prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "completion_logprobs"}),
    }))

asyncio.run(main(sys.argv[1]))
"""

#: verifiers 0.4.0's TrainClient (TrainClientConfig: `base_url` …/v1, the renderer built from
#: the fixture tokenizer), through renderers 0.1.12's `generate`, which checks every logprob
#: entry (`token_id:<id>`, finite) and raises on anything else.
V1_CLIENT = r"""
import asyncio, json, sys
from verifiers.v1.clients.train import TrainClient
from verifiers.v1.configs.client import TrainClientConfig
from verifiers.v1.dialects.chat import ChatDialect
from verifiers.v1.types import SamplingConfig

async def main(base_url, tokenizer):
    client = TrainClient(TrainClientConfig(base_url=base_url, api_key_var="RL_TEST_CLIENT_KEY", renderer_model_name=tokenizer))
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
    response = await client.get_response(ChatDialect(), body, SamplingConfig(max_tokens=3, temperature=1.0, top_k=0), session_id="s-1")
    await client.close()
    tokens = response.tokens
    print(json.dumps({
        "content": response.message.content,
        "finish_reason": response.finish_reason,
        "prompt_ids": list(tokens.prompt_ids),
        "completion_ids": list(tokens.completion_ids),
        "completion_logprobs": list(tokens.completion_logprobs),
    }))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@unittest.skipUnless(os.path.isdir(TOKENIZER), "fixtures/tokenizer not found")
class RealClientTests(unittest.TestCase):
    """The real clients' requests, parsed by their own code."""

    def policy(self):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
        self.completion = tokenizer.encode("ab", add_special_tokens=False) + [tokenizer.eos_token_id]
        completion = self.completion

        class Client(FakeSamplingClient):
            async def sample(self, prompt, num_samples, sampling_params):
                self.calls.append((prompt.to_ints(), num_samples, sampling_params))
                return SimpleNamespace(
                    sequences=[
                        SimpleNamespace(tokens=list(completion), logprobs=[-0.5, -0.25, -0.125][: len(completion)], stop_reason="stop")
                        for _ in range(num_samples)
                    ]
                )

        self.client = Client()
        return make_policy(tokenizer=tokenizer, client=self.client), tokenizer

    @unittest.skipUnless(os.path.exists(VF0_PYTHON), "target/vf0-venv (verifiers 0.3.1) not found")
    def test_verifiers_0_3_legacy_client_gets_its_tokens(self):
        policy, tokenizer = self.policy()
        with served(policy) as base_url:
            out = run_client(VF0_PYTHON, V0_CLIENT, base_url)
        prompt, n, params = self.client.calls[-1]
        self.assertEqual(n, 1)
        self.assertEqual(params.max_tokens, 3)  # sent as max_completion_tokens
        self.assertEqual(out["content"], "ab")
        self.assertEqual(out["finish_reason"], "stop")
        tokens = out["tokens"]
        self.assertIsNotNone(tokens, "the client kept no tokens: the answer lacked token ids or logprobs")
        self.assertEqual(tokens["prompt_ids"], prompt)
        self.assertEqual(tokens["prompt_mask"], [0] * len(prompt))
        self.assertEqual(tokens["completion_ids"], self.completion)
        self.assertEqual(tokens["completion_mask"], [1] * len(self.completion))
        self.assertEqual(tokens["completion_logprobs"], [-0.5, -0.25, -0.125][: len(self.completion)])

    @unittest.skipUnless(os.path.exists(VF1_PYTHON), "target/vf1-venv (verifiers 0.4.0) not found")
    def test_verifiers_0_4_train_client_gets_its_tokens(self):
        policy, tokenizer = self.policy()
        with served(policy) as base_url:
            out = run_client(VF1_PYTHON, V1_CLIENT, base_url, TOKENIZER)
        prompt, n, params = self.client.calls[-1]
        # The renderer's prompt (the chat template, rendered client-side) is what was sampled from.
        self.assertEqual(out["prompt_ids"], prompt)
        self.assertEqual(prompt, policy.chat_tokens([{"role": "user", "content": "hi"}]))
        self.assertEqual((n, params.max_tokens, params.top_k), (1, 3, -1))
        self.assertIn(tokenizer.convert_tokens_to_ids("<|im_end|>"), params.stop)  # the renderer's stop ids
        self.assertEqual(out["completion_ids"], self.completion)
        self.assertEqual(out["completion_logprobs"], [-0.5, -0.25, -0.125][: len(self.completion)])
        self.assertEqual(out["finish_reason"], "stop")
        self.assertEqual(out["content"], "ab")


if __name__ == "__main__":
    unittest.main()
