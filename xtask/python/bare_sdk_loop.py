#!/usr/bin/env python3
"""A bare Tinker-SDK RL loop: the baseline "the same Tinker calls made by a bare SDK script".

It uses nothing from rl: only the `tinker` SDK (rl's pin), the base
model's tokenizer through transformers, and numpy. It starts no server; point it at one:

    ENGINE_PYTHON xtask/python/bare_sdk_loop.py --base-url http://127.0.0.1:PORT \
        --base-model MODEL_DIR --steps 20 --group-size 8 --groups 8 --max-tokens 16 \
        --lr 1e-2 --rank 8 [--kl-coef C] [--json-out FILE] [--probe]

The task is learnable by a tiny random model: reward = the share of a completion's decoded
characters that are ASCII digits. Each step, for each of B chat prompts, it samples G
completions (temperature 1, stop at the chat template's end-of-turn token) with the current
sampling client, turns rewards into group advantages (r - mean, divided by max(std, 1), the
tinker-atropos trainer's rule; groups whose advantages are all 0 are skipped), and makes the
calls a Tinker RL trainer makes: forward_backward(importance_sampling), optim_step(Adam),
save_weights_for_sampler("step_N") and a new sampling client on that path.

The defaults are settings under which the reward of fixtures/tiny-model's random model rises
measurably within 20 steps on a 2-core CPU (about 1.5 s a step after the first). They assume a
server started with `--backend-config '{"max_lora_adapters": 3, "max_lora_rank": 8,
"sample_max_num_sequences": 64, "train_micro_batch_size": 8}'`: fixed batch shapes (G*B
sequences per sampling batch, G per training micro-batch) spare the engine a JIT compilation
(5-15 s) for every new batch size, and adapter slot 0 is the engine's own (base-model
sampling), so one training client needs max_lora_adapters >= 2, --probe's second client 3.

Each step's JSON record holds its whole time (`step_seconds`, from sampling to the new
sampling client; `seconds` has its parts) and its `tokens`, counted as rl's trainer counts its
tokens/*: `prompt` and `sampled` over every completion (skipped groups included), `trained`
the model-input tokens of the datums sent to forward_backward.

--kl-coef C (> 0) adds the Tinker cookbook's KL penalty to the base model: a sampler of the
base weights, made once, gives each trained sequence's log-probabilities (one compute_logprobs
request per sequence, all in flight at once); with d = sampler logprob - base logprob per
completion token, each token's advantage gains C * (mean(d) - d), the mean over the step's
completion tokens. The extra requests are timed as `kl`, inside the step.

--probe afterwards exercises, once each, what a trainer may need beyond the loop:
save_state/load_state, create_training_client_from_state, compute_logprobs, sampling from
the base model; each outcome is printed and stored under "probes" in the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from concurrent.futures import Future

import numpy as np
import tinker
from tinker import types
from transformers import AutoTokenizer

PROMPTS = [
    "Write some digits.",
    "Reply with a number.",
    "Give me digits only.",
    "Type a long number.",
    "Write a few numbers.",
    "Count with digits.",
    "Say a number, any number.",
    "Write the digits you like.",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True, help="the Tinker API server, e.g. http://127.0.0.1:8000")
    p.add_argument("--base-model", required=True, help="the server's base model (name or local folder)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--group-size", type=int, default=8, help="completions per prompt (G)")
    p.add_argument("--groups", type=int, default=8, help="prompts per step (B)")
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--seed", type=int, default=0, help="LoRA initialisation seed")
    p.add_argument("--kl-coef", type=float, default=0.0, help="the KL penalty to the base model (0: none)")
    p.add_argument("--json-out", help="write every step's figures (and probes) here")
    p.add_argument("--probe", action="store_true", help="also try save/load state, compute_logprobs, base sampling")
    return p.parse_args(argv)


def digit_share(text: str) -> float:
    return sum(c in "0123456789" for c in text) / len(text) if text else 0.0


def advantages(rewards: list[float]) -> list[float]:
    r = np.asarray(rewards, dtype=np.float64)
    return list((r - r.mean()) / max(float(r.std()), 1.0))


class Timer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def __call__(self, name: str):
        timer = self

        class _Span:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                timer.seconds[name] = round(timer.seconds.get(name, 0.0) + time.perf_counter() - self.t0, 4)

        return _Span()


def render_prompts(tokenizer, count: int) -> list[list[int]]:
    rendered = []
    for i in range(count):
        messages = [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]
        rendered.append(list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)))
    return rendered


def loss_of(result) -> tuple[float, str]:
    """The step's loss: metrics["loss:sum"] when the server reports it, else the same sum recomputed
    from the per-token losses it returns (skyrl-tx 0.3.0 sends empty metrics)."""
    metrics = result.metrics or {}
    if "loss:sum" in metrics:
        return float(metrics["loss:sum"]), "metrics[loss:sum]"
    total = sum(float(np.sum(out["elementwise_loss"].tolist())) for out in result.loss_fn_outputs)
    return total, "sum(elementwise_loss)"


def build_datum(prompt: list[int], completion: list[int], sampler_logprobs: list[float], advantage):
    """`advantage`: one for the whole completion, or one per completion token."""
    per_token = advantage if isinstance(advantage, list) else [float(advantage)] * len(completion)
    tokens = prompt + completion
    n_prompt = len(prompt) - 1  # positions predicting a prompt token carry no signal
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens=tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": tokens[1:],
            "logprobs": [0.0] * n_prompt + [float(x) for x in sampler_logprobs],
            "advantages": [0.0] * n_prompt + per_token,
        },
    )


def floored(logprob) -> float:
    """A logprob as the engine reads it (and rl's trainer): within [-20, 0]."""
    return min(0.0, max(-20.0, float(logprob)))


def kl_penalised(pending, base, kl_coef: float, timer) -> tuple[list, float]:
    """Each pending completion's per-token advantages with the cookbook's penalty; the step's
    mean d (sampler logprob - base logprob over the completion tokens)."""
    with timer("kl"):
        futures = [base.compute_logprobs(types.ModelInput.from_ints(tokens=prompt + completion)) for prompt, completion, _, _ in pending]
        base_logprobs = [f.result() for f in futures]
    diffs = []
    for (prompt, completion, sampled, _), logprobs in zip(pending, base_logprobs):
        diffs.append([floored(s) - floored(b) for s, b in zip(sampled, logprobs[len(prompt):])])
    flat = [d for per in diffs for d in per]
    mean = sum(flat) / len(flat) if flat else 0.0
    shaped = [
        (prompt, completion, sampled, [advantage + kl_coef * (mean - d) for d in per])
        for (prompt, completion, sampled, advantage), per in zip(pending, diffs)
    ]
    return shaped, mean


def run_step(step, args, training, sampler, prompts, tokenizer, stop_ids, log, base=None):
    began = time.perf_counter()
    timer = Timer()
    params = types.SamplingParams(max_tokens=args.max_tokens, temperature=1.0, stop=stop_ids)
    with timer("sample"):
        futures: list[Future] = [
            sampler.sample(prompt=types.ModelInput.from_ints(tokens=p), num_samples=args.group_size, sampling_params=params)
            for p in prompts
        ]
        responses = [f.result() for f in futures]

    data, group_means, lengths, kept, example = [], [], [], 0, None
    pending: list = []  # (prompt, completion, sampler logprobs, advantage) of each trained completion
    # Counted as rl's trainer counts them (its tokens/*): prompt and sampled over every
    # completion, skipped groups included; trained, the model-input tokens of the datums.
    tokens = {"prompt": 0, "sampled": 0, "trained": 0}
    for prompt, response in zip(prompts, responses):
        texts, rewards = [], []
        for seq in response.sequences:
            text = tokenizer.decode(seq.tokens, skip_special_tokens=True)
            texts.append(text)
            rewards.append(digit_share(text))
            lengths.append(len(seq.tokens))
            tokens["prompt"] += len(prompt)
            tokens["sampled"] += len(seq.tokens)
        group_means.append(float(np.mean(rewards)))
        example = example or texts[int(np.argmax(rewards))]
        adv = advantages(rewards)
        if all(a == 0.0 for a in adv):
            continue
        kept += 1
        for seq, a in zip(response.sequences, adv):
            if seq.logprobs is None or len(seq.logprobs) != len(seq.tokens):
                raise RuntimeError("the sampler returned no per-token logprobs")
            pending.append((prompt, list(seq.tokens), list(seq.logprobs), a))

    kl_base = None
    if pending and base is not None:
        pending, kl_base = kl_penalised(pending, base, args.kl_coef, timer)
    data = [build_datum(*item) for item in pending]
    tokens["trained"] = sum(d.model_input.length for d in data)
    loss, loss_source, metric_keys = None, None, None
    if data:
        with timer("fwd_bwd"):
            result = training.forward_backward(data, "importance_sampling").result()
        metric_keys = sorted((result.metrics or {}).keys())
        loss, loss_source = loss_of(result)
        with timer("optim"):
            training.optim_step(types.AdamParams(learning_rate=args.lr, beta1=0.9, beta2=0.95, eps=1e-8)).result()
    with timer("save"):
        path = training.save_weights_for_sampler(f"step_{step}").result().path
        sampler = training.create_sampling_client(path).result()

    record = {
        "step": step,
        "reward_mean": round(float(np.mean(group_means)), 4),
        "loss": None if loss is None else round(loss, 6),
        "loss_source": loss_source,
        "metric_keys": metric_keys,
        "groups_kept": kept,
        "datums": len(data),
        "mean_completion_tokens": round(float(np.mean(lengths)), 2),
        "seconds": timer.seconds,
        # The whole step, from sampling to the new sampling client (as rl's time/total_secs).
        "step_seconds": round(time.perf_counter() - began, 4),
        "tokens": tokens,
        "kl_base": kl_base,
        "sampler_path": path,
        "example": example,
    }
    s = timer.seconds
    log(f"step {step:3d}  reward {record['reward_mean']:.3f}  loss {record['loss']}  kept {kept}/{len(prompts)}  "
        f"len {record['mean_completion_tokens']:5.1f}  tokens {tokens['sampled']} sampled {tokens['trained']} trained  "
        f"step {record['step_seconds']:6.2f}s  sample {s.get('sample', 0):6.2f}s  "
        f"kl {s.get('kl', 0):5.2f}s  fwd_bwd {s.get('fwd_bwd', 0):6.2f}s  optim {s.get('optim', 0):5.2f}s  save {s.get('save', 0):5.2f}s  "
        f"e.g. {example!r}")
    return sampler, record


def attempt(name: str, fn, probes: dict, log) -> object:
    t0 = time.perf_counter()
    try:
        value = fn()
        probes[name] = {"ok": True, "seconds": round(time.perf_counter() - t0, 3), "value": repr(value)[:300]}
        log(f"probe {name}: ok ({probes[name]['seconds']} s) {probes[name]['value']}")
        return value
    except Exception as e:  # every probe is reported, none stops the others
        probes[name] = {"ok": False, "seconds": round(time.perf_counter() - t0, 3), "error": f"{type(e).__name__}: {e}"[:600]}
        log(f"probe {name}: FAILED {probes[name]['error']}")
        return None


def run_probes(args, service, training, sampler, prompts, log) -> dict:
    probes: dict = {}
    prompt = types.ModelInput.from_ints(tokens=prompts[0])
    short = types.SamplingParams(max_tokens=4, temperature=1.0)

    saved = attempt("save_state", lambda: training.save_state("probe_state").result().path, probes, log)
    if saved:
        attempt("load_state", lambda: training.load_state(saved).result(), probes, log)
        if hasattr(training, "load_state_with_optimizer"):
            attempt("load_state_with_optimizer", lambda: training.load_state_with_optimizer(saved).result(), probes, log)
        if hasattr(service, "create_training_client_from_state"):
            def from_state():
                client = service.create_training_client_from_state(saved).result()
                return client.save_weights_for_sampler("from_state").result().path

            attempt("create_training_client_from_state", from_state, probes, log)
    attempt("compute_logprobs", lambda: sampler.compute_logprobs(prompt).result(), probes, log)

    def base_sampling():
        base = service.create_sampling_client(base_model=args.base_model).result()
        return list(base.sample(prompt=prompt, num_samples=2, sampling_params=short).result().sequences[0].tokens)

    attempt("create_sampling_client(base_model)", base_sampling, probes, log)
    return probes


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def log(line: str) -> None:
        print(line, flush=True)

    t_start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(args.base_model)
    stop_ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else None
    prompts = render_prompts(tokenizer, args.groups)

    setup = Timer()
    with setup("service_client"):
        # TINKER_API_KEY when the server checks keys (the stand-in for the hosted service).
        service = tinker.ServiceClient(base_url=args.base_url, api_key=os.environ.get("TINKER_API_KEY") or "tml-local")
    with setup("create_lora_training_client"):
        training = service.create_lora_training_client(base_model=args.base_model, rank=args.rank, seed=args.seed).result()
    with setup("save_step_0"):
        path0 = training.save_weights_for_sampler("step_0").result().path
        sampler = training.create_sampling_client(path0).result()
    log(f"tinker {tinker.__version__}; step_0 weights at {path0}; setup {setup.seconds}")

    base = service.create_sampling_client(base_model=args.base_model).result() if args.kl_coef > 0.0 else None
    records = []
    for step in range(1, args.steps + 1):
        sampler, record = run_step(step, args, training, sampler, prompts, tokenizer, stop_ids, log, base)
        records.append(record)

    probes = run_probes(args, service, training, sampler, prompts, log) if args.probe else None

    rewards = [r["reward_mean"] for r in records]
    k = max(1, min(5, len(rewards) // 4))
    summary = {
        "reward_first": round(float(np.mean(rewards[:k])), 4) if rewards else None,
        "reward_last": round(float(np.mean(rewards[-k:])), 4) if rewards else None,
        "window": k,
        "total_seconds": round(time.perf_counter() - t_start, 2),
        "client_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    log(f"reward first {k} steps {summary['reward_first']}, last {k} steps {summary['reward_last']}; "
        f"total {summary['total_seconds']} s")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"args": vars(args), "setup_seconds": setup.seconds, "steps": records,
                       "probes": probes, "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
