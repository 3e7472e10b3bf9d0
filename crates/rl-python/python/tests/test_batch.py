import math
import unittest

from rl_trainer.batch import (
    SKIP_EMPTY,
    SKIP_MALFORMED,
    SKIP_ZERO_ADVANTAGE,
    advantage_stats,
    align,
    aligned_sequences,
    batch_counts,
    full_logprobs_from_prompt_logprobs,
    group_advantages,
    prepare_batch,
    summary,
    training_logprobs,
)

P = -100


def group(scores, prompt=(5, 6, 7), completions=None, logprobs=True, overrides=None):
    """A ManagedServer-shaped group: prompt tokens masked -100 with logprob 1.0."""
    completions = completions or [[10 + i, 20 + i] for i in range(len(scores))]
    g = {
        "tokens": [list(prompt) + c for c in completions],
        "masks": [[P] * len(prompt) + c for c in completions],
        "scores": list(scores),
    }
    if logprobs:
        g["inference_logprobs"] = [[1.0] * len(prompt) + [-0.5 - 0.1 * j for j in range(len(c))] for c in completions]
    if overrides is not None:
        g["overrides"] = overrides
    return g


class AdvantageTests(unittest.TestCase):
    def test_centred_and_never_amplified(self):
        self.assertEqual(group_advantages([0.0, 1.0]), [-0.5, 0.5])  # std 0.5 -> divided by 1
        self.assertEqual(group_advantages([0.0, 4.0]), [-1.0, 1.0])  # std 2 -> divided by 2
        adv = group_advantages([1.0, 2.0, 3.0, 10.0])
        self.assertAlmostEqual(sum(adv), 0.0)
        std = math.sqrt(sum((x - 4.0) ** 2 for x in [1, 2, 3, 10]) / 4)
        self.assertAlmostEqual(adv[3], 6.0 / std)

    def test_overrides_zero_an_advantage(self):
        adv = group_advantages([0.0, 1.0, 1.0], [{}, {"set_advantage_to_zero": True}, None])
        self.assertEqual(adv[1], 0.0)
        self.assertNotEqual(adv[2], 0.0)

    def test_zero_variance_groups_are_skipped_and_counted(self):
        prepared = prepare_batch([group([1.0, 1.0, 1.0]), group([0.0, 1.0])], max_len=64)
        self.assertEqual(prepared.groups[0].skip, SKIP_ZERO_ADVANTAGE)
        self.assertIsNone(prepared.groups[1].skip)
        counts = batch_counts(prepared, datums=2)
        self.assertEqual(counts["batch/groups"], 2)
        self.assertEqual(counts["batch/skipped_groups"], 1)
        self.assertEqual(counts["batch/zero_advantage_groups"], 1)
        self.assertEqual(counts["batch/completions"], 5)
        # reward/mean: mean of group means, the skipped group included
        self.assertAlmostEqual(prepared.reward_mean(), (1.0 + 0.5) / 2)

    def test_overrides_can_make_a_group_all_zero(self):
        prepared = prepare_batch([group([0.0, 1.0], overrides=[{"set_advantage_to_zero": True}] * 2)], 64)
        self.assertEqual(prepared.groups[0].skip, SKIP_ZERO_ADVANTAGE)

    def test_empty_and_malformed_groups_are_skipped_and_counted(self):
        empty = {"tokens": [], "masks": [], "scores": []}
        prompt_only = {"tokens": [[1, 2, 3], [1, 2]], "masks": [[P, P, P], [P, P]], "scores": [0.0, 1.0]}
        ragged = {"tokens": [[1, 2]], "masks": [[P, 2], [P]], "scores": [1.0]}
        prepared = prepare_batch([empty, prompt_only, ragged, "nonsense", group([0.0, 1.0])], 64)
        self.assertEqual([g.skip for g in prepared.groups], [SKIP_EMPTY, SKIP_EMPTY, SKIP_MALFORMED, SKIP_MALFORMED, None])
        counts = batch_counts(prepared, datums=2)
        self.assertEqual(counts["batch/skipped_groups"], 4)
        self.assertEqual(counts["batch/empty_groups"], 2)
        self.assertEqual(counts["batch/malformed_groups"], 2)
        self.assertEqual(len(aligned_sequences(prepared)), 2)

    def test_a_nan_or_infinite_score_never_reaches_the_optimizer(self):
        prepared = prepare_batch([group([0.0, math.nan]), group([math.inf, 1.0]), group([0.0, 1.0])], 64)
        self.assertEqual([g.skip for g in prepared.groups], [SKIP_MALFORMED, SKIP_MALFORMED, None])
        for seq in aligned_sequences(prepared):
            self.assertTrue(all(math.isfinite(a) for a in seq.advantages))

    def test_advantage_stats_only_with_spread(self):
        self.assertEqual(advantage_stats(prepare_batch([group([1.0, 1.0])], 64)), {})
        stats = advantage_stats(prepare_batch([group([0.0, 1.0]), group([2.0, 2.0])], 64))
        self.assertEqual(set(stats), {"advantages/mean", "advantages/std", "advantages/sum"})
        self.assertAlmostEqual(stats["advantages/std"], 0.5)


class AlignmentTests(unittest.TestCase):
    def test_targets_logprobs_and_advantages_line_up(self):
        prepared = prepare_batch([group([0.0, 1.0], prompt=(5, 6, 7), completions=[[10, 11], [20, 21]])], 64)
        seq = align(prepared.groups[0].sequences[1])
        self.assertEqual(seq.input_tokens, [5, 6, 7, 20])
        self.assertEqual(seq.target_tokens, [6, 7, 20, 21])
        # targets 6, 7 are prompt (mask -100): logprob and advantage 0.0; 20, 21 are trained
        self.assertEqual(seq.trained, [False, False, True, True])
        self.assertEqual(seq.logprobs, [0.0, 0.0, -0.5, -0.6])
        self.assertEqual(seq.advantages, [0.0, 0.0, 0.5, 0.5])
        self.assertEqual(seq.sampler_logprobs(), [-0.5, -0.6])

    def test_logprobs_are_clipped(self):
        g = group([0.0, 1.0], prompt=(1,), completions=[[2, 3], [4, 5]])
        g["inference_logprobs"] = [[1.0, -50.0, -0.0], [1.0, -1.0, -2.0]]
        seq = align(prepare_batch([g], 64).groups[0].sequences[0])
        self.assertEqual(seq.logprobs, [-20.0, 0.0])

    def test_missing_or_sentinel_logprobs_need_recomputing(self):
        no_logprobs = group([0.0, 1.0], logprobs=False)
        sentinel = group([0.0, 1.0])
        sentinel["inference_logprobs"][0][-1] = 1.0  # a completion position padded by ManagedServer
        short = group([0.0, 1.0])
        short["inference_logprobs"][1] = short["inference_logprobs"][1][:-1]
        zero = group([1.0, 1.0], logprobs=False)  # skipped: never recomputed
        prepared = prepare_batch([no_logprobs, sentinel, short, zero], 64)
        missing = prepared.sequences_missing_logprobs()
        self.assertEqual([(s.group, s.index) for s in missing], [(0, 0), (0, 1), (1, 0), (2, 1)])
        with self.assertRaises(ValueError):
            align(missing[0])

    def test_truncation_to_the_trainer_limit(self):
        g = group([0.0, 1.0], prompt=(1, 2), completions=[[3, 4, 5, 6], [7]])
        prepared = prepare_batch([g], max_len=4)
        first, second = prepared.groups[0].sequences
        self.assertTrue(first.truncated)
        self.assertFalse(second.truncated)
        self.assertEqual(first.tokens, [1, 2, 3, 4])
        self.assertEqual(len(first.logprobs), 4)
        self.assertEqual(batch_counts(prepared, 2)["batch/truncated_completions"], 1)
        self.assertEqual(align(first).target_tokens, [2, 3, 4])
        # cut inside the prompt: nothing left to learn from, the group is empty
        prepared = prepare_batch([group([0.0, 1.0], prompt=(1, 2, 3, 4, 5))], max_len=4)
        self.assertEqual(prepared.groups[0].skip, SKIP_EMPTY)

    def test_compute_logprobs_answers_in_both_shapes(self):
        self.assertEqual(full_logprobs_from_prompt_logprobs([None, -1.0, -2.0], 3), [0.0, -1.0, -2.0])
        self.assertEqual(full_logprobs_from_prompt_logprobs([-1.0, -2.0], 3), [0.0, -1.0, -2.0])
        with self.assertRaises(ValueError):
            full_logprobs_from_prompt_logprobs([-1.0], 3)

    def test_training_logprobs_and_summary(self):
        prepared = prepare_batch([group([0.0, 1.0], prompt=(1, 2), completions=[[3, 4], [5, 6]])], 64)
        seqs = aligned_sequences(prepared)
        outputs = [[-9.0, -1.0, -2.0], [-9.0, -3.0, -4.0]]  # the prompt target (-9) is left out
        values = training_logprobs(seqs, outputs)
        self.assertEqual(values, [-1.0, -2.0, -3.0, -4.0])
        stats = summary(values, "_training")
        self.assertEqual(stats["logprobs/mean_training"], -2.5)
        self.assertEqual(stats["logprobs/min_training"], -4.0)
        self.assertEqual(stats["logprobs/p50_training"], -2.5)
        self.assertEqual(summary([]), {})


if __name__ == "__main__":
    unittest.main()
