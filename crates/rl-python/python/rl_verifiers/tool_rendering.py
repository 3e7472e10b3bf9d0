"""How an environment's tools reach the model: one rule for training, pre-flight, comparison
and serving (issue 56).

The model sees a tool only as the text its prompt is rendered into. rl renders every prompt it
samples in one of two ways, and both are asked the same question, with the same probe
(`rl_trainer.tools.ToolSupport.of`, which rl's chat server asks of every request with tools):

* verifiers v1's training client renders a run's prompts itself, through `renderers` (the
  renderer `RL_VERIFIERS_RENDERER` names, else the one `renderers` picks for the tokenizer);
* everything else goes through the model's chat template: a verifiers v0 run (the trainer's
  token routes), and every chat request rl's server answers (a pre-flight or a comparison of
  the base model or a checkpoint, a served model), which refuses tools the template does not
  render with HTTP 400.

A run whose rendering is not the chat template (a typed `renderers` renderer) must render a
prompt with tools as that template does, or its pre-flights and comparisons would ask other
prompts than it trained on.

An environment that gives the model tools is refused before its run starts (`python -m rl_env
ENV_FILE check`, and again as a run's environment loads) when its run's rendering shows no
tool: it would train on prompts without them, and then fail every evaluation rollout. A
verifiers v0 Python has no transformers to apply the chat template with: its check names the
tokenizer, and rl asks its trainer's Python (`python -m rl_verifiers.tool_rendering`)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

from rl_trainer.tools import PROBE_MESSAGES, PROBE_TOOL, ToolSupport

# `render(messages, tools, add_generation_prompt)`: a prompt as text.
Render = Callable[[List[dict], Optional[List[dict]], bool], str]


@dataclass
class Rendering:
    """How a run's prompts are rendered: said as a person reads it (`how`), done by `render`,
    and what to change when it shows no tools (`fix`). `chat_template`: the model's chat
    template, which rl's chat route renders every pre-flight, comparison and served request
    with, when the run's rendering is another (a typed `renderers` renderer)."""

    how: str
    render: Render
    fix: str
    chat_template: Optional[Render] = None


def first_difference(ours: str, theirs: str) -> Optional[str]:
    """Where two renderings of the same prompt part (None: they do not), as a person reads it."""
    if ours == theirs:
        return None
    at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    return f"at character {at}: {ours[max(0, at - 20):at + 40]!r} against {theirs[max(0, at - 20):at + 40]!r}"


class TemplateElsewhere(Exception):
    """The chat template is rl's trainer's to apply, in its Python (which holds transformers),
    and this Python has no transformers (verifiers v0's): ask there (`python -m
    rl_verifiers.tool_rendering`)."""

    def __init__(self, tokenizer_name: str):
        super().__init__(f"transformers is not importable here to apply the chat template of {tokenizer_name}")
        self.tokenizer_name = tokenizer_name


class CannotRender(Exception):
    """The rendering a run's client would make cannot be made (a typed renderer whose special
    tokens the tokenizer lacks): every rollout of the run would fail so. `fix` as `Rendering`'s."""

    def __init__(self, message: str, fix: str):
        super().__init__(message)
        self.fix = fix


def chat_template_rendering(tokenizer_name: str) -> Rendering:
    """The model's own chat template, as rl's trainer and chat server apply it."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise TemplateElsewhere(tokenizer_name) from None

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_name)

    def render(messages: List[dict], tools: Optional[List[dict]], add_generation_prompt: bool) -> str:
        return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt)

    return Rendering(
        how=f"the chat template of {tokenizer_name}",
        render=render,
        fix="train a model whose chat template renders tools, or an environment without tools",
    )


def refusal(environment: str, tools: List[str], rendering: Optional[Rendering]) -> Optional[str]:
    """Why `environment`, which gives the model `tools`, cannot be trained as `rendering`
    renders its prompts (None: it can, it has no tools, or its rendering is not rl's)."""
    if not tools or rendering is None:
        return None
    fix = rendering.fix[0].upper() + rendering.fix[1:]
    if not ToolSupport.of(rendering.render).renders_tools:
        return (
            f"{environment} gives the model tools ({', '.join(tools)}), but {rendering.how} renders "
            "no tools into the prompt: the model would never see them (a run would train without "
            "them, and rl's chat route refuses them in every pre-flight, comparison and served "
            f"request). {fix}"
        )
    if rendering.chat_template is not None:
        try:
            theirs = rendering.chat_template(PROBE_MESSAGES, [PROBE_TOOL], True)
        except Exception as error:  # noqa: BLE001 - a template that cannot take the probe
            theirs = f"(the chat template fails: {type(error).__name__}: {error})"
        difference = first_difference(rendering.render(PROBE_MESSAGES, [PROBE_TOOL], True), theirs)
        if difference is not None:
            return (
                f"{environment} gives the model tools ({', '.join(tools)}), and {rendering.how} "
                "renders a prompt with tools otherwise than the model's chat template, which rl's "
                "chat route renders every pre-flight, comparison and served request with "
                f"({difference}): the model would be evaluated on prompts it never trained on. "
                "Use the renderer that is the chat template (RL_VERIFIERS_RENDERER "
                "'{\"name\": \"default\", \"tool_parser\": ...}') or a model whose template "
                "the renderer reproduces"
            )
    return None


# How the refusals name the environment (rl's own message says which one it is).
ENVIRONMENT = "the environment"


def verdict(tools: List[str], rendering: Optional[Rendering], refused: Optional[str], chat_template_of: Optional[str] = None) -> str:
    """`python -m rl_env ENV_FILE check`'s answer, one JSON line: the tools, how the run's
    prompts are rendered, and the refusal (null: the run may start); or, where the rendering is
    the chat template of a tokenizer this Python cannot apply, that tokenizer
    (`chat_template_of`), for rl to ask its trainer's Python (`main`)."""
    return json.dumps(
        {
            "tools": tools,
            "rendering": rendering.how if rendering is not None else None,
            "refused": refused,
            "chat_template_of": chat_template_of,
        }
    )


def at_load(adapter: Any, endpoint: Any, checking: bool, say: Callable[[str], None]) -> Optional[int]:
    """The rule as a run's environment (or its check) has loaded: the exit code to end with
    (the check's answer printed, or a run refused), else None and the run goes on."""
    tools = adapter.tool_names()
    rendering, chat_template_of, refused = None, None, None
    try:
        rendering = adapter.rendering(endpoint) if tools else None
    except TemplateElsewhere as elsewhere:
        # A run's turns go through the trainer's chat route, which refuses tools its template
        # cannot render, rollout by rollout; the check names the tokenizer for rl to ask.
        chat_template_of = elsewhere.tokenizer_name
    except CannotRender as error:
        refused = (
            f"{ENVIRONMENT} gives the model tools ({', '.join(tools)}), but its prompts cannot "
            f"be rendered as the run's client would: {error}. {error.fix[0].upper()}{error.fix[1:]}"
        )
    except Exception as error:  # noqa: BLE001 - what could not be told is said, not guessed
        say(f"how the prompts render the tools ({', '.join(tools)}) could not be told: {type(error).__name__}: {error}")
        if checking:
            return 1
    if refused is None:
        refused = refusal(ENVIRONMENT, tools, rendering)
    if checking:
        print(verdict(tools, rendering, refused, chat_template_of), flush=True)
        return 0
    if refused is not None:
        say(refused)
        return 2
    return None


def main(argv: List[str]) -> int:
    """`python -m rl_verifiers.tool_rendering TOKENIZER TOOL...` in rl's trainer's Python: the
    verdict for tools rendered by that tokenizer's chat template."""
    if not argv:
        print("usage: python -m rl_verifiers.tool_rendering TOKENIZER [TOOL...]", file=sys.stderr)
        return 2
    tokenizer, tools = argv[0], argv[1:]
    rendering = chat_template_rendering(tokenizer) if tools else None
    print(verdict(tools, rendering, refusal(ENVIRONMENT, tools, rendering)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
