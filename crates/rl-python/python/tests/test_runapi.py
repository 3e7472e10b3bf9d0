import asyncio
import unittest

import httpx

from rl_trainer.runapi import BatchTimeout, RunApi, RunApiError


def api(handler, **kwargs):
    lines = []
    client = RunApi("http://run-api", lines.append, transport=httpx.MockTransport(handler), **kwargs)
    return client, lines


class RunApiTests(unittest.TestCase):
    def test_polls_until_a_batch_arrives(self):
        answers = iter([{"batch": None}, {"batch": []}, {"batch": [{"tokens": [[1]]}]}])

        def handler(request):
            self.assertEqual(request.url.path, "/batch")
            return httpx.Response(200, json=next(answers))

        client, lines = api(handler)
        batch, waited = asyncio.run(client.next_batch(poll_secs=0.01, log_every=0.0))
        self.assertEqual(batch, [{"tokens": [[1]]}])
        self.assertGreaterEqual(waited, 0.0)
        self.assertTrue(all(line.startswith("waiting for a batch from run-api (") for line in lines))
        self.assertEqual(len(lines), 2)

    def test_gives_up_after_the_batch_timeout(self):
        client, lines = api(lambda r: httpx.Response(200, json={"batch": None}))
        with self.assertRaises(BatchTimeout) as ctx:
            asyncio.run(client.next_batch(timeout_secs=0.2, poll_secs=0.05, log_every=0.1))
        self.assertIn("0.2 s", str(ctx.exception))
        self.assertTrue(lines)

    def test_transient_failures_are_retried(self):
        calls = {"n": 0}

        def handler(request):
            calls["n"] += 1
            if calls["n"] == 1:
                raise httpx.ConnectError("refused")
            if calls["n"] == 2:
                return httpx.Response(503, text="busy")
            return httpx.Response(200, json={"batch": [{"x": 1}]})

        client, _ = api(handler)
        batch, _ = asyncio.run(client.next_batch(poll_secs=0.01))
        self.assertEqual(batch, [{"x": 1}])
        self.assertEqual(calls["n"], 3)

    def test_a_lost_batch_answer_is_not_asked_again(self):
        calls = {"n": 0}

        def handler(request):
            calls["n"] += 1
            raise httpx.ReadTimeout("the answer never came")

        client, _ = api(handler)
        with self.assertRaises(RunApiError) as ctx:
            asyncio.run(client.next_batch(poll_secs=0.01))
        self.assertIn("not asked again", str(ctx.exception))
        self.assertEqual(calls["n"], 1, "run-api may have handed the batch out already")

    def test_unreachable_is_bounded(self):
        def handler(request):
            raise httpx.ConnectError("refused")

        client, _ = api(handler, unreachable_secs=0.3)
        with self.assertRaises(RunApiError) as ctx:
            asyncio.run(client.next_batch(poll_secs=0.01))
        self.assertIn("unreachable", str(ctx.exception))

    def test_refusals_fail_at_once(self):
        client, _ = api(lambda r: httpx.Response(200, json={"status": "error", "message": "Trainer not registered.", "batch": []}))
        with self.assertRaises(RunApiError):
            asyncio.run(client.next_batch())
        client, _ = api(lambda r: httpx.Response(422, json={"detail": "bad"}))
        with self.assertRaises(RunApiError):
            asyncio.run(client.register({"batch_size": "x"}))

    def test_register_sends_the_payload(self):
        seen = {}

        def handler(request):
            import json

            seen.update(json.loads(request.content))
            return httpx.Response(200, json={"uuid": 42})

        client, _ = api(handler)
        self.assertEqual(asyncio.run(client.register({"batch_size": 8, "num_steps": 3})), 42)
        self.assertEqual(seen, {"batch_size": 8, "num_steps": 3})


if __name__ == "__main__":
    unittest.main()


class RunApiConnectionTests(unittest.TestCase):
    def test_each_request_opens_its_own_connection(self):
        """A server that keeps connections alive, as uvicorn does: the client must not send a
        poll on a connection it kept (the server may be closing it)."""

        async def scenario():
            connections = []

            async def serve(reader, writer):
                connections.append(writer)
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    if not head:
                        break
                    body = b'{"batch": null}' if len(connections) < 3 else b'{"batch": [{"x": 1}]}'
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n".encode()
                        + body
                    )
                    await writer.drain()

            server = await asyncio.start_server(serve, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            client = RunApi(f"http://127.0.0.1:{port}", lambda line: None)
            try:
                batch, _ = await client.next_batch(timeout_secs=30, poll_secs=0.01)
            finally:
                await client.close()
                server.close()
            return batch, len(connections)

        batch, connections = asyncio.run(scenario())
        self.assertEqual(batch, [{"x": 1}])
        self.assertEqual(connections, 3)
