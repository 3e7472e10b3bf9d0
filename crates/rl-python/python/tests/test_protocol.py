"""rl_engine's translation of the current SDK's wire formats, checked against the SDK's own
encoders and decoders (tinker.proto), so a drift between the pinned SDK and the engine shows here."""

import asyncio
import json
import unittest
from unittest import mock

import numpy as np
import zstandard
from tinker import types
from tinker.proto import tinker_public_pb2 as pb
from tinker.proto.request_conv import forward_backward_request_to_proto
from tinker.proto.response_conv import deserialize_forward_backward_output, deserialize_sample_response

from rl_engine import protocol
from rl_engine.routes import CurrentProtocol


def datum(tokens, advantage=1.0):
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": np.asarray(tokens[1:], dtype=np.int64),
            "logprobs": np.full(len(tokens) - 1, -2.5, dtype=np.float32),
            "advantages": np.full(len(tokens) - 1, advantage, dtype=np.float32),
        },
    )


def request_bytes(data, loss_fn="importance_sampling", forward_only=False, config=None):
    request = types.ForwardBackwardRequest(
        forward_backward_input=types.ForwardBackwardInput(data=data, loss_fn=loss_fn, loss_fn_config=config),
        model_id="model_1",
        seq_id=3,
    )
    message = forward_backward_request_to_proto(request)
    message.forward_only = forward_only
    return message.SerializeToString()


class ForwardBackwardRequests(unittest.TestCase):
    def test_the_sdks_request_becomes_skyrl_json(self):
        body = request_bytes([datum([5, 6, 7, 8]), datum([9, 10, 11], advantage=-0.5)], config={"clip": 0.2})
        route, translated = protocol.forward_backward_from_proto(body)
        self.assertEqual(route, "/api/v1/forward_backward")
        request = json.loads(translated)
        self.assertEqual(request["model_id"], "model_1")
        inputs = request["forward_backward_input"]
        self.assertEqual(inputs["loss_fn"], "importance_sampling")
        self.assertAlmostEqual(inputs["loss_fn_config"]["clip"], 0.2, places=6)
        first, second = inputs["data"]
        self.assertEqual(first["model_input"], {"chunks": [{"tokens": [5, 6, 7]}]})
        self.assertEqual(first["loss_fn_inputs"]["target_tokens"]["data"], [6, 7, 8])
        self.assertEqual(first["loss_fn_inputs"]["logprobs"]["data"], [-2.5] * 3)
        self.assertEqual(second["loss_fn_inputs"]["advantages"]["data"], [-0.5, -0.5])

    def test_forward_only_goes_to_forward(self):
        route, translated = protocol.forward_backward_from_proto(request_bytes([datum([1, 2, 3])], loss_fn="cross_entropy", forward_only=True))
        self.assertEqual(route, "/api/v1/forward")
        self.assertIn("forward_input", json.loads(translated))
        self.assertIsNone(json.loads(translated)["forward_input"]["loss_fn_config"])

    def test_what_the_engine_cannot_do_is_refused_by_name(self):
        message = pb.ForwardBackwardRequest(model_id="m", loss_fn="cross_entropy")
        message.data.add().model_input.add().image.data = b"png"
        with self.assertRaisesRegex(protocol.Unsupported, "image chunks"):
            protocol.forward_backward_from_proto(message.SerializeToString())
        message = pb.ForwardBackwardRequest(model_id="m", loss_fn="cross_entropy")
        tensor = message.data.add().loss_fn_inputs["weights"]
        tensor.sparse_csr.values = b"\0\0\0\0"
        with self.assertRaisesRegex(protocol.Unsupported, "sparse"):
            protocol.forward_backward_from_proto(message.SerializeToString())
        message = pb.ForwardBackwardRequest(model_id="m", loss_fn="cross_entropy")
        message.loss_fn_config_v2["mode"].text = "fancy"
        with self.assertRaisesRegex(protocol.Unsupported, "text values"):
            protocol.forward_backward_from_proto(message.SerializeToString())
        with self.assertRaisesRegex(protocol.Unsupported, "not a ForwardBackwardRequest"):
            protocol.forward_backward_from_proto(b"\xff\xff\xff not protobuf")

    def test_zstd_bodies_are_bounded(self):
        body = request_bytes([datum([1, 2, 3])])
        self.assertEqual(protocol.decompress(zstandard.ZstdCompressor().compress(body), "zstd"), body)
        self.assertEqual(protocol.decompress(body, ""), body)
        bomb = zstandard.ZstdCompressor().compress(b"\0" * 4096)
        with mock.patch.object(protocol, "MAX_BODY_BYTES", 1024):
            with self.assertRaisesRegex(protocol.Unsupported, "larger than 1024"):
                protocol.decompress(bomb, "zstd")
        with self.assertRaisesRegex(protocol.Unsupported, "gzip"):
            protocol.decompress(body, "gzip")


class Results(unittest.TestCase):
    def test_a_forward_backward_result_reads_back_through_the_sdk(self):
        result = {
            "loss_fn_output_type": "ArrayRecord",
            "metrics": {"loss:sum": 1.5},
            "loss_fn_outputs": [
                {"logprobs": {"data": [-1.0, -2.0, -3.0], "dtype": "float32"}, "elementwise_loss": {"data": [0.5, 0.25, 0.75], "dtype": "float32"}},
                {"logprobs": {"data": [-4.0], "dtype": "float32"}, "elementwise_loss": {"data": [0.125], "dtype": "float32"}},
            ],
        }
        output = deserialize_forward_backward_output(protocol.result_to_proto(result))
        self.assertEqual(output.metrics, {"loss:sum": 1.5})
        self.assertEqual(len(output.loss_fn_outputs), 2)
        self.assertEqual(output.loss_fn_outputs[0]["logprobs"].tolist(), [-1.0, -2.0, -3.0])
        self.assertEqual(output.loss_fn_outputs[1]["elementwise_loss"].tolist(), [0.125])

    def test_a_sample_result_reads_back_through_the_sdk(self):
        result = {
            "sequences": [
                {"tokens": [4, 5, 2], "logprobs": [-0.5, -1.0, -0.25], "stop_reason": "stop"},
                {"tokens": [7, 8], "logprobs": None, "stop_reason": "length"},
            ],
            "prompt_logprobs": [None, -3.0, -1.5],
        }
        response = deserialize_sample_response(protocol.result_to_proto(result))
        first, second = response.sequences
        self.assertEqual((list(first.tokens), first.stop_reason), ([4, 5, 2], "stop"))
        self.assertEqual(list(first.logprobs), [-0.5, -1.0, -0.25])
        self.assertEqual((list(second.tokens), second.stop_reason, second.logprobs), ([7, 8], "length", None))
        prompt = list(response.prompt_logprobs)
        self.assertTrue(prompt[0] is None or np.isnan(prompt[0]))
        self.assertEqual(prompt[1:], [-3.0, -1.5])

    def test_other_results_stay_json(self):
        self.assertIsNone(protocol.result_to_proto({"path": "tinker://m/sampler_weights/s"}))
        self.assertIsNone(protocol.result_to_proto([1, 2]))
        with self.assertRaisesRegex(protocol.Unsupported, "stop_reason"):
            protocol.result_to_proto({"sequences": [{"tokens": [1], "stop_reason": "eaten"}]})

    def test_sample_futures_get_one_id_per_sample(self):
        future = protocol.with_sequence_ids({"request_id": "12", "status": "pending"}, 3)
        self.assertEqual(future["sample_sequence_ids"], ["seq-12-0", "seq-12-1", "seq-12-2"])
        self.assertEqual(protocol.with_sequence_ids({"detail": "no"}, 2), {"detail": "no"})


class Engine:
    """An inner ASGI app recording what reached it and answering `answer`."""

    def __init__(self, answer, content_type=b"application/json"):
        self.answer = answer
        self.content_type = content_type
        self.seen = []

    async def __call__(self, scope, receive, send):
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        self.seen.append((scope["path"], dict(scope["headers"]), body))
        data = json.dumps(self.answer).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", self.content_type), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data[:3], "more_body": True})
        await send({"type": "http.response.body", "body": data[3:], "more_body": False})


def call(app, path, body, headers):
    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "headers": headers}
    parts = [{"type": "http.request", "body": body[:5], "more_body": True}, {"type": "http.request", "body": body[5:], "more_body": False}]
    sent = []

    async def receive():
        return parts.pop(0)

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = sent[0]
    return start["status"], dict(start["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


class Middleware(unittest.TestCase):
    def test_a_protobuf_forward_backward_reaches_the_engine_as_json(self):
        engine = Engine({"future_id": "1", "request_id": "1"})
        body = zstandard.ZstdCompressor().compress(request_bytes([datum([1, 2, 3])]))
        headers = [(b"content-type", b"application/x-protobuf"), (b"content-encoding", b"zstd"), (b"content-length", str(len(body)).encode())]
        status, _, answer = call(CurrentProtocol(engine), "/api/v1/forward_backward", body, headers)
        self.assertEqual(status, 200, answer)
        path, seen_headers, seen_body = engine.seen[0]
        self.assertEqual(path, "/api/v1/forward_backward")
        self.assertEqual(seen_headers[b"content-type"], b"application/json")
        self.assertNotIn(b"content-encoding", seen_headers)
        self.assertEqual(int(seen_headers[b"content-length"]), len(seen_body))
        self.assertEqual(json.loads(seen_body)["forward_backward_input"]["data"][0]["model_input"]["chunks"][0]["tokens"], [1, 2])

    def test_a_refused_body_is_a_400_with_the_reason(self):
        engine = Engine({})
        status, headers, answer = call(CurrentProtocol(engine), "/api/v1/forward_backward", b"\xff\xfe junk", [(b"content-type", b"application/x-protobuf")])
        self.assertEqual(status, 400)
        self.assertIn("not a ForwardBackwardRequest", json.loads(answer)["detail"])
        self.assertEqual(engine.seen, [])

    def test_results_are_protobuf_only_when_asked(self):
        result = {"loss_fn_outputs": [{"logprobs": {"data": [-1.0], "dtype": "float32"}}], "metrics": {}}
        status, headers, answer = call(CurrentProtocol(Engine(result)), "/api/v1/retrieve_future", b'{"request_id": "1"}', [(b"accept", b"application/x-protobuf")])
        self.assertEqual((status, headers[b"content-type"]), (200, b"application/x-protobuf"))
        self.assertEqual(int(headers[b"content-length"]), len(answer))
        self.assertEqual(deserialize_forward_backward_output(answer).loss_fn_outputs[0]["logprobs"].tolist(), [-1.0])
        status, headers, answer = call(CurrentProtocol(Engine(result)), "/api/v1/retrieve_future", b'{"request_id": "1"}', [])
        self.assertEqual(json.loads(answer), result)
        saved = {"path": "tinker://m/sampler_weights/s"}
        status, headers, answer = call(CurrentProtocol(Engine(saved)), "/api/v1/retrieve_future", b'{"request_id": "1"}', [(b"accept", b"application/x-protobuf")])
        self.assertEqual((headers[b"content-type"], json.loads(answer)), (b"application/json", saved))

    def test_sample_futures_carry_sequence_ids(self):
        engine = Engine({"future_id": "7", "request_id": "7", "status": "pending"})
        status, headers, answer = call(CurrentProtocol(engine), "/api/v1/asample", json.dumps({"num_samples": 2}).encode(), [(b"content-type", b"application/json")])
        self.assertEqual(json.loads(answer)["sample_sequence_ids"], ["seq-7-0", "seq-7-1"])
        self.assertEqual(int(headers[b"content-length"]), len(answer))
        self.assertEqual(json.loads(engine.seen[0][2]), {"num_samples": 2})


if __name__ == "__main__":
    unittest.main()
