# atroposlib 0.4.0's BaseEnvConfig, restated for rl (not imported from atroposlib; never run).
#
# rl-config reads this file with the same static extractor it uses on environment sources, so
# the table of built-in fields is ordinary Python that can be compared with the real classes
# (tests/it/python.rs does that against an installed atroposlib). `APIServerConfig` is the
# entry of the `openai:` list, against which the operator's `[[locked.openai]]` is checked. Descriptions are
# rl's own words. One deliberate difference: `reasoning_effort` is typed with the values the
# real field's documentation allows, so that edits are checked.
from enum import Enum
from typing import Literal, Optional

from pydantic import BaseModel, Field


class EvalHandlingEnum(Enum):
    STOP_TRAIN = "STOP_TRAIN"
    LIMIT_TRAIN = "LIMIT_TRAIN"
    NONE = "NONE"


class BaseEnvConfig(BaseModel):
    group_size: int = Field(default=4, description="Completions sampled per prompt and scored together as one group.")
    max_num_workers: int = Field(default=-1, description="Upper bound on concurrent rollout workers; -1 derives it from max_num_workers_per_node.")
    max_eval_workers: int = Field(default=16, description="Concurrent workers used while evaluating.")
    max_num_workers_per_node: int = Field(default=8, description="Concurrent rollout workers per node.")
    steps_per_eval: int = Field(default=100, description="Training steps between two evaluations.")
    max_token_length: int = Field(default=2048, description="Longest generation, in tokens.")
    eval_handling: EvalHandlingEnum = Field(default=EvalHandlingEnum.STOP_TRAIN, description="What training does while an evaluation runs: stop, limit its workers, or nothing.")
    eval_limit_ratio: float = Field(default=0.5, description="Share of training workers kept while evaluating with LIMIT_TRAIN.")
    inference_weight: float = Field(default=1.0, description="Weight of this environment's inference; -1 leaves it out.")
    batch_size: int = Field(default=-1, description="Training batch size; normally set by the trainer through the trajectory API.")
    max_batches_offpolicy: int = Field(default=3, description="Batches that may wait in the queue ahead of the trainer.")
    tokenizer_name: str = Field(default="NousResearch/DeepHermes-3-Llama-3-3B-Preview", description="Hugging Face tokenizer name or local folder.")
    use_wandb: bool = Field(default=True, description="Log to Weights & Biases.")
    rollout_server_url: str = Field(default="http://localhost:8000", description="Address of the trajectory API (run-api).")
    total_steps: int = Field(default=1000, description="Training steps before the environment stops.")
    wandb_name: Optional[str] = Field(default=None, description="Weights & Biases name the environment's runs are grouped under.")
    num_rollouts_to_keep: int = Field(default=32, description="Rollouts shown in the Weights & Biases table.")
    num_rollouts_per_group_for_logging: int = Field(default=1, description="Rollouts of each group kept for logging; -1 keeps all.")
    ensure_scores_are_not_same: bool = Field(default=True, description="Drop groups whose scores are all equal (they carry no learning signal).")
    data_path_to_save_groups: Optional[str] = Field(default=None, description="JSON-lines file that scored groups are also written to.")
    data_dir_to_save_evals: Optional[str] = Field(default=None, description="Folder evaluation results are written to.")
    min_items_sent_before_logging: int = Field(default=2, description="Items sent before metrics are logged; 0 or less logs every time.")
    include_messages: bool = Field(default=False, description="Send the chat messages to the trainer along with tokens.")
    min_batch_allocation: Optional[float] = Field(default=None, description="Smallest share of each batch reserved for this environment (0.0 to 1.0).")
    worker_timeout: float = Field(default=600, description="Seconds a rollout task may take; -1 for no limit.")
    thinking_mode: bool = Field(default=False, description="Ask the model to reason before answering (set automatically by the reasoning options).")
    reasoning_effort: Optional[Literal["none", "minimal", "low", "medium", "high", "xhigh"]] = Field(default=None, description="Reasoning effort requested from the model.")
    max_reasoning_tokens: Optional[int] = Field(default=None, ge=1024, le=32000, description="Token budget for reasoning, where the provider supports one.")
    custom_thinking_prompt: Optional[str] = Field(default=None, description="System prompt prepended in thinking mode; none by default.")


class APIServerConfig(BaseModel):
    timeout: int = Field(default=1200, description="Seconds a request to the server may take.")
    num_max_requests_at_once: int = Field(default=512, description="Requests sent to the server at once, at most.")
    num_requests_for_eval: int = Field(default=64, description="Requests sent at once while evaluating, at most.")
    model_name: str = Field(default="default", description="The model the server serves.")
    rolling_buffer_length: int = Field(default=1000, description="Requests kept for the server's metrics.")
    server_type: Literal["openai", "trl", "sglang", "vllm"] = Field(default="openai", description="The server's protocol.")
    tokenizer_name: str = Field(default="none", description="Tokenizer for the server's completions; none uses the env's.")
    api_key: Optional[str] = Field(default="", description="API key for the server.")
    base_url: Optional[str] = Field(default="", description="Base URL for the server.")
    n_kwarg_is_ignored: bool = Field(default=False, description="The server ignores n: ask for each completion on its own.")
    health_check: bool = Field(default=True, description="Check the server's health before using it.")
