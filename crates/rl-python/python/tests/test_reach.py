import asyncio
import socket
import ssl
import threading
import time
import unittest

import httpx
import tinker

from rl_trainer import reach
from rl_trainer.engine import refusal


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SilentListener:
    """Accepts connections on loopback and never answers (a hung service)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.held = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self):
        self.sock.close()
        for conn in self.held:
            conn.close()


def connect_error(cause: BaseException) -> tinker.APIConnectionError:
    """What the SDK raises: "Connection error.", the httpx error (and its cause) behind it."""
    request = httpx.Request("POST", "http://x")
    try:
        try:
            raise cause
        except BaseException as inner:
            raise httpx.ConnectError(str(inner)) from inner
    except httpx.ConnectError as middle:
        try:
            raise tinker.APIConnectionError(request=request) from middle
        except tinker.APIConnectionError as outer:
            return outer


class ReachTests(unittest.TestCase):
    def test_kinds_are_read_off_the_sdks_error_chain(self):
        self.assertEqual(reach.failure_kind(connect_error(socket.gaierror(-2, "Name or service not known"))), "DNS")
        self.assertEqual(reach.failure_kind(connect_error(ConnectionRefusedError(111, "Connection refused"))), "connection refused")
        self.assertEqual(reach.failure_kind(connect_error(ssl.SSLCertVerificationError("certificate verify failed"))), "TLS")
        self.assertEqual(reach.failure_kind(httpx.ReadTimeout("timed out")), "timeout")
        self.assertEqual(reach.failure_kind(httpx.ConnectError("[Errno -3] Temporary failure in name resolution")), "DNS")

    def test_a_refusing_host_is_named_within_seconds(self):
        port = closed_port()
        url = f"http://127.0.0.1:{port}"
        started = time.monotonic()
        error = asyncio.run(reach.probe(url, 5))
        self.assertLess(time.monotonic() - started, 5)
        self.assertIsNotNone(error)
        said = str(reach.unreachable(url, reach.service_setting(url, {}), error, 5))
        self.assertIn(f"127.0.0.1:{port}, connection refused", said)
        self.assertIn("tinker.base_url", said)

    def test_a_host_that_never_answers_is_a_timeout_within_the_bound(self):
        listener = SilentListener()
        try:
            url = f"http://127.0.0.1:{listener.port}"
            started = time.monotonic()
            error = asyncio.run(reach.probe(url, 1.0))
            self.assertLess(time.monotonic() - started, 4)
            said = str(reach.unreachable(url, reach.service_setting(None, {"TINKER_BASE_URL": url}), error, 1.0))
            self.assertIn(f"127.0.0.1:{listener.port}, timeout (no answer within 1 s)", said)
            self.assertIn("TINKER_BASE_URL", said)
        finally:
            listener.close()

    def test_tls_to_a_plain_server_is_tls(self):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def answer_plainly():
            conn, _ = listener.accept()
            conn.recv(1024)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            conn.close()

        threading.Thread(target=answer_plainly, daemon=True).start()
        try:
            error = asyncio.run(reach.probe(f"https://127.0.0.1:{port}", 5))
            self.assertEqual(reach.failure_kind(error), "TLS", repr(error))
        finally:
            listener.close()

    def test_any_answer_is_reached(self):
        transport = httpx.MockTransport(lambda request: httpx.Response(404))
        self.assertIsNone(asyncio.run(reach.probe("http://127.0.0.1:9", 1, transport=transport)))

    def test_the_default_service_is_named_as_such(self):
        setting = reach.service_setting(None, {})
        self.assertIn("default", setting)
        self.assertIn("[locked.tinker] base_url", setting)
        self.assertEqual(reach.authority(reach.HOSTED_TINKER_URL), "tinker.thinkingmachines.dev:443")

    def test_an_unreachable_service_is_said_without_a_traceback(self):
        error = reach.ServiceUnreachable("the Tinker service at http://h could not be reached")
        self.assertEqual(refusal(error), str(error))


if __name__ == "__main__":
    unittest.main()
