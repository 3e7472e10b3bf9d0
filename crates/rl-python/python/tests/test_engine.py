import asyncio
import unittest

import httpx
import tinker

from rl_trainer.batch import AlignedSequence
from rl_trainer.engine import EngineUnreachable, RequestTimeout, Watchdog, bounded, is_retryable, refusal, tensor_list, to_datum, with_retries


def status_error(code, body=None):
    request = httpx.Request("POST", "http://x")
    return tinker.APIStatusError("boom", response=httpx.Response(code, request=request), body=body)


SDK_REFUSED = {"detail": "Your Tinker SDK version is no longer supported. Please upgrade to the latest version."}


class EngineTests(unittest.TestCase):
    def test_the_services_refusals_are_said_with_their_fix(self):
        sdk = refusal(status_error(400, SDK_REFUSED))
        self.assertIn(SDK_REFUSED["detail"], sdk)
        self.assertIn("tinker SDK (", sdk)
        self.assertIn("rl setup", sdk)
        key = refusal(status_error(401, {"detail": "Invalid API key"}))
        self.assertTrue(key.startswith("authentication failed"), key)
        self.assertIn("Invalid API key", key)
        self.assertIn("TINKER_API_KEY", key)
        self.assertIn("HTTP 403", refusal(status_error(403, {"detail": "no"})))
        self.assertIsNone(refusal(status_error(400, {"detail": "Maximum number of LoRA adapters reached"})))
        self.assertIsNone(refusal(status_error(500, SDK_REFUSED)))
        self.assertIsNone(refusal(ValueError("no")))

    def test_retryable_errors(self):
        self.assertTrue(is_retryable(tinker.APIConnectionError(request=httpx.Request("GET", "http://x"))))
        self.assertTrue(is_retryable(status_error(429)))
        self.assertTrue(is_retryable(status_error(503)))
        self.assertFalse(is_retryable(status_error(400)))
        self.assertFalse(is_retryable(status_error(409)))
        self.assertFalse(is_retryable(ValueError("no")))

    def test_with_retries_is_bounded(self):
        attempts = []

        async def flaky():
            attempts.append(1)
            raise status_error(500)

        with self.assertRaises(tinker.APIStatusError):
            asyncio.run(with_retries(flaky, "x", retries=2, timeout=0, say=lambda m: None, base_delay=0.01))
        self.assertEqual(len(attempts), 3)

        attempts.clear()

        async def wrong():
            attempts.append(1)
            raise ValueError("bad request")

        with self.assertRaises(ValueError):
            asyncio.run(with_retries(wrong, "x", retries=5, timeout=0, say=lambda m: None, base_delay=0.01))
        self.assertEqual(len(attempts), 1)

    def test_bounded(self):
        with self.assertRaises(RequestTimeout):
            asyncio.run(bounded(asyncio.sleep(1), "sleeping", 0.05))

    def test_watchdog_trips_when_refused(self):
        def refused(request):
            raise httpx.ConnectError("connection refused")

        dog = Watchdog("http://127.0.0.1:9", limit=0.2, interval=0.02, transport=httpx.MockTransport(refused))
        with self.assertRaises(EngineUnreachable) as ctx:
            asyncio.run(asyncio.wait_for(dog.run(), 5))
        self.assertIn("unreachable", str(ctx.exception))

    def test_watchdog_accepts_any_answer(self):
        dog = Watchdog("http://127.0.0.1:9", limit=0.1, interval=0.01, transport=httpx.MockTransport(lambda r: httpx.Response(401)))
        with self.assertRaises(asyncio.TimeoutError):
            asyncio.run(asyncio.wait_for(dog.run(), 0.3))

    def test_datum_from_plain_lists(self):
        seq = AlignedSequence(0, 0, [1, 2, 3], [2, 3, 4], [0.0, -0.5, -0.25], [0.0, 1.5, 1.5], [False, True, True])
        datum = to_datum(seq)
        self.assertEqual(datum.model_input.to_ints(), [1, 2, 3])
        self.assertEqual(datum.loss_fn_inputs["target_tokens"].dtype, "int64")
        self.assertEqual(datum.loss_fn_inputs["logprobs"].dtype, "float32")
        self.assertEqual(datum.loss_fn_inputs["advantages"].tolist(), [0.0, 1.5, 1.5])
        self.assertEqual(tensor_list(datum.loss_fn_inputs["logprobs"]), [0.0, -0.5, -0.25])
        self.assertEqual(tensor_list({"data": [1, 2]}), [1.0, 2.0])


if __name__ == "__main__":
    unittest.main()
