"""The clip fraction, the ratio mean and the KL penalty to the base model (issue 43) on fixed
logprobs, and the settings that ask for them."""

import math
import unittest

from rl_trainer.batch import AlignedSequence
from rl_trainer.config import CONTRACT, ConfigError, parse_config
from rl_trainer.divergence import CLIP_FRACTION, KL_BASE, RATIO_MEAN, clip_bounds, kl_penalty, ratio_stats

from rl_trainer.losses import LocalDefaults

from .test_config import doc

LOCAL = LocalDefaults.of(CONTRACT["constants"]).clips
LOCAL_PPO = LOCAL["ppo"]


def sequence(sampler, advantage=1.0, prompt=1):
    """`prompt` prompt targets (sampler logprob 0.0, advantage 0, not trained) then one trained
    target per sampler logprob; `advantage` one for all of them, or one each."""
    n = prompt + len(sampler)
    advantages = list(advantage) if isinstance(advantage, (list, tuple)) else [advantage] * len(sampler)
    return AlignedSequence(
        group=0,
        index=0,
        input_tokens=list(range(1, n + 1)),
        target_tokens=list(range(2, n + 2)),
        logprobs=[0.0] * prompt + list(sampler),
        advantages=[0.0] * prompt + advantages,
        trained=[False] * prompt + [True] * len(sampler),
    )


class ClipBoundsTests(unittest.TestCase):
    def test_the_local_engine_clips_at_the_runs_bounds_else_its_own_or_the_adapters(self):
        self.assertEqual(LOCAL_PPO, (0.8, 1.2))
        self.assertEqual(LOCAL["cispo"], (0.0, 4.0))
        # ppo without bounds: skyrl-tx's own fixed clip; with them, rl's adapter at them.
        self.assertEqual(clip_bounds("ppo", None, None, True, LOCAL), ((0.8, 1.2), None))
        self.assertEqual(clip_bounds("ppo", 0.5, 2.0, True, LOCAL), ((0.5, 2.0), None))
        self.assertEqual(clip_bounds("ppo", None, 1.28, True, LOCAL), ((0.8, 1.28), None))
        self.assertEqual(clip_bounds("cispo", None, None, True, LOCAL), ((0.0, 4.0), None))
        self.assertEqual(clip_bounds("cispo", 0.5, None, True, LOCAL), ((0.5, 4.0), None))

    def test_elsewhere_only_bounds_the_run_set_are_known(self):
        self.assertEqual(clip_bounds("cispo", 0.0, 1.28, False, LOCAL), ((0.0, 1.28), None))
        self.assertEqual(clip_bounds("ppo", 0.7, 1.3, False, LOCAL), ((0.7, 1.3), None))
        for low, high in ((None, None), (0.8, None), (None, 1.2)):
            bounds, why = clip_bounds("ppo", low, high, False, LOCAL)
            self.assertIsNone(bounds)
            self.assertIn("clip_low", why)
            self.assertIn("not document", why)

    def test_a_loss_that_clips_nothing_has_no_bounds_and_nothing_to_say(self):
        for loss in ("importance_sampling", "dro"):
            self.assertEqual(clip_bounds(loss, 0.8, 1.2, True, LOCAL), (None, None))


class RatioTests(unittest.TestCase):
    def test_the_clip_fraction_is_the_share_of_trained_tokens_outside_the_bounds(self):
        # Ratios exp(trainer - sampler): 1.0, e^0.1 ~ 1.105, e^0.5 ~ 1.65, e^-0.5 ~ 0.61.
        sequences = [sequence([-1.0, -1.0]), sequence([-2.0, -2.0])]
        # The prompt target's trainer logprob (-9) is never counted.
        trainer = [[-9.0, -1.0, -0.9], [-9.0, -1.5, -2.5]]
        stats = ratio_stats(sequences, trainer, (0.8, 1.2))
        self.assertAlmostEqual(stats[CLIP_FRACTION], 0.5)
        expected = (1.0 + math.exp(0.1) + math.exp(0.5) + math.exp(-0.5)) / 4
        self.assertAlmostEqual(stats[RATIO_MEAN], expected)
        # Wider bounds: only e^0.5 is outside; DAPO's raised upper bound alone keeps e^-0.5 out.
        self.assertAlmostEqual(ratio_stats(sequences, trainer, (0.5, 1.5))[CLIP_FRACTION], 0.25)
        self.assertAlmostEqual(ratio_stats(sequences, trainer, (0.8, 1.7))[CLIP_FRACTION], 0.25)

    def test_on_policy_tokens_are_never_clipped(self):
        sequences = [sequence([-0.3, -1.7, -4.0])]
        stats = ratio_stats(sequences, [[0.0, -0.3, -1.7, -4.0]], (0.8, 1.2))
        self.assertEqual(stats, {RATIO_MEAN: 1.0, CLIP_FRACTION: 0.0})

    def test_unknown_bounds_log_the_ratio_alone_and_no_logprobs_log_nothing(self):
        sequences = [sequence([-1.0])]
        self.assertEqual(set(ratio_stats(sequences, [[0.0, -1.0]], None)), {RATIO_MEAN})
        self.assertEqual(ratio_stats(sequences, [[]], (0.8, 1.2)), {})
        # A huge logprob gap is a ratio outside any bound, not an overflow.
        stats = ratio_stats([sequence([-20.0])], [[0.0, 900.0]], (0.8, 1.2))
        self.assertEqual(stats[CLIP_FRACTION], 1.0)


class KlPenaltyTests(unittest.TestCase):
    # Sampler logprobs (-1, -2) and (-1,); base ones (-1.5, -1.0) and (-1.3,): d = logp - logp_base
    # = 0.5, -1.0, 0.3; mean -0.0666...
    def batch(self):
        sequences = [sequence([-1.0, -2.0], advantage=1.0), sequence([-1.0], advantage=-1.0)]
        # One base logprob per token: the first token (nothing predicts it), the prompt target,
        # then the completion's.
        base = [[0.0, -7.0, -1.5, -1.0], [0.0, -7.0, -1.3]]
        return sequences, base

    def test_the_kl_estimate_is_the_mean_of_logp_minus_logp_base_over_trained_tokens(self):
        sequences, base = self.batch()
        stats = kl_penalty(sequences, base, 0.0)
        self.assertAlmostEqual(stats[KL_BASE], (0.5 - 1.0 + 0.3) / 3)
        # kl_coef 0: measured only, the advantages are as they were.
        self.assertEqual([s.advantages for s in sequences], [[0.0, 1.0, 1.0], [0.0, -1.0]])

    def test_each_token_loses_kl_coef_times_its_excess_over_the_batchs_mean(self):
        sequences, base = self.batch()
        mean = (0.5 - 1.0 + 0.3) / 3
        kl_penalty(sequences, base, 0.1)
        self.assertEqual(sequences[0].advantages[0], 0.0)  # a prompt target stays untrained
        for got, want in zip(
            [sequences[0].advantages[1], sequences[0].advantages[2], sequences[1].advantages[1]],
            [1.0 + 0.1 * (mean - 0.5), 1.0 + 0.1 * (mean + 1.0), -1.0 + 0.1 * (mean - 0.3)],
        ):
            self.assertAlmostEqual(got, want)
        # Centred as the cookbook's: the advantages' total is unchanged.
        self.assertAlmostEqual(sum(sum(s.advantages) for s in sequences), 1.0 + 1.0 - 1.0)

    def test_base_logprobs_are_floored_as_the_samplers_and_must_line_up(self):
        sequences = [sequence([-20.0])]
        self.assertAlmostEqual(kl_penalty(sequences, [[0.0, -1.0, -35.0]], 0.0)[KL_BASE], 0.0)
        with self.assertRaises(ValueError):
            kl_penalty([sequence([-1.0])], [[0.0, -1.0]], 0.1)
        self.assertEqual(kl_penalty([], [], 0.1), {})


class SettingsTests(unittest.TestCase):
    def test_kl_coef_and_log_kl_base_are_read_and_checked(self):
        c = parse_config(doc())
        self.assertEqual((c.kl_coef, c.log_kl_base, c.measures_kl_base()), (0.0, False, False))
        self.assertTrue(parse_config(doc(tinker={"kl_coef": 0.05})).measures_kl_base())
        logged = parse_config(doc(tinker={"log_kl_base": "yes"}))
        self.assertTrue(logged.log_kl_base and logged.measures_kl_base())
        self.assertEqual(logged.summary()["log_kl_base"], True)
        for bad in ({"kl_coef": -0.1}, {"kl_coef": "lots"}, {"log_kl_base": "maybe"}):
            with self.subTest(bad=bad), self.assertRaises(ConfigError) as ctx:
                parse_config(doc(tinker=bad))
            self.assertEqual(ctx.exception.key, f"tinker.{next(iter(bad))}")


if __name__ == "__main__":
    unittest.main()
