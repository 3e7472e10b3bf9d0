import os
import tempfile
import unittest

from rl_trainer.config import CONTRACT, LOCAL_API_KEY, ConfigError, load_config, parse_config, resolve_api_key


def doc(env=None, openai=None, tinker=None, **extra):
    d = {
        "env": {
            "rollout_server_url": "http://127.0.0.1:8000",
            "total_steps": 5,
            "group_size": 4,
            "batch_size": 8,
            "tokenizer_name": "/models/tiny",
            "use_wandb": False,
            "max_token_length": 256,
        },
        "openai": [{"model_name": "tiny", "base_url": "http://127.0.0.1:8001/v1", "api_key": "x"}],
        "tinker": {"base_url": "http://127.0.0.1:8100", "lora_rank": 8, "learning_rate": 1e-3},
    }
    for section, values in (("env", env), ("tinker", tinker)):
        if values:
            d[section].update(values)
    if openai is not None:
        d["openai"] = openai
    d.update(extra)
    return d


# The config's attribute of a contract key where its name differs.
_ATTRIBUTE = {"tinker.base_url": "tinker_base_url"}


def _trainer_keys():
    for section, keys in CONTRACT["sections"].items():
        for name, spec in keys.items():
            if spec["reader"] == "trainer":
                yield section, name, spec


class ContractTests(unittest.TestCase):
    """Every default and bound the trainer applies is the contract's (rl's table)."""

    def test_a_key_left_out_reads_as_its_contract_default(self):
        for section, name, spec in _trainer_keys():
            default = spec["default"]
            if default is None or isinstance(default, dict):
                continue
            document = doc()
            document[section].pop(name, None)
            if (section, name) == ("env", "batch_size"):
                continue  # read as twice the group size, checked below
            with self.subTest(key=f"{section}.{name}"):
                value = getattr(parse_config(document), _ATTRIBUTE.get(f"{section}.{name}", name))
                self.assertEqual(value, default)
        document = doc()
        del document["env"]["batch_size"]
        self.assertEqual(parse_config(document).batch_size, 2 * 4)

    def test_a_key_deferring_to_another_reads_its_value(self):
        for section, name, spec in _trainer_keys():
            default = spec["default"]
            if not isinstance(default, dict) or "key" not in default:
                continue
            other_section, other = default["key"].split(".")
            document = doc(env={"wandb_name": "named"})
            document[section].pop(name, None)
            with self.subTest(key=f"{section}.{name}"):
                config = parse_config(document)
                self.assertEqual(
                    getattr(config, _ATTRIBUTE.get(f"{section}.{name}", name)),
                    getattr(config, _ATTRIBUTE.get(default["key"], other)),
                )

    def test_every_bound_is_the_contracts(self):
        for section, name, spec in _trainer_keys():
            if spec["minimum"] is not None:
                below = spec["minimum"] if spec["exclusive"] else spec["minimum"] - 1
                with self.subTest(key=f"{section}.{name}", bound="minimum"):
                    error = ConfigTests.error(self, doc(**{section: {name: below}}))
                    self.assertEqual(error.key, f"{section}.{name}")
            if spec["maximum"] is not None:
                with self.subTest(key=f"{section}.{name}", bound="maximum"):
                    error = ConfigTests.error(self, doc(**{section: {name: spec["maximum"] + 1}}))
                    self.assertEqual(error.key, f"{section}.{name}")


class ConfigTests(unittest.TestCase):
    def error(self, document):
        with self.assertRaises(ConfigError) as ctx:
            parse_config(document)
        return ctx.exception

    def test_a_resumed_run_names_its_state_and_step(self):
        c = parse_config(doc(tinker={"resume_state": "tinker://m/weights/step_2", "starting_step": 2}))
        self.assertEqual((c.resume_state, c.starting_step), ("tinker://m/weights/step_2", 2))
        self.assertEqual(c.summary()["starting_step"], 2)
        fresh = parse_config(doc())
        self.assertEqual((fresh.resume_state, fresh.starting_step), (None, 0))
        self.assertNotIn("starting_step", fresh.summary())
        self.assertIn("tinker.resume_state: is required", str(self.error(doc(tinker={"starting_step": 2}))))
        self.assertIn("no step would be left", str(self.error(doc(tinker={"resume_state": "tinker://m/weights/final", "starting_step": 5}))))
        self.assertIn("tinker.starting_step", str(self.error(doc(tinker={"resume_state": "tinker://m/weights/x", "starting_step": -1}))))

    def test_reads_the_run_yaml(self):
        c = parse_config(doc())
        self.assertEqual(c.total_steps, 5)
        self.assertEqual(c.batch_size, 8)
        self.assertEqual((c.serve_host, c.serve_port), ("127.0.0.1", 8001))
        self.assertEqual(c.base_model, "/models/tiny")  # defaults to env.tokenizer_name
        self.assertEqual(c.model_name, "tiny")
        self.assertEqual(c.tinker_base_url, "http://127.0.0.1:8100")
        self.assertEqual(c.max_token_trainer_length, 256)
        self.assertEqual(c.linger_secs, 10.0)
        self.assertEqual(c.keep_rollouts, CONTRACT["sections"]["tinker"]["keep_rollouts"]["default"])
        self.assertEqual(c.notes, ())

    def test_unknown_keys_are_ignored_and_batch_size_defaults(self):
        c = parse_config(doc(env={"batch_size": -1, "whatever": 3}, tinker={"nonsense": [1]}, slurm=False, testing=False))
        self.assertEqual(c.batch_size, 8)  # 2 * group_size
        c = parse_config(doc(env={"batch_size": 0, "group_size": 3}))
        self.assertEqual(c.batch_size, 6)

    def test_missing_env_keys_fall_back_with_a_note(self):
        d = doc()
        del d["env"]["total_steps"]
        c = parse_config(d)
        self.assertEqual(c.total_steps, 1000)
        self.assertTrue(any("env.total_steps" in n for n in c.notes))

    def test_lenient_scalars_like_pydantic(self):
        c = parse_config(doc(env={"total_steps": "7", "use_wandb": "false"}, tinker={"learning_rate": "5e-3", "save_every": 2.0}))
        self.assertEqual((c.total_steps, c.use_wandb, c.learning_rate, c.save_every), (7, False, 5e-3, 2))

    def test_bad_values_name_their_key(self):
        cases = [
            (doc(env={"total_steps": "many"}), "env.total_steps"),
            (doc(env={"total_steps": 0}), "env.total_steps"),
            (doc(env={"total_steps": True}), "env.total_steps"),
            (doc(env={"group_size": 2.5}), "env.group_size"),
            (doc(env={"use_wandb": "maybe"}), "env.use_wandb"),
            (doc(env={"rollout_server_url": "ftp://x"}), "env.rollout_server_url"),
            (doc(env={"batch_size": 2, "group_size": 4}), "env.batch_size"),
            (doc(tinker={"learning_rate": -1}), "tinker.learning_rate"),
            (doc(tinker={"learning_rate": 0}), "tinker.learning_rate"),
            (doc(tinker={"learning_rate": float("nan")}), "tinker.learning_rate"),
            (doc(tinker={"lora_rank": 0}), "tinker.lora_rank"),
            (doc(tinker={"save_every": -1}), "tinker.save_every"),
            (doc(tinker={"keep_rollouts": "few"}), "tinker.keep_rollouts"),
            (doc(tinker={"batch_timeout_secs": -5}), "tinker.batch_timeout_secs"),
            (doc(tinker={"base_url": "127.0.0.1:8100"}), "tinker.base_url"),
            (doc(tinker={"wandb_project": ["a"]}), "tinker.wandb_project"),
            (doc(openai=[]), "openai"),
            (doc(openai=[{"model_name": "m"}]), "openai[0].base_url"),
            (doc(openai=[{"base_url": "https://127.0.0.1:8001/v1"}]), "openai[0].base_url"),
            (doc(openai=[{"base_url": "http://127.0.0.1:8001/api"}]), "openai[0].base_url"),
            (doc(openai=[{"base_url": "http://127.0.0.1:99999/v1"}]), "openai[0].base_url"),
            (doc(env=None, tinker=None) | {"env": "text"}, "env"),
        ]
        for document, key in cases:
            with self.subTest(key=key):
                e = self.error(document)
                self.assertEqual(e.key, key)
                self.assertIn(key, str(e))

    def test_base_url_path_is_parsed_not_stripped(self):
        # rstrip("/v1") would eat the trailing 1 of the port
        c = parse_config(doc(openai=[{"base_url": "http://localhost:8011/v1/"}]))
        self.assertEqual((c.serve_host, c.serve_port), ("127.0.0.1", 8011))
        c = parse_config(doc(openai={"base_url": "http://127.0.0.1:8001"}))  # a lone mapping is accepted
        self.assertEqual(c.serve_port, 8001)

    def test_api_key(self):
        c = parse_config(doc())
        self.assertEqual(resolve_api_key(c, {}), LOCAL_API_KEY)
        self.assertEqual(resolve_api_key(c, {"TINKER_API_KEY": "tml-secret"}), "tml-secret")
        hosted = parse_config(doc(tinker={"base_url": None}))
        with self.assertRaises(ConfigError) as ctx:
            resolve_api_key(hosted, {})
        self.assertEqual(ctx.exception.key, "TINKER_API_KEY")
        self.assertEqual(resolve_api_key(hosted, {"TINKER_BASE_URL": "http://[::1]:9"}), LOCAL_API_KEY)
        remote = parse_config(doc(tinker={"base_url": "https://tinker.example.com"}))
        with self.assertRaises(ConfigError):
            resolve_api_key(remote, {})

    def test_load_config_reports_unreadable_and_invalid_files(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(ConfigError):
                load_config(os.path.join(d, "absent.yaml"))
            bad = os.path.join(d, "bad.yaml")
            with open(bad, "w") as f:
                f.write("env: [unclosed\n")
            with self.assertRaises(ConfigError):
                load_config(bad)

    def test_cli_exits_2_on_a_bad_config(self):
        import contextlib
        import io

        from rl_trainer.__main__ import main

        with tempfile.TemporaryDirectory() as d, contextlib.redirect_stderr(io.StringIO()) as err:
            path = os.path.join(d, "run.yaml")
            with open(path, "w") as f:
                f.write("env:\n  total_steps: -3\nopenai:\n  - base_url: http://127.0.0.1:8001/v1\n")
            with self.assertRaises(SystemExit) as usage:
                main([])
            self.assertEqual(usage.exception.code, 2)
            self.assertEqual(main(["--config", path, "--run-dir", os.path.join(d, "run")]), 2)
        self.assertIn("rl-trainer: bad config: env.total_steps", err.getvalue())


if __name__ == "__main__":
    unittest.main()
