//! A generated folder of environment files of real size and shape, for the discovery benchmark.
//! Deterministic: the same count gives the same bytes, so figures compare across runs.

use std::fmt::Write as _;
use std::path::Path;

/// The shapes, by `index % 20`: most files derive from `BaseEnv` directly, as real trees do;
/// the rest use the forms the original algorithm misses (alias, sibling subclass) or finds
/// only partly (same-file subclass), plus helper modules with no environment.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Direct,
    Aliased,
    SiblingSubclass,
    AttributeBase,
    SameFileSubclass,
    Helper,
}

fn shape(index: usize) -> Shape {
    match index % 20 {
        0..=11 => Shape::Direct,
        12..=14 => Shape::Aliased,
        15 | 16 => Shape::SiblingSubclass,
        17 => Shape::AttributeBase,
        18 => Shape::SameFileSubclass,
        _ => Shape::Helper,
    }
}

pub(crate) struct CorpusFacts {
    pub files: usize,
    pub bytes: usize,
}

pub(crate) fn generate(dir: &Path, files: usize) -> anyhow::Result<CorpusFacts> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    let mut bytes = 0;
    for index in 0..files {
        let text = environment_file(index);
        bytes += text.len();
        std::fs::write(dir.join(format!("env_{index:03}.py")), text)?;
    }
    Ok(CorpusFacts { files, bytes })
}

fn environment_file(index: usize) -> String {
    let shape = shape(index);
    let class = format!("Task{index:03}Env");
    let config = format!("Task{index:03}Config");
    let mut out = String::with_capacity(16 * 1024);
    let _ = writeln!(
        out,
        "\"\"\"Environment {index}: a generated task shaped like the Atropos environments.\n\n\
         It loads a dataset, builds chat prompts, samples a group of completions, parses the\n\
         final answer and scores each completion against the reference.\n\"\"\"\n"
    );
    out.push_str(
        "import asyncio\nimport json\nimport random\nimport re\nfrom typing import Dict, List, Optional, Tuple\n\n\
         from datasets import load_dataset\nfrom pydantic import Field\n\n",
    );
    let base = match shape {
        Shape::Direct | Shape::SameFileSubclass | Shape::Helper => {
            out.push_str("from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup\n");
            "BaseEnv".to_owned()
        }
        Shape::Aliased => {
            out.push_str("from atroposlib.envs.base import APIServerConfig, BaseEnvConfig, ScoredDataGroup\n");
            out.push_str("from atroposlib.envs.base import BaseEnv as AtroposBaseEnv\n");
            "AtroposBaseEnv".to_owned()
        }
        Shape::AttributeBase => {
            out.push_str("from atroposlib.envs import base\nfrom atroposlib.envs.base import APIServerConfig, BaseEnvConfig, ScoredDataGroup\n");
            "base.BaseEnv".to_owned()
        }
        Shape::SiblingSubclass => {
            let parent = index - index % 20; // always a Direct file of the same block
            let _ = writeln!(
                out,
                "from atroposlib.envs.base import APIServerConfig, BaseEnvConfig, ScoredDataGroup\n\
                 from environments.env_{parent:03} import Task{parent:03}Env as ParentEnv"
            );
            "ParentEnv".to_owned()
        }
    };
    let _ = writeln!(
        out,
        "\nSYSTEM_PROMPT = (\n    \"You are a careful problem solver for task {index}. Think step by step inside \"\n    \"<think></think> tags, then give only the final answer inside <answer></answer> tags. \"\n    \"Answers are compared exactly after normalisation, so do not add units or prose.\"\n)\n\n\
         ANSWER_PATTERN = re.compile(r\"<answer>(.*?)</answer>\", re.DOTALL)\n"
    );
    let _ = writeln!(
        out,
        "\nclass {config}(BaseEnvConfig):\n    \"\"\"Settings of task {index}.\"\"\"\n"
    );
    for field in 0..8 {
        let _ = writeln!(
            out,
            "    option_{field}: int = Field(\n        default={},\n        description=\"Option {field} of task {index}: how many candidates are considered per step.\",\n    )",
            field * 3 + index % 7
        );
    }
    if shape == Shape::Helper {
        push_helpers(&mut out, index, 40);
        return out;
    }
    let _ = writeln!(
        out,
        "\n\nclass {class}({base}):\n    \"\"\"Generated task {index}, scored by exact match of the final answer.\"\"\"\n\n\
         \x20   name = \"task_{index:03}\"\n    env_config_cls = {config}\n\n\
         \x20   def __init__(self, config: {config}, server_configs: List[APIServerConfig], slurm=False, testing=False):\n\
         \x20       super().__init__(config, server_configs, slurm, testing)\n\
         \x20       self.percent_correct_buffer: List[float] = []\n\
         \x20       self.eval_metrics: List[Tuple[str, float]] = []\n\
         \x20       self.iter = 0\n\n\
         \x20   @classmethod\n\
         \x20   def config_init(cls) -> Tuple[{config}, List[APIServerConfig]]:\n\
         \x20       env_config = {config}(\n\
         \x20           tokenizer_name=\"Qwen/Qwen3-8B\",\n\
         \x20           group_size=8,\n\
         \x20           use_wandb=True,\n\
         \x20           max_token_length=4096,\n\
         \x20           total_steps={},\n\
         \x20           wandb_name=\"task_{index:03}\",\n\
         \x20       )\n\
         \x20       servers = [APIServerConfig(model_name=\"Qwen/Qwen3-8B\", base_url=\"http://localhost:9001/v1\", api_key=\"x\")]\n\
         \x20       return env_config, servers\n",
        100 + index
    );
    push_methods(&mut out, index);
    push_helpers(&mut out, index, 12);
    if shape == Shape::SameFileSubclass {
        let _ = writeln!(
            out,
            "\n\nclass {class}Hard({class}):\n    \"\"\"The same task restricted to its hardest items.\"\"\"\n\n    name = \"task_{index:03}_hard\"\n\n\
             \x20   async def get_next_item(self):\n        item = await super().get_next_item()\n        return item\n"
        );
    }
    let main_class = if shape == Shape::SameFileSubclass {
        format!("{class}Hard")
    } else {
        class
    };
    let _ = writeln!(
        out,
        "\n\nif __name__ == \"__main__\":\n    {main_class}.cli()"
    );
    out
}

fn push_methods(out: &mut String, index: usize) {
    let _ = writeln!(
        out,
        r#"
    async def setup(self):
        """Load the train and test splits and shuffle them with a fixed seed."""
        dataset = load_dataset("generated/task_{index:03}", split="train").shuffle(seed=42)
        split = dataset.train_test_split(test_size=0.02, seed=42)
        self.train = split["train"]
        self.test = split["test"]

    async def get_next_item(self):
        item = self.train[self.iter % len(self.train)]
        self.iter += 1
        prompt = tuple([frozenset({{"role": "user", "content": item["question"]}}.items())])
        return (prompt, item["answer"])

    async def collect_trajectories(self, item) -> Tuple[Optional[ScoredDataGroup], List]:
        messages = [
            {{"role": "system", "content": SYSTEM_PROMPT}},
            {{"role": "user", "content": dict(item[0][0])["content"]}},
        ]
        completions = await self.server.chat_completion(
            messages=messages,
            n=self.config.group_size,
            max_tokens=self.config.max_token_length,
            temperature=1.0,
        )
        to_score = []
        for choice in completions.choices:
            history = messages + [{{"role": "assistant", "content": choice.message.content}}]
            to_score.append((history, item[1], choice.finish_reason))
        scored = await self.score(to_score)
        return scored, []

    async def score(self, rollouts) -> Optional[ScoredDataGroup]:
        scores = ScoredDataGroup()
        scores["tokens"] = []
        scores["masks"] = []
        scores["scores"] = []
        random.shuffle(rollouts)
        for history, reference, finish_reason in rollouts:
            if finish_reason == "length":
                reward = -1.0
            else:
                match = ANSWER_PATTERN.search(history[-1]["content"])
                answer = match.group(1).strip() if match else ""
                reward = 1.0 if self.normalise(answer) == self.normalise(reference) else -1.0
            tokens = self.tokenizer.apply_chat_template(history, tokenize=True)
            scores["tokens"].append(tokens)
            scores["masks"].append([-100] * (len(tokens) - 1) + [tokens[-1]])
            scores["scores"].append(reward)
            self.percent_correct_buffer.append(max(reward, 0.0))
        if all(score == scores["scores"][0] for score in scores["scores"]):
            return None
        return scores

    async def evaluate(self, *args, **kwargs):
        correct = 0
        for item in self.test:
            completion = await self.server.completion(prompt=item["question"], n=1, max_tokens=512)
            match = ANSWER_PATTERN.search(completion.choices[0].text)
            answer = match.group(1).strip() if match else ""
            correct += int(self.normalise(answer) == self.normalise(item["answer"]))
        self.eval_metrics.append(("eval/percent_correct", correct / max(len(self.test), 1)))

    async def wandb_log(self, wandb_metrics: Optional[Dict] = None):
        wandb_metrics = wandb_metrics or {{}}
        if self.percent_correct_buffer:
            wandb_metrics["train/percent_correct"] = sum(self.percent_correct_buffer) / len(self.percent_correct_buffer)
        self.percent_correct_buffer = []
        for key, value in self.eval_metrics:
            wandb_metrics[key] = value
        self.eval_metrics = []
        await super().wandb_log(wandb_metrics)

    @staticmethod
    def normalise(text: str) -> str:
        return re.sub(r"[^0-9a-z.\-]", "", text.lower())
"#
    );
}

fn push_helpers(out: &mut String, index: usize, count: usize) {
    for helper in 0..count {
        let _ = writeln!(
            out,
            r#"

def helper_{index:03}_{helper:02}(values: List[float], threshold: float = {helper}.5) -> Dict[str, float]:
    """Summary statistics used by task {index}; helper {helper} of {count}."""
    kept = [value for value in values if value >= threshold]
    if not kept:
        return {{"count": 0.0, "mean": 0.0, "spread": 0.0}}
    mean = sum(kept) / len(kept)
    spread = max(kept) - min(kept)
    report = json.dumps({{"task": {index}, "helper": {helper}, "mean": mean}})
    return {{"count": float(len(kept)), "mean": mean, "spread": spread, "size": float(len(report))}}"#
        );
    }
}
