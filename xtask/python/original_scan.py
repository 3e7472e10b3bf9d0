"""The original rl_* tool's discovery algorithm, rewritten as a yardstick for rl-discovery.

It parses each .py file with CPython's ast module and keeps classes that name `BaseEnv`
directly among their bases (as a plain name or the last part of an attribute); it follows no
imports, aliases or inheritance. Used by `cargo xtask bench` for speed and by rl-discovery's
tests to prove that everything it finds is also found by rl.

usage: python3 original_scan.py ROOT [--recursive]   (prints JSON)
"""

import ast
import json
import sys
from pathlib import Path


def base_name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def describe(cls, path, root):
    env_name, description, config_class = path.stem, "", "BaseEnvConfig"
    for item in cls.body:
        if isinstance(item, ast.Assign):
            for target in item.targets:
                if not isinstance(target, ast.Name):
                    continue
                if target.id == "name" and isinstance(item.value, ast.Constant):
                    env_name = item.value.value
                elif target.id == "env_config_cls" and isinstance(item.value, ast.Name):
                    config_class = item.value.id
        if (
            not description
            and isinstance(item, ast.Expr)
            and isinstance(item.value, ast.Constant)
            and isinstance(item.value.value, str)
        ):
            description = item.value.value.split("\n")[0].strip()
    return {
        "name": env_name,
        "class_name": cls.name,
        "file": path.relative_to(root).as_posix(),
        "description": description or f"Environment from {path.name}",
        "config_class": config_class,
    }


def scan(root, recursive):
    found = []
    pattern = "**/*.py" if recursive else "*.py"
    for path in sorted(root.glob(pattern)):
        if path.name.startswith("_"):
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except Exception:  # the original logged and went on
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                base_name(base) == "BaseEnv" for base in node.bases
            ):
                found.append(describe(node, path, root))
    return found


if __name__ == "__main__":
    arguments = sys.argv[1:]
    recursive = "--recursive" in arguments
    paths = [a for a in arguments if not a.startswith("--")]
    if len(paths) != 1:
        sys.exit(__doc__)
    print(json.dumps(scan(Path(paths[0]), recursive)))
