"""__NAME__: an Atropos environment written by `rl envs new __NAME__`.

It asks the questions of a JSON-lines dataset (`{"question": ..., "answer": ...}` per line,
by default `__NAME__.jsonl` beside this file), samples a group of answers per question from
the policy, and scores each 1.0 when its last number (or, for answers that are not numbers,
its last line) matches the expected answer; a wrong answer scores between -1.0 and 0.0 by how
close it comes. Replace `score` and `prompt` with your task's; keep the rest.

    python __NAME__.py process --env.total_steps 3 --openai.base_url URL --openai.model_name M
"""

import json
import os
import re
from difflib import SequenceMatcher
from typing import Dict, List, Optional, Tuple

from pydantic import Field

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup

HERE = os.path.dirname(os.path.abspath(__file__))
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class __CLASS__Config(BaseEnvConfig):
    dataset_path: str = Field(
        default="__NAME__.jsonl",
        description="JSON-lines file of {question, answer}; relative to this file's folder",
    )
    system_prompt: str = Field(
        default="Answer the question. End with the final answer alone on the last line.",
        description="The system message of every prompt",
    )
    max_completion_tokens: int = Field(default=256, description="max_tokens per completion")


def final_answer(text: Optional[str]) -> str:
    """The last number in `text`, else its last non-empty line, normalised for comparison."""
    text = (text or "").strip()
    numbers = NUMBER.findall(text)
    if numbers:
        value = float(numbers[-1])
        return str(int(value)) if value.is_integer() else str(value)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1].lower() if lines else ""


class __CLASS__(BaseEnv):
    name = "__NAME__"
    env_config_cls = __CLASS__Config

    @classmethod
    def config_init(cls) -> Tuple[__CLASS__Config, List[APIServerConfig]]:
        config = __CLASS__Config(group_size=8, total_steps=100, max_token_length=2048)
        # A list even for one server: atroposlib reads base_url only from a list.
        servers = [
            APIServerConfig(
                model_name="default",
                base_url="http://127.0.0.1:8001/v1",
                api_key=None,
                server_type="openai",
                health_check=False,
            )
        ]
        return config, servers

    async def setup(self):
        path = self.config.dataset_path
        if not os.path.isabs(path):
            path = os.path.join(HERE, path)
        with open(path, "r", encoding="utf-8") as f:
            self.items = [json.loads(line) for line in f if line.strip()]
        if not self.items:
            raise ValueError(f"{path} holds no items")
        self.next_index = 0

    async def get_next_item(self) -> Dict[str, str]:
        item = self.items[self.next_index % len(self.items)]
        self.next_index += 1
        return {"question": str(item["question"]), "answer": str(item["answer"])}

    def prompt(self, item) -> List[Dict[str, str]]:
        return [
            {"role": "system", "content": self.config.system_prompt},
            {"role": "user", "content": item["question"]},
        ]

    @staticmethod
    def score(completion: Optional[str], answer: str) -> float:
        got, expected = final_answer(completion), final_answer(answer)
        if got == expected:
            return 1.0
        # Partial credit for a near miss: atroposlib drops a group whose scores are all equal
        # (it teaches nothing), so while no answer in a group is right yet - a small or
        # untrained model - the closer ones must still score higher.
        return -1.0 + SequenceMatcher(None, got, expected).ratio()

    def tokens_and_masks(self, messages, completion: str) -> Tuple[List[int], List[int]]:
        # Rendered as text, then encoded: apply_chat_template(tokenize=True) returns
        # different types across transformers versions.
        render = self.tokenizer.apply_chat_template
        prefix_text = render(messages, tokenize=False, add_generation_prompt=True)
        full_text = render(
            messages + [{"role": "assistant", "content": completion}], tokenize=False
        )
        prefix = list(self.tokenizer.encode(prefix_text, add_special_tokens=False))
        full = list(self.tokenizer.encode(full_text, add_special_tokens=False))
        if full[: len(prefix)] != prefix:
            full = prefix + list(self.tokenizer.encode(completion, add_special_tokens=False))
        return full, [-100] * len(prefix) + full[len(prefix) :]

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List]:
        messages = self.prompt(item)
        completions = await self.server.chat_completion(
            messages=messages,
            n=self.config.group_size,
            max_tokens=min(self.config.max_completion_tokens, self.config.max_token_length),
            temperature=1.0,
        )
        group = ScoredDataGroup(tokens=[], masks=[], scores=[], messages=[])
        for choice in completions.choices:
            text = choice.message.content or ""
            tokens, masks = self.tokens_and_masks(messages, text)
            group["tokens"].append(tokens)
            group["masks"].append(masks)
            group["scores"].append(self.score(text, item["answer"]))
            group["messages"].append(messages + [{"role": "assistant", "content": text}])
        if not self.config.include_messages:
            group["messages"] = None
        return group, []

    async def evaluate(self, *args, **kwargs):
        return None


if __name__ == "__main__":
    __CLASS__.cli()
