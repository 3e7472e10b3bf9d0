"""The hosted helper's arguments: refused before the SDK is asked anything."""

import contextlib
import io
import unittest

from rl_trainer import hosted


class HostedArgumentTests(unittest.TestCase):
    def refused(self, argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertEqual(hosted.main(argv), hosted.EXIT_USAGE, argv)
        return err.getvalue()

    def test_paths_must_be_tinker_checkpoint_paths(self):
        for path in ["run/sampler_weights/x", "tinker://run/other/x", "tinker://run/weights", "tinker:///weights/x"]:
            self.refused(["keep", path, "--forever"])
            self.refused(["archive", path, "--out", "/tmp/x"])

    def test_keep_needs_a_positive_ttl_or_forever_not_both(self):
        self.refused(["keep", "tinker://r/weights/s"])
        self.refused(["keep", "tinker://r/weights/s", "--ttl-seconds", "5", "--forever"])
        self.assertIn("above 0", self.refused(["keep", "tinker://r/weights/s", "--ttl-seconds", "0"]))

    def test_archive_needs_somewhere_to_write(self):
        self.refused(["archive", "tinker://r/sampler_weights/s"])


if __name__ == "__main__":
    unittest.main()
