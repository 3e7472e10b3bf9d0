"""The run's advantage and truncation choices (issue 43) on fixed groups: what each makes of
the trained batch, and that the engine gets the loss the run chose."""

import asyncio
import unittest
from types import SimpleNamespace

from rl_trainer.batch import SKIP_TRUNCATED, aligned_sequences, batch_counts, prepare_batch
from rl_trainer.config import ConfigError, parse_config
from rl_trainer.engine import Tinker
from rl_trainer.samples import Provenance, SampleMemory
from rl_trainer.shaping import Shaping, overlong_penalty

from .test_config import doc

P = -100


def group(scores, lengths, prompt=2):
    """Completions of `prompt` prompt tokens then `length - prompt` completion tokens."""
    tokens = [list(range(1, n + 1)) for n in lengths]
    masks = [[P] * prompt + list(range(prompt + 1, n + 1)) for n in lengths]
    logprobs = [[1.0] * prompt + [-0.5] * (n - prompt) for n in lengths]
    return {"tokens": tokens, "masks": masks, "scores": scores, "inference_logprobs": logprobs}


def advantages(prepared):
    return [round(s.advantage, 6) for s in prepared.groups[0].sequences]


class AdvantageNormTests(unittest.TestCase):
    # Scores 0, 0, 0, 4: mean 1, std sqrt(3) ~ 1.732.
    SCORES = [0.0, 0.0, 0.0, 4.0]

    def prepared(self, norm):
        return prepare_batch([group(self.SCORES, [6] * 4)], 64, Shaping(advantage_norm=norm))

    def test_std_floor_is_todays_rule(self):
        self.assertEqual(advantages(self.prepared("std_floor")), [-0.57735, -0.57735, -0.57735, 1.732051])
        # A spread below 1 is not amplified.
        small = prepare_batch([group([0.0, 1.0], [6, 6])], 64, Shaping(advantage_norm="std_floor"))
        self.assertEqual(advantages(small), [-0.5, 0.5])

    def test_std_divides_by_the_groups_spread_even_below_one(self):
        self.assertEqual(advantages(self.prepared("std")), [-0.57735, -0.57735, -0.57735, 1.732051])
        small = prepare_batch([group([0.0, 1.0], [6, 6])], 64, Shaping(advantage_norm="std"))
        self.assertEqual(advantages(small), [-1.0, 1.0])

    def test_mean_only_centres_without_dividing(self):
        self.assertEqual(advantages(self.prepared("mean_only")), [-1.0, -1.0, -1.0, 3.0])

    def test_a_group_scored_alike_is_skipped_under_every_norm(self):
        for norm in ("std_floor", "std", "mean_only"):
            with self.subTest(norm=norm):
                prepared = prepare_batch([group([1.0, 1.0], [6, 6])], 64, Shaping(advantage_norm=norm))
                self.assertEqual(prepared.skipped("zero_advantage"), 1)
                self.assertEqual(aligned_sequences(prepared), [])


class TruncatedTests(unittest.TestCase):
    # Completion 1 (10 tokens) is cut to the trainer's 8; the others fit.
    SCORES = [1.0, 1.0, 0.0]
    LENGTHS = [6, 10, 6]

    def prepared(self, choice, band=0, max_len=8):
        return prepare_batch([group(self.SCORES, self.LENGTHS)], max_len, Shaping(truncated=choice, overlong_band=band))

    def test_train_trains_a_cut_completion_as_any_other(self):
        prepared = self.prepared("train")
        self.assertEqual(prepared.truncated, 1)
        self.assertEqual(advantages(prepared), [0.333333, 0.333333, -0.666667])
        self.assertEqual([s.index for s in aligned_sequences(prepared)], [0, 1, 2])
        self.assertEqual(
            prepared.truncation_stats(),
            {"train/truncated_share": 1 / 3, "train/masked_share": 0.0, "train/penalised_share": 0.0},
        )

    def test_mask_trains_nothing_of_it_but_keeps_its_score_in_the_group(self):
        prepared = self.prepared("mask")
        self.assertEqual(advantages(prepared), [0.333333, 0.333333, -0.666667])
        self.assertEqual([s.index for s in aligned_sequences(prepared)], [0, 2])
        self.assertEqual(prepared.truncation_stats()["train/masked_share"], 1 / 3)
        # A group whose every completion was cut trains nothing, and says why.
        cut = prepare_batch([group([1.0, 0.0], [10, 12])], 8, Shaping(truncated="mask"))
        self.assertEqual(cut.groups[0].skip, SKIP_TRUNCATED)
        self.assertEqual(batch_counts(cut, 0)["batch/truncated_groups"], 1)

    def test_zero_reward_scores_it_zero_before_the_advantages(self):
        prepared = self.prepared("zero_reward")
        # Scores read as 1, 0, 0: mean 1/3.
        self.assertEqual(advantages(prepared), [0.666667, -0.333333, -0.333333])
        # The group's reward stays the environment's.
        self.assertAlmostEqual(prepared.reward_mean(), 2 / 3)
        # One completion of three had its score lowered (the cut one's 1 became 0).
        self.assertEqual(prepared.truncation_stats()["train/penalised_share"], 1 / 3)

    def test_penalty_ramps_over_the_band_and_gives_minus_one_when_cut(self):
        self.assertEqual(overlong_penalty(4, False, 8, 4), 0.0)
        self.assertEqual(overlong_penalty(6, False, 8, 4), -0.5)
        self.assertEqual(overlong_penalty(8, False, 8, 4), -1.0)
        self.assertEqual(overlong_penalty(3, True, 8, 4), -1.0)
        self.assertEqual(overlong_penalty(7, False, 8, 0), 0.0)
        # Band 4 before 8 tokens: the 6-token completions lose 0.5, the cut one 1.
        prepared = self.prepared("penalty", band=4)
        # Scores read as 0.5, 0, -0.5: mean 0, std 0.408 (floored at 1).
        self.assertEqual(advantages(prepared), [0.5, 0.0, -0.5])
        # Every completion was in the band or cut: all three lowered.
        self.assertEqual(prepared.truncation_stats()["train/penalised_share"], 1.0)
        self.assertEqual(prepared.truncation_stats()["train/masked_share"], 0.0)

    def test_a_completion_the_sampler_stopped_at_max_tokens_is_truncated(self):
        memory = SampleMemory(capacity=2)
        # Completion 0's sampled tokens (after its 2 prompt tokens) stopped for length.
        memory.record([3, 4, 5, 6], 0, True)
        provenance = Provenance(memory, 0)
        prepared = prepare_batch([group([1.0, 0.0], [6, 7])], 64, Shaping(truncated="mask"), provenance)
        self.assertEqual([s.truncated for s in prepared.groups[0].sequences], [True, False])
        self.assertEqual([s.index for s in aligned_sequences(prepared)], [1])
        # The oldest samples are forgotten past the capacity.
        memory.record([9], 0, True)
        memory.record([10], 0, True)
        self.assertFalse(memory.holds_length_stop([3, 4, 5, 6]))
        self.assertTrue(memory.holds_length_stop([10]))
        self.assertFalse(memory.holds_length_stop([10, 11]))  # one token more ended on its own
        # A sample that stopped on its own is remembered, not taken for a length stop.
        memory.record([12, 13], 0, False)
        self.assertIsNotNone(memory.find([12, 13]))
        self.assertFalse(memory.holds_length_stop([12, 13]))


class LossTests(unittest.TestCase):
    def test_the_choices_are_checked_against_the_contract(self):
        for key, value in (("loss", "grpo"), ("advantage_norm", "none"), ("truncated", "drop")):
            with self.subTest(key=key):
                with self.assertRaises(ConfigError) as ctx:
                    parse_config(doc(tinker={key: value}))
                self.assertEqual(ctx.exception.key, f"tinker.{key}")
                self.assertIn("must be one of", ctx.exception.message)

    def test_the_engine_gets_the_loss_and_only_its_own_config(self):
        cases = [
            ({}, "importance_sampling", None),
            ({"loss": "ppo"}, "ppo", None),
            ({"loss": "ppo", "clip_low": 0.8, "clip_high": 1.28}, "ppo", {"clip_low_threshold": 0.8, "clip_high_threshold": 1.28}),
            ({"loss": "cispo", "clip_high": 4.0}, "cispo", {"clip_high_threshold": 4.0}),
            ({"loss": "dro", "dro_beta": 0.05, "clip_high": 1.3}, "dro", {"beta": 0.05}),
        ]
        for tinker, loss, config in cases:
            with self.subTest(tinker=tinker):
                c = parse_config(doc(tinker=tinker))
                calls = []

                class Training:
                    def forward_backward(self, datums, loss_fn, loss_fn_config=None):
                        calls.append((loss_fn, loss_fn_config))
                        return asyncio.sleep(0, result=SimpleNamespace())

                    def optim_step(self, adam):
                        return asyncio.sleep(0, result=SimpleNamespace())

                engine = Tinker(c, "tml-local", lambda _: None)
                engine.training = Training()
                asyncio.run(engine.train([], c.learning_rate))
                self.assertEqual(calls, [(loss, config)])
        ignored = parse_config(doc(tinker={"dro_beta": 0.1, "overlong_band": 8}))
        self.assertEqual(ignored.unused_algorithm_settings(), ["tinker.dro_beta", "tinker.overlong_band"])


if __name__ == "__main__":
    unittest.main()
