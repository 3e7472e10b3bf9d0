"""The hosted helper: its arguments refused before the SDK is asked anything, an export's
tar and flow with the service faked, and a service that never answers bounded."""

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import tempfile
import unittest
from concurrent.futures import Future
from datetime import datetime, timedelta, timezone
from time import monotonic
from types import SimpleNamespace
from unittest import mock

from rl_trainer import hosted

STATE = "tinker://run-1/weights/step_4"
EXPORT = "tinker://session-1:train:0/external_weights/rl-export"


class HostedArgumentTests(unittest.TestCase):
    def refused(self, argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(hosted.main(argv), hosted.EXIT_USAGE, argv)
        return err.getvalue()

    def test_paths_must_be_tinker_checkpoint_paths(self):
        for path in ["run/sampler_weights/x", "tinker://run/other/x", "tinker://run/weights", "tinker:///weights/x"]:
            self.refused(["keep", path, "--forever"])
            self.refused(["export", path, "--out", "/tmp/x"])

    def test_keep_needs_a_positive_ttl_or_forever_not_both(self):
        self.refused(["keep", "tinker://r/weights/s"])
        self.refused(["keep", "tinker://r/weights/s", "--ttl-seconds", "5", "--forever"])
        self.assertIn("above 0", self.refused(["keep", "tinker://r/weights/s", "--ttl-seconds", "0"]))

    def test_export_takes_a_saved_state_not_sampler_weights(self):
        said = self.refused(["export", "tinker://r/sampler_weights/s", "--out", "/tmp/x"])
        self.assertIn("exports saved training states", said)
        self.assertIn("not sampler weights", said)
        self.refused(["export", STATE])  # somewhere to write
        self.assertIn("above 0", self.refused(["export", STATE, "--out", "/tmp/x", "--max-bytes", "0"]))
        self.refused(["archive", "tinker://r/sampler_weights/s", "--out", "/tmp/x"])  # no longer a command

    def test_exported_file_names_must_stay_inside_the_tar(self):
        for name in ["adapter_config.json", "sub/adapter_model.safetensors", "a.b/..c"]:
            self.assertEqual(hosted.safe_name(name), name)
        for name in ["", "/etc/passwd", "../x", "a/../b", "a//b", "a/", "./a", "a/."]:
            with self.assertRaises(RuntimeError, msg=name):
                hosted.safe_name(name)


class TarTests(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.folder.name, "export.tar")
        self.opened = []

    def tearDown(self):
        self.folder.cleanup()

    def opener(self, files):
        def open_file(name):
            self.opened.append(name)
            if isinstance(files[name], Exception):
                raise files[name]
            return io.BytesIO(files[name])

        return open_file

    def left(self):
        return sorted(os.listdir(self.folder.name))

    def test_files_are_written_as_a_plain_tar_by_their_names(self):
        files = {"adapter_config.json": b"{}", "sub/adapter_model.safetensors": b"x" * 3000}
        written = hosted.write_tar(self.out, sorted(files), self.opener(files), max_bytes=3002)
        self.assertEqual(written, 3002)
        with tarfile.open(self.out, "r:") as tar:  # uncompressed
            self.assertEqual(tar.getnames(), sorted(files))
            for name, data in files.items():
                self.assertEqual(tar.extractfile(name).read(), data)
        self.assertEqual(self.left(), ["export.tar"])

    def test_too_many_bytes_leave_nothing_behind(self):
        files = {"a": b"x" * 10, "b": b"y" * 10}
        with self.assertRaisesRegex(RuntimeError, "larger than 15 bytes"):
            hosted.write_tar(self.out, ["a", "b"], self.opener(files), max_bytes=15)
        self.assertEqual(self.left(), [])

    def test_a_failed_download_leaves_nothing_behind_and_keeps_an_older_file(self):
        with open(self.out, "wb") as f:
            f.write(b"older")
        files = {"a": b"x", "b": OSError("connection reset")}
        with self.assertRaises(OSError):
            hosted.write_tar(self.out, ["a", "b"], self.opener(files), max_bytes=100)
        self.assertEqual(self.left(), ["export.tar"])
        with open(self.out, "rb") as f:
            self.assertEqual(f.read(), b"older")

    def test_an_unsafe_name_is_refused_before_anything_is_fetched(self):
        with self.assertRaisesRegex(RuntimeError, "unsafe name"):
            hosted.write_tar(self.out, ["a", "../b"], self.opener({"a": b"x", "../b": b"y"}), max_bytes=100)
        self.assertEqual((self.opened, self.left()), ([], []))


def done(value):
    future = Future()
    future.set_result(value)
    return future


class FakeService:
    """The SDK's clients as the export uses them, recording what was asked."""

    def __init__(self, files, expires_in=timedelta(hours=1), delete_fails=False):
        self.files, self.expires_in, self.delete_fails, self.asked = files, expires_in, delete_fails, []

    def ServiceClient(self, **access):
        self.asked.append(("service", access))
        return SimpleNamespace(create_training_client_from_state=self.load, close=self.close)

    def RestClient(self, **access):
        self.asked.append(("rest", access))
        return SimpleNamespace(
            get_external_weights_urls=self.sign,
            set_checkpoint_ttl_from_tinker_path=lambda path, ttl: done(self.asked.append(("ttl", path, ttl))),
            delete_checkpoint_from_tinker_path=self.delete,
        )

    def load(self, path, user_metadata=None):
        self.asked.append(("load", path))
        return done(SimpleNamespace(save_weights_external=self.save))

    def save(self, name, ttl_seconds=None):
        self.asked.append(("save", name, ttl_seconds))
        return done(SimpleNamespace(path=EXPORT))

    def sign(self, path):
        self.asked.append(("sign", path))
        urls = {name: f"https://signed.invalid/{name}" for name in self.files}
        return done(SimpleNamespace(urls=urls, expires=datetime.now(timezone.utc) + self.expires_in))

    def urlopen(self, url, timeout=None):
        data = self.files[url[len("https://signed.invalid/"):]]
        if isinstance(data, Exception):
            raise data
        return io.BytesIO(data)

    def delete(self, path):
        self.asked.append(("delete", path))
        if self.delete_fails:
            raise RuntimeError("503 busy")
        return done(None)

    def close(self, status):
        self.asked.append(("close", status))
        return done(None)


class ExportTests(unittest.TestCase):
    def export(self, fake, out, *extra):
        stdout, stderr = io.StringIO(), io.StringIO()
        env = {"TINKER_API_KEY": "tml-test", "TINKER_BASE_URL": "http://127.0.0.1:9"}
        with mock.patch.dict(os.environ, env), mock.patch("tinker.ServiceClient", fake.ServiceClient), \
                mock.patch("tinker.RestClient", fake.RestClient), mock.patch("urllib.request.urlopen", fake.urlopen), \
                contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = hosted.main(["export", STATE, "--out", out, *extra])
        return code, stdout.getvalue(), stderr.getvalue()

    def test_a_state_is_loaded_exported_downloaded_and_the_export_deleted(self):
        fake = FakeService({"adapter_model.safetensors": b"w" * 7, "adapter_config.json": b"{}"})
        with tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "x.tar")
            code, printed, said = self.export(fake, out)
            self.assertEqual(code, 0, said)
            with tarfile.open(out, "r:") as tar:
                self.assertEqual(tar.getnames(), ["adapter_config.json", "adapter_model.safetensors"])
        files = ["adapter_config.json", "adapter_model.safetensors"]
        self.assertEqual(json.loads(printed), {"path": STATE, "out": out, "bytes": 9, "files": files})
        access = {"api_key": "tml-test", "base_url": "http://127.0.0.1:9"}
        self.assertEqual(fake.asked, [
            ("service", access), ("rest", access), ("load", STATE), ("save", "rl-export", 3600),
            ("sign", EXPORT), ("ttl", EXPORT, 3600), ("delete", EXPORT), ("close", "success"),
        ])
        self.assertEqual(said, "")

    def test_urls_about_to_expire_are_signed_again(self):
        fake = FakeService({"a": b"1", "b": b"2"}, expires_in=timedelta(minutes=1))
        with tempfile.TemporaryDirectory() as folder:
            self.assertEqual(self.export(fake, os.path.join(folder, "x.tar"))[0], 0)
        self.assertEqual([step for step in fake.asked if step[0] == "sign"], [("sign", EXPORT)] * 3)

    def test_a_failure_still_deletes_the_export_and_closes_the_session(self):
        fake = FakeService({"a": b"1", "b": ConnectionResetError("reset by peer")})
        with tempfile.TemporaryDirectory() as folder:
            code, printed, said = self.export(fake, os.path.join(folder, "x.tar"))
            self.assertEqual(os.listdir(folder), [])
        self.assertEqual((code, printed), (hosted.EXIT_FAILED, ""))
        self.assertEqual(fake.asked[-2:], [("delete", EXPORT), ("close", "errored")])
        last = said.strip().splitlines()[-1]
        self.assertEqual(last, "rl_trainer.hosted: failed: ConnectionResetError: reset by peer")

    def test_an_export_not_deleted_is_said_and_not_fatal(self):
        fake = FakeService({"a": b"1"}, delete_fails=True)
        with tempfile.TemporaryDirectory() as folder:
            code, printed, said = self.export(fake, os.path.join(folder, "x.tar"), "--max-bytes", "1")
        self.assertEqual(code, 0, said)
        self.assertEqual(json.loads(printed)["bytes"], 1)
        self.assertIn(f"the temporary export {EXPORT} was not deleted (RuntimeError: 503 busy)", said)
        self.assertEqual(fake.asked[-1], ("close", "success"))

    def test_the_key_comes_from_the_environment_only(self):
        with mock.patch.dict(os.environ, {"TINKER_API_KEY": ""}), contextlib.redirect_stderr(io.StringIO()) as said:
            self.assertEqual(hosted.main(["export", STATE, "--out", "/nonexistent/x.tar"]), hosted.EXIT_FAILED)
        self.assertIn("failed: RuntimeError: TINKER_API_KEY is not set", said.getvalue())


class SilentServiceTests(unittest.TestCase):
    """A service whose host accepts the connection and never answers held `list` and `keep` for
    rl's whole 300 s limit: the SDK waits without end as it makes its client."""

    KEY = "tml-silent-service-key-4c2e"

    def setUp(self):
        # Loopback, accepted by the kernel into the backlog, never read nor answered.
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def tearDown(self):
        self.listener.close()

    def helper(self, *argv, answer_secs="3"):
        """The helper as rl runs it: its own process, which must end by itself."""
        env = {key: value for key, value in os.environ.items() if not key.startswith(("TINKER_", "RL_"))}
        env.update({"TINKER_API_KEY": self.KEY, "TINKER_BASE_URL": self.url, hosted.ANSWER_VARIABLE: answer_secs})
        python_dir = os.path.dirname(os.path.dirname(os.path.abspath(hosted.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [python_dir, env.get("PYTHONPATH")]))
        started = monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "rl_trainer.hosted", *argv],
            env=env, cwd=python_dir, capture_output=True, text=True, timeout=60,
        )
        return done, monotonic() - started

    def test_list_and_keep_fail_naming_the_address_they_could_not_reach(self):
        for argv in (["list", "run-1"], ["keep", "tinker://run-1/weights/final", "--forever"]):
            done, took = self.helper(*argv)
            # Ended by itself, well before rl's own limit (subprocess's timeout would raise).
            self.assertLess(took, 60, argv)
            self.assertEqual(done.returncode, hosted.EXIT_FAILED, done)
            self.assertEqual(done.stdout, "", argv)
            last = done.stderr.strip().splitlines()[-1]
            self.assertIn(f"the Tinker service at {self.url} did not answer within 3 s (connecting)", last)
            self.assertIn(hosted.ANSWER_VARIABLE, last)
            self.assertNotIn(self.KEY, done.stderr)

    def test_a_bound_that_is_no_number_of_seconds_is_refused(self):
        for value in ["soon", "0", "-1", "nan"]:
            done, _ = self.helper("list", "run-1", answer_secs=value)
            self.assertEqual(done.returncode, hosted.EXIT_USAGE, done)
            self.assertIn(f"{hosted.ANSWER_VARIABLE} is {value!r}", done.stderr)


if __name__ == "__main__":
    unittest.main()
