"""rl_trainer.merge: a LoRA adapter folded into its base weights, on small synthetic folders."""

import json
import os
import tempfile
import unittest

import numpy as np
from safetensors.numpy import load_file, save_file

from rl_trainer import merge


def _folders(root, alpha=16.0, rank=2, rslora=False, extra_module=False):
    rng = np.random.default_rng(0)
    base = os.path.join(root, "base")
    adapter = os.path.join(root, "adapter")
    os.makedirs(base)
    os.makedirs(adapter)
    weights = {
        "model.layers.0.self_attn.q_proj.weight": rng.standard_normal((4, 3)).astype(np.float32),
        "model.norm.weight": np.ones(3, dtype=np.float32),
    }
    save_file(weights, os.path.join(base, "model.safetensors"))
    with open(os.path.join(base, "config.json"), "w") as f:
        json.dump({"model_type": "qwen3"}, f)
    with open(os.path.join(base, "tokenizer.json"), "w") as f:
        f.write("{}")
    a = rng.standard_normal((rank, 3)).astype(np.float32)
    b = rng.standard_normal((4, rank)).astype(np.float32)
    lora = {
        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": a,
        "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": b,
    }
    if extra_module:
        lora["base_model.model.model.layers.0.mlp.up_proj.lora_A.weight"] = a
        lora["base_model.model.model.layers.0.mlp.up_proj.lora_B.weight"] = b
    save_file(lora, os.path.join(adapter, "adapter_model.safetensors"))
    with open(os.path.join(adapter, "adapter_config.json"), "w") as f:
        json.dump({"r": rank, "lora_alpha": alpha, "use_rslora": rslora, "peft_type": "LORA"}, f)
    return base, adapter, weights, a, b


class MergeTests(unittest.TestCase):
    def test_the_adapted_weight_gains_the_scaled_product_and_the_rest_is_copied(self):
        with tempfile.TemporaryDirectory() as root:
            base, adapter, weights, a, b = _folders(root)
            out = os.path.join(root, "merged")
            files = merge.merge(base, adapter, out, card="# a card\n")
            self.assertEqual(files, ["README.md", "config.json", "model.safetensors", "tokenizer.json"])
            merged = load_file(os.path.join(out, "model.safetensors"))
            expected = weights["model.layers.0.self_attn.q_proj.weight"] + (16.0 / 2) * (b @ a)
            np.testing.assert_allclose(merged["model.layers.0.self_attn.q_proj.weight"], expected, rtol=1e-6)
            np.testing.assert_array_equal(merged["model.norm.weight"], weights["model.norm.weight"])
            self.assertEqual(merged["model.norm.weight"].dtype, np.float32)
            with open(os.path.join(out, "README.md")) as f:
                self.assertEqual(f.read(), "# a card\n")
            self.assertEqual([n for n in os.listdir(root) if n.startswith(".")], [])

    def test_rslora_scales_by_the_square_root_of_the_rank(self):
        self.assertEqual(merge.scaling({"r": 4, "lora_alpha": 8}), 2.0)
        self.assertEqual(merge.scaling({"r": 4, "lora_alpha": 8, "use_rslora": True}), 4.0)
        for bad in [{}, {"r": 0}, {"r": "x"}, {"r": 4, "use_dora": True}]:
            with self.assertRaises(merge.MergeError):
                merge.scaling(bad)

    def test_a_module_the_base_lacks_fails_and_leaves_nothing(self):
        with tempfile.TemporaryDirectory() as root:
            base, adapter, *_ = _folders(root, extra_module=True)
            out = os.path.join(root, "merged")
            with self.assertRaises(merge.MergeError) as caught:
                merge.merge(base, adapter, out)
            self.assertIn("mlp.up_proj.weight", str(caught.exception))
            self.assertFalse(os.path.exists(out))
            self.assertEqual(sorted(os.listdir(root)), ["adapter", "base"])

    def test_an_existing_folder_is_never_written_over(self):
        with tempfile.TemporaryDirectory() as root:
            base, adapter, *_ = _folders(root)
            out = os.path.join(root, "merged")
            os.makedirs(out)
            self.assertEqual(merge.main(["--base", base, "--adapter", adapter, "--out", out]), merge.EXIT_FAILED)
            self.assertEqual(os.listdir(out), [])
            self.assertEqual(merge.main(["--base", base]), merge.EXIT_USAGE)
