"""Usage: python introspect_config.py ENV_FILE CLASS_NAME

Imports ENV_FILE (its folder and the root of its package tree go on sys.path), takes
CLASS_NAME, calls its config_init() if present, and prints ONE JSON object to stdout.
A verifiers environment is read as verifiers reads it: a v1 taskset's config class (the
second argument of `Taskset[Task, Config]`, without `id` and `task`, which rl sets or does not
edit), a v0 module's `load_environment` keyword arguments (CLASS_NAME `load_environment`):
{"config_class", "fields": [...], "env_defaults": {...}, "errors": [...]}.
The environment's own prints go to stderr. Exit 0 if a config class was found, else 1.
"""

import contextlib
import enum
import inspect
import importlib
import importlib.util
import json
import os
import sys
import typing

sys.dont_write_bytecode = True  # never leave __pycache__ in the user's environment tree

from pydantic_core import PydanticUndefined, to_jsonable_python

CONSTRAINT_KEYS = ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length", "pattern")


def jsonable(value):  # enums become their value; anything unserialisable becomes null
    return to_jsonable_python(value, fallback=lambda _: None)


def type_str(annotation):
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def choices(annotation):
    """Allowed values of an Enum / Literal annotation (also inside Optional)."""
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [jsonable(member.value) for member in annotation]
    if typing.get_origin(annotation) is typing.Literal:
        return [jsonable(arg) for arg in typing.get_args(annotation)]
    for arg in typing.get_args(annotation):
        found = choices(arg)
        if found:
            return found
    return None


def constraints(field):
    out = {}
    for item in field.metadata:
        for key in CONSTRAINT_KEYS:
            value = getattr(item, key, None)
            if value is not None:
                out[key] = jsonable(value)
    allowed = choices(field.annotation)
    if allowed:
        out["choices"] = allowed
    return out


def load_module(path):
    """Import path by dotted name when it sits in a package, else by location."""
    folder = os.path.dirname(path)
    root, parts = folder, [os.path.splitext(os.path.basename(path))[0]]
    while os.path.isfile(os.path.join(root, "__init__.py")):
        parts.insert(0, os.path.basename(root))
        root = os.path.dirname(root)
    for entry in (root, folder):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    if len(parts) > 1:
        return importlib.import_module(".".join(parts))
    spec = importlib.util.spec_from_file_location("_rl_introspected_env", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# A taskset's config fields rl does not offer: `id` is rl's to set, `task` a nested config.
TASKSET_FIELDS_NOT_OFFERED = ("id", "task")


def keyword_arguments(function, result):
    """A v0 environment's settings: `load_environment`'s keyword arguments."""
    result["config_class"] = function.__name__
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
            continue
        empty = parameter.default is parameter.empty
        annotation = parameter.annotation
        result["fields"].append({
            "name": name,
            "type": "" if annotation is parameter.empty else type_str(annotation),
            "default": None if empty else jsonable(parameter.default),
            "required": empty,
            "description": None,
        })
    return result


def taskset_config(cls):
    """The config class a verifiers taskset subscripts (`Taskset[Task, Config]`), if any."""
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            args = typing.get_args(base)
            if len(args) >= 2 and isinstance(args[1], type) and hasattr(args[1], "model_fields"):
                return args[1]
    return None


def describe(env_file, class_name, errors):
    result = {"config_class": None, "fields": [], "env_defaults": {}, "errors": errors}
    with contextlib.redirect_stdout(sys.stderr):
        try:
            env_cls = getattr(load_module(os.path.abspath(env_file)), class_name)
        except Exception as exc:  # import errors, missing class, ...
            errors.append(f"import: {type(exc).__name__}: {exc}")
            return result
        if class_name == "load_environment" and inspect.isfunction(env_cls):
            return keyword_arguments(env_cls, result)
        taskset = taskset_config(env_cls) if isinstance(env_cls, type) else None
        if taskset is not None:
            env_cls = type("_Taskset", (), {"env_config_cls": taskset})
        instance = None
        if hasattr(env_cls, "config_init"):
            try:
                instance = env_cls.config_init()[0]
            except Exception as exc:
                errors.append(f"config_init: {type(exc).__name__}: {exc}")
    config_cls = type(instance) if instance is not None else getattr(env_cls, "env_config_cls", None)
    if config_cls is None or not hasattr(config_cls, "model_fields"):
        errors.append(f"no pydantic config class found on {class_name}")
        return result
    result["config_class"] = config_cls.__name__
    class_defaults = {}
    for name, field in config_cls.model_fields.items():
        if taskset is not None and name in TASKSET_FIELDS_NOT_OFFERED:
            continue
        default = None
        try:
            value = field.get_default(call_default_factory=True, validated_data={})
            default = None if value is PydanticUndefined else jsonable(value)
        except Exception as exc:
            errors.append(f"default of {name}: {type(exc).__name__}: {exc}")
        class_defaults[name] = default
        entry = {"name": name, "type": type_str(field.annotation), "default": default,
                 "required": field.is_required(), "description": field.description}
        found = constraints(field)
        if found:
            entry["constraints"] = found
        result["fields"].append(entry)
    if instance is not None:
        try:
            dumped = instance.model_dump(mode="json")
        except Exception as exc:
            dumped = errors.append(f"config_init dump: {type(exc).__name__}: {exc}") or {}
        for name, value in dumped.items():
            if name in class_defaults and value != class_defaults[name]:
                result["env_defaults"][name] = value
    return result


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: introspect_config.py ENV_FILE CLASS_NAME")
    output = describe(sys.argv[1], sys.argv[2], [])
    print(json.dumps(output))
    sys.exit(0 if output["config_class"] else 1)
