"""Groups as rl_verifiers sends them: several sequences (branches) per rollout, named rewards
(`group_overrides = {"rollout_of": [...], "rewards": {name: [...]}}`)."""

import json
import os
import unittest

from rl_trainer.batch import (
    SKIP_MALFORMED,
    SKIP_ZERO_ADVANTAGE,
    aligned_sequences,
    group_advantages,
    named_reward_key,
    prepare_batch,
)
from rl_trainer.records import Wandb, rollout_rows

from tests import test_loop

P = -100


def branched(scores, rollout_of, rewards=None, prompt=(5, 6)):
    """One sequence per entry of `rollout_of`, with the score of its rollout (`scores` is per
    sequence, as run-api carries it)."""
    completions = [[10 + i, 20 + i] for i in range(len(rollout_of))]
    overrides = {"rollout_of": list(rollout_of)}
    if rewards is not None:
        overrides["rewards"] = rewards
    return {
        "tokens": [list(prompt) + c for c in completions],
        "masks": [[P] * len(prompt) + c for c in completions],
        "scores": list(scores),
        "inference_logprobs": [[1.0] * len(prompt) + [-0.5, -0.6] for _ in completions],
        "group_overrides": overrides,
    }


class RolloutAdvantageTests(unittest.TestCase):
    def test_a_rollout_of_three_branches_weighs_once(self):
        scores = [1.0, 1.0, 1.0, 0.0]
        # Per sequence the mean would be 0.75; per rollout (1.0 and 0.0) it is 0.5.
        self.assertEqual(group_advantages(scores), [0.25, 0.25, 0.25, -0.75])
        self.assertEqual(group_advantages(scores, rollout_of=[0, 0, 0, 1]), [0.5, 0.5, 0.5, -0.5])
        # std over rollouts 2 -> divided by 2, never amplified below 1
        self.assertEqual(group_advantages([4.0, 0.0, 0.0], rollout_of=[0, 1, 1]), [1.0, -1.0, -1.0])
        # set_advantage_to_zero still zeroes one sequence
        self.assertEqual(
            group_advantages(scores, [None, {"set_advantage_to_zero": True}], rollout_of=[0, 0, 0, 1]),
            [0.5, 0.0, 0.5, -0.5],
        )

    def test_a_prepared_group_trains_each_sequence_with_its_rollouts_advantage(self):
        prepared = prepare_batch([branched([1.0, 1.0, 1.0, 0.0], [0, 0, 0, 1])], 64)
        group = prepared.groups[0]
        self.assertIsNone(group.skip, group.problem)
        self.assertEqual([s.advantage for s in group.sequences], [0.5, 0.5, 0.5, -0.5])
        self.assertEqual([s.advantages[-1] for s in aligned_sequences(prepared)], [0.5, 0.5, 0.5, -0.5])
        self.assertEqual(group.mean, 0.5)  # over rollouts, as reward/mean
        self.assertEqual(prepared.reward_mean(), 0.5)

    def test_rollouts_alike_are_a_zero_advantage_group(self):
        prepared = prepare_batch([branched([1.0, 1.0, 1.0], [0, 0, 1])], 64)
        self.assertEqual(prepared.groups[0].skip, SKIP_ZERO_ADVANTAGE)

    def test_a_failed_rollout_without_sequences_may_leave_a_gap(self):
        rewards = {"correct": [1.0, None, 0.0]}
        prepared = prepare_batch([branched([1.0, 0.0], [0, 2], rewards)], 64)
        group = prepared.groups[0]
        self.assertIsNone(group.skip, group.problem)
        self.assertEqual([s.advantage for s in group.sequences], [0.5, -0.5])
        self.assertEqual(group.named, {"correct": 0.5})  # the null is not averaged

    def test_without_rollout_of_each_sequence_is_a_rollout(self):
        g = branched([0.0, 1.0], [0, 1], {"format": [1.0, 0.5]})
        del g["group_overrides"]["rollout_of"]
        group = prepare_batch([g], 64).groups[0]
        self.assertIsNone(group.skip, group.problem)
        self.assertEqual([s.advantage for s in group.sequences], [-0.5, 0.5])
        self.assertEqual(group.named, {"format": 0.75})
        # atroposlib's own group_overrides keys are not ours: left alone
        g = branched([0.0, 1.0], [0, 1])
        g["group_overrides"] = {"sft": True}
        self.assertIsNone(prepare_batch([g], 64).groups[0].skip)

    def test_overrides_that_do_not_fit_make_the_group_malformed_with_the_reason(self):
        cases = [
            ({"rollout_of": [0, 0]}, "2 entries for 3 completions"),
            ({"rollout_of": [0, "1", 1]}, "not a list of rollout indices"),
            ({"rollout_of": [0, True, 1]}, "not a list of rollout indices"),
            ({"rollout_of": [0, -1, 1]}, "not a list of rollout indices"),
            ({"rollout_of": [0, 0, 1], "rewards": [1.0]}, "not an object"),
            ({"rollout_of": [0, 0, 1], "rewards": {"r": [1.0]}}, "1 values for 2 rollouts"),
            ({"rollout_of": [0, 0, 1], "rewards": {"r": [1.0, "x"]}}, "not a list of numbers"),
            ({"rollout_of": [0, 0, 1], "rewards": {"r": [1.0, 0.0], "s": [1.0, 0.0, 1.0]}}, "differ in length"),
            ({"rewards": {"r": [1.0, 0.0]}}, "2 values for 3 rollouts"),
        ]
        for overrides, reason in cases:
            with self.subTest(overrides=overrides):
                g = branched([1.0, 1.0, 0.0], [0, 0, 1])
                g["group_overrides"] = overrides
                group = prepare_batch([g], 64).groups[0]
                self.assertEqual(group.skip, SKIP_MALFORMED)
                self.assertIn(reason, group.problem)
        # one rollout's branches must share its score
        group = prepare_batch([branched([1.0, 0.0, 0.0], [0, 0, 1])], 64).groups[0]
        self.assertEqual(group.skip, SKIP_MALFORMED)
        self.assertIn("rollout 0 carry different scores", group.problem)


class NamedRewardTests(unittest.TestCase):
    def test_each_name_is_its_mean_over_the_groups_that_carry_it(self):
        prepared = prepare_batch(
            [
                branched([1.0, 1.0, 0.0], [0, 0, 1], {"correct": [1.0, 0.0], "length": [0.2, 0.4]}),
                branched([1.0, 1.0], [0, 1], {"correct": [1.0, 1.0]}),  # skipped (alike), still logged
                branched([1.0, 0.0], [0, 0], {"correct": [1.0]}),  # malformed: not logged
            ],
            64,
        )
        self.assertEqual([g.skip for g in prepared.groups], [None, SKIP_ZERO_ADVANTAGE, SKIP_MALFORMED])
        means = prepared.named_reward_means()
        self.assertEqual(set(means), {"reward/correct", "reward/length"})
        self.assertAlmostEqual(means["reward/correct"], (0.5 + 1.0) / 2)
        self.assertAlmostEqual(means["reward/length"], 0.3)

    def test_a_reward_named_mean_does_not_take_rls_reward_mean(self):
        self.assertEqual(named_reward_key("correct"), "reward/correct")
        self.assertEqual(named_reward_key("mean"), "reward/mean_named")

    def test_rollout_rows_say_whose_branch_each_sequence_is(self):
        prepared = prepare_batch([branched([1.0, 1.0, 0.0], [0, 0, 1])], 64)
        rows = rollout_rows(prepared, lambda tokens: " ".join(map(str, tokens)))
        self.assertEqual([r["rollout"] for r in rows], [0, 0, 1])
        plain = prepare_batch([{"tokens": [[1, 2]], "masks": [[P, 2]], "scores": [1.0]}], 64)
        self.assertNotIn("rollout", rollout_rows(plain, str)[0])

    def test_rollout_rows_carry_each_branchs_conversation(self):
        turns = [
            [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "",
              "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 2}"}}]}],
            [{"role": "user", "content": "2+2?"}, {"role": "tool", "tool_call_id": "c1", "content": "4"},
             {"role": "assistant", "content": "4"}],
        ]
        group = dict(branched([1.0, 0.0], [0, 1]), messages=turns)
        rows = rollout_rows(prepare_batch([group], 64), str)
        self.assertEqual([r["messages"] for r in rows], turns)
        # Conversations that do not line up with the completions, or are no messages: none shown.
        for messages, shown in ((turns[:1], [None, None]), ("text", [None, None]), ([turns[0], "text"], [turns[0], None])):
            rows = rollout_rows(prepare_batch([dict(group, messages=messages)], 64), str)
            self.assertEqual([r.get("messages") for r in rows], shown, messages)


class FakeWandbRun:
    def __init__(self):
        self.logged = []

    def log(self, values, step):
        self.logged.append((step, values))


class StepMetricsTests(unittest.TestCase):
    """A step's row of metrics.jsonl and WandB get `reward/<name>` next to `reward/mean`
    (the trainer built as test_loop builds it, without running test_loop's tests again)."""

    setUp, tearDown = test_loop.LoopTests.setUp, test_loop.LoopTests.tearDown
    trainer, rows, run_steps = test_loop.LoopTests.trainer, test_loop.LoopTests.rows, test_loop.LoopTests.run_steps

    def test_a_steps_named_rewards_are_logged_with_its_reward_mean(self):
        batch = [
            branched([1.0, 1.0, 0.0], [0, 0, 1], {"correct": [1.0, 0.0], "num_turns": [2.0, 1.0]}),
            branched([0.0, 1.0], [0, 1], {"correct": [0.0, 1.0]}),
        ]
        trainer = self.trainer([batch], steps=1)
        run = FakeWandbRun()
        trainer.wandb = Wandb(run)
        self.run_steps(trainer, 1)
        row = self.rows("metrics.jsonl")[0]
        self.assertEqual(row["reward/mean"], 0.5)  # each group's mean over its 2 rollouts
        self.assertEqual(row["reward/correct"], 0.5)
        self.assertEqual(row["reward/num_turns"], 1.5)
        self.assertEqual(row["batch/datums"], 5)
        step, logged = run.logged[0]
        self.assertEqual((step, logged["reward/correct"], logged["reward/num_turns"]), (1, 0.5, 1.5))
        rollouts = os.path.join(self.run_dir, "rollouts", "step_000001.jsonl")
        with open(rollouts) as f:
            self.assertEqual([json.loads(line)["rollout"] for line in f], [0, 0, 1, 0, 1])


if __name__ == "__main__":
    unittest.main()
