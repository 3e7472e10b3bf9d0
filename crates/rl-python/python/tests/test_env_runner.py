"""`python -m rl_env`: a package-style environment runs as a module of its package, from the root
rl names (variables, else the run's `environment.json`); any other file as a script."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from rl_env.__main__ import package_of

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A package whose file imports a sibling relatively, and one through its top package's name.
SHOW = (
    "import sys\n"
    "if __name__ == '__main__':\n"
    "    print(__package__, VALUE, sys.argv[1:], sys.argv[0].endswith('_env.py'))\n"
)
TREE = {
    "environments/vowels/__init__.py": "",
    "environments/vowels/scoring.py": "VALUE = 'relative'\n",
    "environments/vowels/vowels_env.py": "from .scoring import VALUE\n" + SHOW,
    "environments/community/letters/rewards.py": "VALUE = 'through the top package'\n",
    "environments/community/letters/letters_env.py": (
        "from environments.community.letters.rewards import VALUE\n" + SHOW
    ),
}


def write_tree(folder):
    for path, text in TREE.items():
        path = os.path.join(folder, path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def run(env_file, **variables):
    environ = {
        key: value
        for key, value in os.environ.items()
        if key not in ("RL_ENV_MODULE", "RL_ENV_ROOT", "RL_RUN_DIR")
    }
    return subprocess.run(
        [sys.executable, "-m", "rl_env", env_file, "serve", "--x", "1"],
        env={**environ, "PYTHONPATH": PYTHON_DIR, "RL_ITEMS": "training", **variables},
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        timeout=120,
    )


class PackageTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.addCleanup(self.folder.cleanup)
        self.root = self.folder.name
        write_tree(self.root)
        self.environments = os.path.join(self.root, "environments")
        self.vowels = os.path.join(self.environments, "vowels", "vowels_env.py")
        self.letters = os.path.join(self.environments, "community", "letters", "letters_env.py")

    def test_a_relative_import_needs_the_package_that_rl_names(self):
        alone = run(self.vowels)
        self.assertNotEqual(alone.returncode, 0)
        self.assertIn("attempted relative import", alone.stderr)
        done = run(self.vowels, RL_ENV_ROOT=self.environments, RL_ENV_MODULE="vowels.vowels_env")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), "vowels relative ['serve', '--x', '1'] True")

    def test_an_import_through_the_top_package_runs_from_the_folder_holding_it(self):
        module = "environments.community.letters.letters_env"
        done = run(self.letters, RL_ENV_ROOT=self.root, RL_ENV_MODULE=module)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(
            done.stdout.strip(),
            "environments.community.letters through the top package ['serve', '--x', '1'] True",
        )

    def test_a_run_s_record_names_the_package(self):
        run_dir = os.path.join(self.root, "run")
        os.makedirs(run_dir)
        record = {
            "environment": {"environments_dir": self.environments, "file": "vowels/vowels_env.py"},
            "sha256": "0" * 64,
            "package": {"root": self.environments, "module": "vowels.vowels_env"},
        }
        with open(os.path.join(run_dir, "environment.json"), "w", encoding="utf-8") as f:
            json.dump(record, f)
        done = run(self.vowels, RL_RUN_DIR=run_dir)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(done.stdout.startswith("vowels relative"), done.stdout)
        # Another file than the record's is no module of it.
        self.assertIsNone(package_of(self.letters, {"RL_RUN_DIR": run_dir}))
        self.assertEqual(
            package_of(self.vowels, {"RL_RUN_DIR": run_dir}), (self.environments, "vowels.vowels_env")
        )
        # Without a record, or with one naming no package: a script.
        self.assertIsNone(package_of(self.vowels, {"RL_RUN_DIR": self.root}))
        record.pop("package")
        with open(os.path.join(run_dir, "environment.json"), "w", encoding="utf-8") as f:
            json.dump(record, f)
        self.assertIsNone(package_of(self.vowels, {"RL_RUN_DIR": run_dir}))

    def test_a_module_that_is_not_the_file_exits_2_naming_both(self):
        done = run(self.vowels, RL_ENV_ROOT=self.environments, RL_ENV_MODULE="vowels.scoring")
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertIn("module vowels.scoring from", done.stderr)
        self.assertIn("not " + self.vowels, done.stderr)


if __name__ == "__main__":
    unittest.main()


class HoldRegistrationTest(unittest.TestCase):
    """An environment started first sets up at once and registers only once the go file exists."""

    def test_registration_waits_for_the_go_file(self):
        import asyncio
        import threading

        from rl_env.__main__ import hold_registration

        class Env:
            registered = False

            async def register_env(self):
                Env.registered = True

        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        go = os.path.join(folder.name, "env-go")
        hold_registration(Env, go)

        async def register_with_the_go_file_written_later():
            threading.Timer(0.5, lambda: open(go, "w").close()).start()
            task = asyncio.create_task(Env().register_env())
            await asyncio.sleep(0.3)
            self.assertFalse(Env.registered, "registered before the go file")
            await asyncio.wait_for(task, 10)

        asyncio.run(register_with_the_go_file_written_later())
        self.assertTrue(Env.registered)

    def test_wandb_setup_waits_for_the_go_file_too(self):
        """atroposlib's `env_manager` asks run-api for the WandB project (`setup_wandb`) right
        after `setup`, before `register_env`, and fails when run-api is not up yet: it waits too."""
        import asyncio
        import threading

        from rl_env.__main__ import hold_registration

        class Env:
            calls = []

            async def setup(self):
                Env.calls.append("setup")

            async def setup_wandb(self):
                Env.calls.append("setup_wandb")

            async def register_env(self):
                Env.calls.append("register_env")

            async def env_manager(self):
                await self.setup()
                await self.setup_wandb()
                await self.register_env()

        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        go = os.path.join(folder.name, "env-go")
        hold_registration(Env, go)

        async def manage_with_the_go_file_written_later():
            threading.Timer(0.5, lambda: open(go, "w").close()).start()
            task = asyncio.create_task(Env().env_manager())
            await asyncio.sleep(0.3)
            self.assertEqual(Env.calls, ["setup"], "went past setup before the go file")
            await asyncio.wait_for(task, 10)

        asyncio.run(manage_with_the_go_file_written_later())
        self.assertEqual(Env.calls, ["setup", "setup_wandb", "register_env"])

    def test_without_the_variable_nothing_is_held(self):
        from rl_env.__main__ import hold_registration

        class Env:
            async def register_env(self):
                return "registered"

        original = Env.register_env
        hold_registration(Env, None)
        self.assertIs(Env.register_env, original)
