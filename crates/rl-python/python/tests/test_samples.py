"""The trainer's own off-policy bound (issue 43, `max_steps_off_policy`) on fixed groups and a
fixed memory of samples: how a completion is matched to a sample, its age, which groups are
dropped and what a step logs of it; the inference server recording what it serves."""

import asyncio
import os
import unittest
from types import SimpleNamespace

from fastapi.testclient import TestClient

from rl_trainer.batch import (
    OFF_POLICY_STEPS,
    OFF_POLICY_STEPS_MAX,
    SKIP_MALFORMED,
    SKIP_STALE,
    aligned_sequences,
    off_policy_counts,
    off_policy_steps,
    prepare_batch,
)
from rl_trainer.config import ConfigError, parse_config
from rl_trainer.samples import Drawn, Provenance, SampleMemory, turn_end_tokens
from rl_trainer.sampling import Sample
from rl_trainer.server import Policy, create_app
from rl_trainer.shaping import Shaping

from .test_config import doc
from .test_server import TOKENIZER

P = -100
PROMPT = [1, 2]
#: The template's end of an assistant turn in these tests (ChatML's `<|im_end|>`, newline).
IM_END, NEWLINE = 90, 91


def group(completions, scores=None, prompt=PROMPT):
    """One group: each completion the prompt then its tokens (a list of turns: each turn's
    tokens, then a user turn between them that is prompt to the trainer)."""
    tokens, masks = [], []
    for completion in completions:
        turns = completion if completion and isinstance(completion[0], list) else [completion]
        tok, msk = list(prompt), [P] * len(prompt)
        for i, turn in enumerate(turns):
            if i:
                tok += [7, 7]
                msk += [P, P]
            tok += turn
            msk += turn
        tokens.append(tok)
        masks.append(msk)
    scores = scores if scores is not None else [float(i) for i in range(len(completions))]
    logprobs = [[1.0 if m == P else -0.5 for m in msk] for msk in masks]
    return {"tokens": tokens, "masks": masks, "scores": scores, "inference_logprobs": logprobs}


def memory(*samples, turn_end=(IM_END, NEWLINE)):
    """A memory holding (tokens, version) samples, none stopped for length."""
    held = SampleMemory(turn_end=turn_end)
    for tokens, version in samples:
        held.record(tokens, version, False)
    return held


def ages(prepared, g=0):
    return [s.age for s in prepared.groups[g].sequences]


class MatchTests(unittest.TestCase):
    def test_a_completion_is_its_sample_exactly(self):
        held = memory(([10, 11, 12], 3))
        self.assertEqual(held.find([10, 11, 12]), Drawn(3, False))
        self.assertIsNone(held.find([10, 11]))
        self.assertIsNone(held.find([10, 11, 12, 13]))
        self.assertIsNone(held.find([]))

    def test_the_templates_turn_end_after_the_sample_is_tolerated(self):
        # Sampled without its stop token; the environment re-rendered the chat: + <|im_end|>\n.
        held = memory(([10, 11], 2), ([20, 21, IM_END], 4))
        self.assertEqual(held.find([10, 11, IM_END, NEWLINE]), Drawn(2, False))
        # Sampled with its stop token: only the newline was appended.
        self.assertEqual(held.find([20, 21, IM_END, NEWLINE]), Drawn(4, False))
        # Other trailing tokens are not the template's: no match.
        self.assertIsNone(held.find([10, 11, 55]))
        self.assertIsNone(held.find([10, 11, NEWLINE, IM_END]))
        # Without a known turn end, only exact samples match.
        self.assertIsNone(memory(([10, 11], 2), turn_end=()).find([10, 11, IM_END, NEWLINE]))

    def test_a_recurring_sample_counts_at_its_newest_version(self):
        held = memory(([10, 11], 1), ([10, 11], 4), ([10, 11], 2))
        self.assertEqual(held.find([10, 11]).version, 4)
        self.assertEqual(len(held), 1)
        # Candidates of one completion: the newest of them, the longest's length stop.
        held = SampleMemory(turn_end=(IM_END, NEWLINE))
        held.record([10, 11], 1, True)
        held.record([10, 11, IM_END], 3, False)
        self.assertEqual(held.find([10, 11, IM_END, NEWLINE]), Drawn(3, False))

    def test_a_length_stop_is_kept_when_the_same_tokens_stop_on_their_own(self):
        held = SampleMemory()
        held.record([10, 11], 1, True)
        held.record([10, 11], 2, False)
        self.assertEqual(held.find([10, 11]), Drawn(2, True))

    def test_the_oldest_samples_are_forgotten_past_the_capacity(self):
        held = SampleMemory(capacity=2)
        held.record([10], 1, False)
        held.record([11], 2, False)
        held.record([10], 3, False)  # drawn again: now the newest
        held.record([12], 4, False)
        self.assertIsNone(held.find([11]))
        self.assertEqual((held.find([10]).version, held.find([12]).version), (3, 4))

    def test_the_fixture_templates_turn_end_is_read_from_it(self):
        if not os.path.isdir(TOKENIZER):
            self.skipTest("fixtures/tokenizer not found")
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
        expected = tokenizer.encode("<|im_end|>\n", add_special_tokens=False)
        self.assertEqual(turn_end_tokens(tokenizer), expected)
        self.assertEqual(len(expected), 2)
        # A tokenizer without a template: exact matches only.
        self.assertEqual(turn_end_tokens(SimpleNamespace()), [])


class BoundTests(unittest.TestCase):
    """Weights at version 5 (five optimizer steps); bound 1 unless said."""

    HELD = memory(([10, 11], 5), ([12, 13], 4), ([14, 15], 3), ([16, 17], 1), ([16, 17], 4))

    def prepared(self, groups, bound=1, version=5, held=None):
        provenance = Provenance(held or self.HELD, version, bound)
        return prepare_batch(groups, 64, Shaping(), provenance)

    def test_ages_are_the_version_now_minus_the_newest_draw(self):
        prepared = self.prepared([group([[10, 11], [12, 13]])])
        self.assertEqual(ages(prepared), [0, 1])
        self.assertIsNone(prepared.groups[0].skip)
        # [16, 17] was drawn at 1 and again at 4: age 1, kept.
        recurred = self.prepared([group([[16, 17], [10, 11]])])
        self.assertEqual(ages(recurred), [1, 0])
        self.assertIsNone(recurred.groups[0].skip)

    def test_a_group_with_one_completion_proven_stale_is_dropped_whole(self):
        prepared = self.prepared([group([[10, 11], [14, 15]]), group([[12, 13], [10, 11]])])
        self.assertEqual(ages(prepared, 0), [0, 2])
        self.assertEqual([g.skip for g in prepared.groups], [SKIP_STALE, None])
        self.assertEqual({s.group for s in aligned_sequences(prepared)}, {1})
        self.assertEqual(
            off_policy_counts(prepared),
            {"batch/stale_groups": 1, "batch/unknown_age_completions": 0, "batch/max_age_steps": 1},
        )
        # The ages of what the step trains (group 1's: 0 and 1), logged whatever the bound.
        self.assertEqual(off_policy_steps(prepared), {OFF_POLICY_STEPS: 0.5, OFF_POLICY_STEPS_MAX: 1})

    def test_an_unknown_completion_is_kept_and_counted(self):
        prepared = self.prepared([group([[10, 11], [99, 98]]), group([[99], [97]])])
        self.assertEqual(ages(prepared, 0), [0, None])
        self.assertEqual([g.skip for g in prepared.groups], [None, None])
        counts = off_policy_counts(prepared)
        self.assertEqual(counts["batch/unknown_age_completions"], 3)
        self.assertEqual((counts["batch/stale_groups"], counts["batch/max_age_steps"]), (0, 0))
        # No trained completion of a known age: no maximum is claimed.
        unknown_only = off_policy_counts(self.prepared([group([[99], [97]])]))
        self.assertNotIn("batch/max_age_steps", unknown_only)
        self.assertEqual(off_policy_steps(self.prepared([group([[99], [97]])])), {})

    def test_bound_zero_trains_only_samples_of_the_weights_now(self):
        prepared = self.prepared([group([[10, 11], [10, 11, IM_END, NEWLINE]]), group([[10, 11], [12, 13]])], bound=0)
        self.assertEqual([g.skip for g in prepared.groups], [None, SKIP_STALE])

    def test_no_bound_measures_ages_and_drops_nothing(self):
        prepared = self.prepared([group([[10, 11], [14, 15]])], bound=None)
        self.assertEqual(ages(prepared), [0, 2])
        self.assertIsNone(prepared.groups[0].skip)

    def test_the_trailing_turn_end_is_matched_in_a_batch(self):
        prepared = self.prepared([group([[14, 15, IM_END, NEWLINE], [10, 11, IM_END, NEWLINE]])])
        self.assertEqual(ages(prepared), [2, 0])
        self.assertEqual(prepared.groups[0].skip, SKIP_STALE)

    def test_a_multi_turn_completion_is_aged_by_its_last_turn(self):
        # First turn sampled at version 1 (age 4), the last at 5: the last turn bounds the age
        # from below, and it is fresh.
        prepared = self.prepared([group([[[16, 17], [10, 11]], [[10, 11]]])])
        self.assertEqual(ages(prepared), [0, 0])
        self.assertIsNone(prepared.groups[0].skip)
        # Its last turn stale: dropped.
        stale = self.prepared([group([[[10, 11], [14, 15]], [[10, 11]]])])
        self.assertEqual(stale.groups[0].skip, SKIP_STALE)

    def test_stale_comes_after_malformed_and_before_the_other_reasons(self):
        malformed = {"tokens": [[1, 2]], "masks": [[P]], "scores": [1.0]}
        alike = group([[14, 15], [10, 11]], scores=[1.0, 1.0])  # zero advantage, and stale
        prepared = self.prepared([malformed, alike])
        self.assertEqual([g.skip for g in prepared.groups], [SKIP_MALFORMED, SKIP_STALE])
        self.assertEqual(prepared.skipped(), 2)

    def test_a_sample_recorded_before_any_version_has_no_age(self):
        held = SampleMemory()
        held.record([10, 11], None, False)
        prepared = self.prepared([group([[10, 11], [10, 11]])], held=held)
        self.assertEqual(ages(prepared), [None, None])


class ConfigTests(unittest.TestCase):
    def test_the_bound_is_read_and_checked(self):
        self.assertIsNone(parse_config(doc()).max_steps_off_policy)
        config = parse_config(doc(tinker={"max_steps_off_policy": 0}))
        self.assertEqual(config.max_steps_off_policy, 0)
        self.assertEqual(config.summary()["max_steps_off_policy"], 0)
        self.assertNotIn("max_steps_off_policy", parse_config(doc()).summary())
        for bad in (-1, "some", 1.5):
            with self.subTest(bad=bad):
                with self.assertRaises(ConfigError) as ctx:
                    parse_config(doc(tinker={"max_steps_off_policy": bad}))
                self.assertEqual(ctx.exception.key, "tinker.max_steps_off_policy")


class ServedPolicy(Policy):
    """Samples [10 + i] per request; waits on `gate` when given (a save and swap meanwhile)."""

    model_name = "tiny"
    vocab_size = None

    def __init__(self):
        self.samples = SampleMemory()
        self.weights_version = 0
        self.gate = None
        self.drawn = 0

    @property
    def initialized(self):
        return True

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, tokens):
        return "".join(chr(65 + t % 26) for t in tokens)

    def token_text(self, token):
        return chr(65 + token % 26)

    async def sample(self, prompt, n, spec):
        if self.gate is not None:
            await self.gate()
        self.drawn += 1
        return [Sample(tokens=[10 + self.drawn], logprobs=[-0.5], stop_reason="length") for _ in range(n)]


class ServerRecordsTests(unittest.TestCase):
    def test_every_sample_served_is_recorded_with_the_weights_version(self):
        policy = ServedPolicy()
        http = TestClient(create_app(policy))
        body = {"input_ids": [1, 2], "sampling_params": {"n": 1, "max_new_tokens": 1}, "return_logprob": True}
        self.assertEqual(http.post("/generate", json=body).status_code, 200)
        self.assertEqual(policy.samples.find([11]), Drawn(0, True))
        policy.weights_version = 3
        self.assertEqual(http.post("/v1/completions", json={"model": "tiny", "prompt": "hi", "max_tokens": 1}).status_code, 200)
        self.assertEqual(policy.samples.find([12]), Drawn(3, True))

    def test_a_swap_during_the_request_records_the_newer_version(self):
        policy = ServedPolicy()

        async def swapped():
            await asyncio.sleep(0)
            policy.weights_version = 7

        policy.gate = swapped
        http = TestClient(create_app(policy))
        body = {"input_ids": [1, 2], "sampling_params": {"n": 1, "max_new_tokens": 1}}
        self.assertEqual(http.post("/generate", json=body).status_code, 200)
        self.assertEqual(policy.samples.find([11]).version, 7)

    def test_a_policy_without_a_memory_records_nothing(self):
        policy = ServedPolicy()
        policy.samples = None
        http = TestClient(create_app(policy))
        body = {"input_ids": [1, 2], "sampling_params": {"n": 1, "max_new_tokens": 1}}
        self.assertEqual(http.post("/generate", json=body).status_code, 200)


if __name__ == "__main__":
    unittest.main()
