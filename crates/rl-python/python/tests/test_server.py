"""The inference routes, with a fake sampling client in place of Tinker's."""

import asyncio
import os
import threading
import time
import unittest
from types import SimpleNamespace

from fastapi.testclient import TestClient

from rl_trainer.engine import Tinker, TinkerPolicy
from rl_trainer.sampling import SamplingSpec, parse_generate, tinker_stop, RequestError
from rl_trainer.server import InferenceServer, bind_socket, create_app

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "fixtures", "tokenizer"))


class FakeTokenizer:
    """Characters as tokens (ord), <eos> = 0, a ChatML-ish template."""

    eos_token_id = 0

    def encode(self, text, add_special_tokens=True):
        return [ord(c) for c in text]

    def decode(self, tokens, skip_special_tokens=False):
        return "".join("<eos>" if t == 0 and not skip_special_tokens else ("" if t == 0 else chr(t)) for t in tokens)

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        text = "".join(f"[{m['role']}]{m['content']}\n" for m in messages)
        return text + ("[assistant]" if add_generation_prompt else "")


class FakeSamplingClient:
    """Answers "ab" + eos (stop) for even samples, "xyz" (length) for odd ones; logprobs
    only when `with_logprobs`."""

    def __init__(self, with_logprobs=True):
        self.with_logprobs = with_logprobs
        self.calls = []

    async def sample(self, prompt, num_samples, sampling_params):
        self.calls.append((prompt.to_ints(), num_samples, sampling_params))
        seqs = []
        for i in range(num_samples):
            tokens = [ord("a"), ord("b"), 0] if i % 2 == 0 else [ord("x"), ord("y"), ord("z")]
            seqs.append(
                SimpleNamespace(
                    tokens=tokens,
                    logprobs=[-0.25 * (j + 1) for j in range(len(tokens))] if self.with_logprobs else None,
                    stop_reason="stop" if i % 2 == 0 else "length",
                )
            )
        return SimpleNamespace(sequences=seqs)

    async def compute_logprobs(self, model_input):
        n = len(model_input.to_ints())
        return [-1.0] * (n - 1)  # skyrl-tx's shape: no value for the first token


def make_policy(tokenizer=None, client=None, ready=True):
    config = SimpleNamespace(request_timeout_secs=5.0, max_retries=0)
    tinker = Tinker(config, "tml-test", lambda m: None)
    policy = TinkerPolicy(tinker, "tiny", "/nonexistent", max_token_length=64)
    policy.load(tokenizer or FakeTokenizer())
    if ready:
        policy.swap(client or FakeSamplingClient(), "tinker://m/step_0")
        policy.registered = True
    return policy


class RouteTests(unittest.TestCase):
    def setUp(self):
        self.client = FakeSamplingClient()
        self.policy = make_policy(client=self.client)
        self.http = TestClient(create_app(self.policy))

    def test_health_and_503_before_initialized(self):
        policy = make_policy(ready=False)
        http = TestClient(create_app(policy))
        self.assertEqual(http.get("/health").json(), {"status": "ok", "trainer_initialized": False})
        r = http.post("/generate", json={"input_ids": [1, 2]})
        self.assertEqual(r.status_code, 503)
        self.assertIn("error", r.json())
        policy.swap(FakeSamplingClient(), "tinker://m/step_0")
        self.assertFalse(http.get("/health").json()["trainer_initialized"])  # not registered yet
        policy.registered = True
        self.assertTrue(http.get("/health").json()["trainer_initialized"])

    def test_models(self):
        data = self.http.get("/v1/models").json()["data"]
        self.assertEqual(data[0]["id"], "tiny")

    def test_generate_sglang_shape(self):
        body = {
            "input_ids": [104, 105],
            "sampling_params": {"n": 1, "max_new_tokens": 3, "temperature": 1.0, "stop": None},
            "return_logprob": True,
            "return_text_in_logprobs": False,
        }
        r = self.http.post("/generate", json=body, headers={"Authorization": "Bearer x"})
        self.assertEqual(r.status_code, 200)
        one = r.json()
        self.assertIsInstance(one, dict)  # n == 1: a lone object
        self.assertEqual(one["text"], "ab")
        meta = one["meta_info"]
        self.assertEqual(meta["output_token_logprobs"], [[-0.25, 97, None], [-0.5, 98, None], [-0.75, 0, None]])
        self.assertEqual(meta["finish_reason"], {"type": "stop", "matched": 0})
        self.assertEqual((meta["prompt_tokens"], meta["completion_tokens"]), (2, 3))
        prompt, n, params = self.client.calls[-1]
        self.assertEqual((prompt, n, params.max_tokens, params.stop), ([104, 105], 1, 3, [0]))

        body["sampling_params"]["n"] = 3
        body["return_text_in_logprobs"] = True
        many = self.http.post("/generate", json=body).json()
        self.assertIsInstance(many, list)
        self.assertEqual(len(many), 3)
        self.assertEqual(many[1]["meta_info"]["finish_reason"], {"type": "length", "length": 3})
        self.assertEqual(many[1]["meta_info"]["output_token_logprobs"][0], [-0.25, 120, "x"])

    def test_generate_bad_bodies(self):
        for body in (
            {},
            {"input_ids": []},
            {"input_ids": [[1, 2]]},
            {"input_ids": [1, -2]},
            {"input_ids": [1], "sampling_params": {"n": 0}},
            {"input_ids": [1], "sampling_params": {"max_new_tokens": "many"}},
            {"input_ids": [1], "sampling_params": {"stop": 5}},
            {"input_ids": [1], "sampling_params": []},
        ):
            with self.subTest(body=body):
                r = self.http.post("/generate", json=body)
                self.assertEqual(r.status_code, 400)
                self.assertEqual(r.json()["error"]["type"], "invalid_request_error")
        r = self.http.post("/generate", content=b"{not json", headers={"Content-Type": "application/json"})
        self.assertEqual(r.status_code, 400)

    def test_chat_completions(self):
        r = self.http.post(
            "/v1/chat/completions",
            json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "n": 2, "max_tokens": 3, "logprobs": True},
        )
        self.assertEqual(r.status_code, 200)
        out = r.json()
        self.assertEqual(out["object"], "chat.completion")
        self.assertEqual([c["message"]["content"] for c in out["choices"]], ["ab", "xyz"])
        self.assertEqual([c["finish_reason"] for c in out["choices"]], ["stop", "length"])
        self.assertEqual(out["choices"][0]["logprobs"]["content"][0]["logprob"], -0.25)
        self.assertEqual(out["usage"]["completion_tokens"], 6)
        prompt, n, _ = self.client.calls[-1]
        self.assertEqual("".join(map(chr, prompt)), "[user]hi\n[assistant]")  # the template, generation prompt added
        self.assertEqual(n, 2)

    def test_chat_bad_bodies(self):
        for body in (
            {"messages": []},
            {"messages": [{"content": "no role"}]},
            {"messages": [{"role": "user", "content": "x"}], "stream": "yes"},  # streaming: test_streaming.py
            {"messages": [{"role": "user", "content": "x"}], "n": 500},
            {"messages": [{"role": "user", "content": "x"}], "temperature": "hot"},
            {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
        ):
            with self.subTest(body=body):
                self.assertEqual(self.http.post("/v1/chat/completions", json=body).status_code, 400)

    def test_completions(self):
        out = self.http.post("/v1/completions", json={"prompt": ["p", "q"], "n": 2, "max_tokens": 3, "logprobs": 1}).json()
        self.assertEqual(len(out["choices"]), 4)
        self.assertEqual([c["index"] for c in out["choices"]], [0, 1, 2, 3])
        self.assertEqual(out["choices"][1]["logprobs"]["tokens"], ["x", "y", "z"])
        self.assertEqual(self.http.post("/v1/completions", json={"prompt": 5}).status_code, 400)
        self.assertEqual(self.http.post("/v1/completions", json={"prompt": "x", "echo": True}).status_code, 400)

    def test_unknown_route_is_json(self):
        r = self.http.get("/nope")
        self.assertEqual(r.status_code, 404)
        self.assertIn("error", r.json())

    def test_sampling_failure_is_a_500(self):
        class Broken(FakeSamplingClient):
            async def sample(self, **kwargs):
                raise RuntimeError("engine on fire")

        http = TestClient(create_app(make_policy(client=Broken())))
        r = http.post("/generate", json={"input_ids": [1]})
        self.assertEqual(r.status_code, 500)
        self.assertIn("engine on fire", r.json()["error"]["message"])

    def test_missing_sampler_logprobs_are_computed(self):
        http = TestClient(create_app(make_policy(client=FakeSamplingClient(with_logprobs=False))))
        one = http.post("/generate", json={"input_ids": [1, 2], "return_logprob": True}).json()
        self.assertEqual([x[0] for x in one["meta_info"]["output_token_logprobs"]], [-1.0, -1.0, -1.0])

    def test_current_client_is_used(self):
        newer = FakeSamplingClient()
        self.policy.swap(newer, "tinker://m/step_1")
        self.http.post("/generate", json={"input_ids": [1]})
        self.assertEqual(len(newer.calls), 1)


class StopTests(unittest.TestCase):
    def test_token_ids_or_strings_never_both(self):
        text = {0: "<eos>", 7: "\n"}.get
        self.assertEqual(tinker_stop(SamplingSpec(), [0], text), [0])
        self.assertEqual(tinker_stop(SamplingSpec(stop_token_ids=[7]), [0], text), [7, 0])
        self.assertIsNone(tinker_stop(SamplingSpec(ignore_eos=True), [0], text))
        self.assertEqual(tinker_stop(SamplingSpec(stop=["END"], stop_token_ids=[7]), [0], text), ["END", "\n", "<eos>"])

    def test_generate_defaults(self):
        req = parse_generate({"input_ids": [3], "sampling_params": {"max_new_tokens": 4, "stop": "x", "top_k": 0, "min_p": 0.1}})
        self.assertEqual((req.n, req.spec.max_tokens, req.spec.stop, req.spec.top_k, req.return_logprob), (1, 4, ["x"], -1, False))
        with self.assertRaises(RequestError):
            parse_generate({"input_ids": [3], "sampling_params": {"temperature": -1}})


@unittest.skipUnless(os.path.isdir(TOKENIZER), "fixtures/tokenizer not found")
class AtroposlibTests(unittest.TestCase):
    """atroposlib 0.4.0's own SGLangServer + ManagedServer against the served app."""

    def test_managed_server_round_trip(self):
        try:
            from atroposlib.envs.server_handling.managed_server import ManagedServer
            from atroposlib.envs.server_handling.server_baseline import APIServerConfig
            from atroposlib.envs.server_handling.sglang_server import SGLangServer
        except Exception as e:  # pragma: no cover
            self.skipTest(f"atroposlib unavailable: {e}")
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
        vocab_tokens = tokenizer.encode("ab", add_special_tokens=False)
        eos = tokenizer.eos_token_id

        class Client(FakeSamplingClient):
            async def sample(self, prompt, num_samples, sampling_params):
                self.calls.append((prompt.to_ints(), num_samples, sampling_params))
                return SimpleNamespace(
                    sequences=[
                        SimpleNamespace(tokens=vocab_tokens + [eos], logprobs=[-0.5] * (len(vocab_tokens) + 1), stop_reason="stop")
                        for _ in range(num_samples)
                    ]
                )

        policy = make_policy(tokenizer=tokenizer, client=Client())
        sock = bind_socket("127.0.0.1", 0)
        port = sock.getsockname()[1]
        server = InferenceServer(create_app(policy), sock)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(),), daemon=True)
        thread.start()
        try:
            time.sleep(0.3)
            config = APIServerConfig(
                model_name=TOKENIZER, base_url=f"http://127.0.0.1:{port}/v1", api_key="x",
                server_type="sglang", timeout=30, health_check=False,
            )

            async def go():
                managed = ManagedServer(SGLangServer(config), tokenizer=tokenizer)
                out = await managed.chat_completion(messages=[{"role": "user", "content": "Write digits."}], n=3, max_tokens=5, temperature=1.0)
                return out, managed.get_state()["nodes"]

            out, nodes = asyncio.run(go())
        finally:
            server.stop()
            thread.join(5)
            loop.close()
        self.assertEqual(len(out.choices), 3)
        self.assertEqual(out.choices[0].message.content, "ab")
        self.assertEqual(out.choices[0].finish_reason, "stop")
        node = nodes[0]
        prompt_len = node.masked_tokens.count(-100)
        self.assertEqual(node.tokens[prompt_len:], vocab_tokens + [eos])
        self.assertEqual(node.logprobs, [1.0] * prompt_len + [-0.5] * (len(vocab_tokens) + 1))
        self.assertEqual(len(node.tokens), len(node.masked_tokens))


if __name__ == "__main__":
    unittest.main()


class NamedPoliciesTests(unittest.TestCase):
    """Several policies on one server (rl_trainer.checkpoints): a request's `model` chooses."""

    def setUp(self):
        self.base_client = FakeSamplingClient()
        self.trained_client = FakeSamplingClient()
        base = make_policy(client=self.base_client)
        base.model_name = "run:r1@base"
        trained = make_policy(client=self.trained_client)
        trained.model_name = "run:r1@4"
        self.http = TestClient(create_app({base.model_name: base, trained.model_name: trained}))

    def chat(self, model):
        return self.http.post(
            "/v1/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
        )

    def test_the_model_named_answers(self):
        answer = self.chat("run:r1@4")
        self.assertEqual(answer.status_code, 200, answer.text)
        self.assertEqual(answer.json()["model"], "run:r1@4")
        self.assertEqual((len(self.trained_client.calls), len(self.base_client.calls)), (1, 0))
        self.assertEqual(self.chat("run:r1@base").status_code, 200)
        self.assertEqual(len(self.base_client.calls), 1)

    def test_an_unknown_or_missing_model_is_404_naming_those_served(self):
        for model in ["run:r1@9", None, 7]:
            answer = self.chat(model)
            self.assertEqual(answer.status_code, 404, answer.text)
            error = answer.json()["error"]
            self.assertEqual((error["type"], error["param"]), ("not_found_error", "model"))
            self.assertIn("run:r1@base", error["message"])

    def test_models_lists_every_policy(self):
        listed = [m["id"] for m in self.http.get("/v1/models").json()["data"]]
        self.assertEqual(listed, ["run:r1@base", "run:r1@4"])


class CheckpointArgumentTests(unittest.TestCase):
    def test_model_pairs(self):
        from rl_trainer.checkpoints import model_pairs

        self.assertEqual(model_pairs(["a=tinker://m/weights/x"]), [("a", "tinker://m/weights/x")])
        for bad in ["a", "=p", "a="]:
            with self.assertRaises(ValueError):
                model_pairs([bad])

    def test_backend_config_makes_room_for_every_adapter(self):
        import json

        from rl_trainer.checkpoints import backend_config

        config = json.loads(backend_config('{"max_lora_adapters": 2, "train_micro_batch_size": 8}', 3, 8))
        self.assertEqual(config, {"max_lora_adapters": 4, "max_lora_rank": 8, "train_micro_batch_size": 8})
        self.assertEqual(json.loads(backend_config('{"max_lora_adapters": 9, "max_lora_rank": 32}', 1, 8)),
                         {"max_lora_adapters": 9, "max_lora_rank": 32})
        with self.assertRaises(ValueError):
            backend_config("[1]", 1, 8)


class CheckpointWatchTests(unittest.TestCase):
    """`--exit-with-parent`: the server stops when its parent is gone, and fails when its
    engine exits while serving."""

    def _watch(self, parent: int, engine_code, limit: float = 5):
        import asyncio

        from rl_trainer import checkpoints

        class Engine:
            returncode = engine_code

            def poll(self):
                return engine_code

        async def run():
            stopping = asyncio.Event()
            lost = []
            await asyncio.wait_for(checkpoints.watch(parent, Engine(), stopping, lost), limit)
            return stopping.is_set(), lost

        return asyncio.run(run())

    def test_a_parent_gone_stops_it_without_a_failure(self):
        import os

        # A pid that is not this process's parent: as if the parent had died and this process
        # been adopted.
        self.assertEqual(self._watch(os.getppid() + 1, None), (True, []))

    def test_an_engine_that_exits_stops_it_and_says_so(self):
        import os

        self.assertEqual(self._watch(os.getppid(), 3), (True, ["the engine exited with 3"]))

    def test_no_parent_watched_and_a_live_engine_keep_it_serving(self):
        import asyncio

        with self.assertRaises(asyncio.TimeoutError):
            self._watch(0, None, limit=1.5)

    def test_a_parent_gone_stops_it_even_when_its_log_pipe_is_broken(self):
        import io
        import os
        from unittest import mock

        class Broken(io.StringIO):
            def write(self, text):
                raise BrokenPipeError(32, "Broken pipe")

        # With its owner killed, nobody reads its output: saying so must not keep it serving.
        with mock.patch("sys.stderr", Broken()):
            self.assertEqual(self._watch(os.getppid() + 1, None), (True, []))
