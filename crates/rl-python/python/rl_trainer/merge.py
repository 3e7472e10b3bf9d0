"""A checkpoint's LoRA adapter folded into its base model: a Hugging Face model folder.

    PYTHONPATH=<folder holding rl_trainer> python -m rl_trainer.merge --base DIR \\
        --adapter DIR --out DIR [--card FILE]

For every `<module>.lora_A.weight` of the adapter (PEFT's layout: A is r × in, B is out × r),
the base's `<module>.weight` becomes W + s · B · A, with PEFT's scaling s = lora_alpha / r
(lora_alpha / √r with `use_rslora`), computed in float32 and written back in the weight's own
dtype, shard by shard under the base's own file names. Every other file of the base folder
(config, generation config, tokenizer, the shards' index) is copied as it is; `--card` becomes
its README.md. The folder is written beside `--out` and renamed into place, so a failure leaves
nothing half-written.

numpy has no bfloat16: a base stored in it is refused, naming the dtype (ml_dtypes, when
importable, lets numpy read it).

Exit codes: 0 written, 1 failed (said on stderr), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from typing import Dict, List, Tuple

EXIT_FAILED = 1
EXIT_USAGE = 2
ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
INDEX = "model.safetensors.index.json"
#: PEFT's prefix on an adapter's weight names, before the base model's own.
PEFT_PREFIX = "base_model.model."
A_SUFFIX = ".lora_A.weight"
B_SUFFIX = ".lora_B.weight"


class MergeError(Exception):
    """Why the merge cannot be done, said as it is."""


def say(message: str) -> None:
    print(f"rl_trainer.merge: {message}", file=sys.stderr, flush=True)


def scaling(config: dict) -> float:
    """PEFT's LoRA scaling of an adapter_config.json."""
    try:
        rank = int(config["r"])
        alpha = float(config.get("lora_alpha", rank))
    except (KeyError, TypeError, ValueError) as e:
        raise MergeError(f"{ADAPTER_CONFIG} has no usable r / lora_alpha: {e}") from e
    if rank <= 0:
        raise MergeError(f"{ADAPTER_CONFIG}: r is {rank}")
    if config.get("use_dora"):
        raise MergeError("a DoRA adapter (use_dora) is not a plain LoRA: not merged")
    return alpha / math.sqrt(rank) if config.get("use_rslora") else alpha / rank


def lora_pairs(adapter: Dict[str, object]) -> Dict[str, Tuple[object, object]]:
    """The base weight each (A, B) pair changes, by its name in the base model."""
    pairs = {}
    for name in adapter:
        if not name.endswith(A_SUFFIX):
            continue
        module = name[: -len(A_SUFFIX)]
        other = module + B_SUFFIX
        if other not in adapter:
            raise MergeError(f"the adapter has {name} without {other}")
        target = module[len(PEFT_PREFIX):] if module.startswith(PEFT_PREFIX) else module
        pairs[target + ".weight"] = (adapter[name], adapter[other])
    if not pairs:
        raise MergeError("the adapter holds no lora_A/lora_B weights")
    return pairs


def shards(base: str) -> List[str]:
    """The base's weight files, by their names in its folder."""
    index = os.path.join(base, INDEX)
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as file:
            weight_map = json.load(file).get("weight_map") or {}
        names = sorted(set(weight_map.values()))
    else:
        names = sorted(n for n in os.listdir(base) if n.endswith(".safetensors"))
    if not names:
        raise MergeError(f"{base} holds no .safetensors weights")
    return names


def merged_tensor(weight, a, b, scale: float):
    import numpy as np

    if weight.ndim != 2 or b.shape[0] != weight.shape[0] or a.shape[1] != weight.shape[1]:
        raise MergeError(f"shapes do not fit: W {weight.shape}, B {b.shape}, A {a.shape}")
    delta = scale * (b.astype(np.float32) @ a.astype(np.float32))
    return (weight.astype(np.float32) + delta).astype(weight.dtype)


def load(path: str) -> Dict[str, object]:
    from safetensors.numpy import load_file

    try:
        return load_file(path)
    except (TypeError, ValueError) as e:
        # safetensors names the dtype numpy lacks (bfloat16 without ml_dtypes).
        raise MergeError(f"{path} cannot be read as numpy arrays: {e}") from e


def merge(base: str, adapter_dir: str, out: str, card: str = "") -> List[str]:
    """Writes the merged folder at `out` (which must not exist); the files written."""
    from safetensors.numpy import save_file

    if os.path.exists(out):
        raise MergeError(f"{out} exists: name a new folder")
    with open(os.path.join(adapter_dir, ADAPTER_CONFIG), encoding="utf-8") as file:
        scale = scaling(json.load(file))
    pairs = lora_pairs(load(os.path.join(adapter_dir, ADAPTER_WEIGHTS)))
    staging = os.path.join(os.path.dirname(os.path.abspath(out)), f".{os.path.basename(out)}.merging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    try:
        left = set(pairs)
        written = []
        for name in shards(base):
            tensors = load(os.path.join(base, name))
            for key in list(tensors):
                if key in pairs:
                    a, b = pairs[key]
                    tensors[key] = merged_tensor(tensors[key], a, b, scale)
                    left.discard(key)
            save_file(tensors, os.path.join(staging, name), metadata={"format": "pt"})
            written.append(name)
        if left:
            raise MergeError(f"the base has no weight for {len(left)} adapted module(s), e.g. {sorted(left)[0]}")
        for name in sorted(os.listdir(base)):
            source = os.path.join(base, name)
            # Dotfiles are the folder's bookkeeping (a tool's stamp), not the model's.
            if os.path.isfile(source) and not name.startswith(".") and not name.endswith(".safetensors") and name not in written:
                shutil.copy2(source, os.path.join(staging, name))
                written.append(name)
        if card:
            with open(os.path.join(staging, "README.md"), "w", encoding="utf-8") as file:
                file.write(card)
            if "README.md" not in written:
                written.append("README.md")
        os.rename(staging, out)
        return sorted(written)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl_trainer.merge", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the base model's Hugging Face folder")
    parser.add_argument("--adapter", required=True, help="the PEFT adapter folder")
    parser.add_argument("--out", required=True, help="the merged folder to write (must not exist)")
    parser.add_argument("--card", help="a file whose text becomes the folder's README.md")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else 0
    try:
        card = ""
        if args.card:
            with open(args.card, encoding="utf-8") as file:
                card = file.read()
        written = merge(args.base, args.adapter, args.out, card)
    except (MergeError, OSError, json.JSONDecodeError) as e:
        say(f"failed: {e}")
        return EXIT_FAILED
    print(json.dumps({"dir": os.path.abspath(args.out), "files": written}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
