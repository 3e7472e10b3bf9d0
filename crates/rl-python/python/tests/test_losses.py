"""rl's loss adapter (issue 43) on fixed numbers: the importance_sampling advantages it sends
carry each asked loss's gradient (r * A' = -dL/dlp per token), its loss values, its defaults,
and the calls it makes."""

import asyncio
import math
import unittest
from types import SimpleNamespace

from rl_trainer.config import CONTRACT
from rl_trainer.divergence import clip_bounds
from rl_trainer.engine import train_step
from rl_trainer.losses import (
    DROPPED_TOKENS,
    LOG_RATIO_FLOOR,
    LOSS_FROM_ADAPTER,
    SURROGATE_LOSS,
    Adapter,
    LocalDefaults,
    linearise,
    local_adapter,
    token_terms,
)

from .test_divergence import sequence

DEFAULTS = LocalDefaults.of(CONTRACT["constants"])


def coefficients(adapter, q, a, log_ratios):
    """r * A' per trained token, for trainer logprobs q + log_ratio: the coefficient the
    engine's importance_sampling puts on dlp, which must be -dL/dlp of the asked loss."""
    seq = sequence([q] * len(a), a)
    lps = [-3.0] + [q + d for d in log_ratios]
    out = linearise(adapter, [seq], [lps])
    assert out.advantages[0][0] == 0.0, "a prompt target is sent no advantage"
    return [math.exp(d) * sent for d, sent in zip(log_ratios, out.advantages[0][1:])], out


class CoefficientTests(unittest.TestCase):
    def assertAllClose(self, got, want):
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertAlmostEqual(g, w, places=9, msg=f"{got} != {want}")

    def test_ppo_passes_r_times_a_unless_its_clip_binds(self):
        ppo = Adapter("ppo", bounds=(0.8, 1.2))
        # r = 1.5 (above), 1.1 (inside), 0.6 (below); A = +2 then -2.
        d = [math.log(1.5), math.log(1.1), math.log(0.6)]
        got, _ = coefficients(ppo, -1.0, [2.0, 2.0, 2.0], d)
        # A > 0: above the upper bound the clipped term is the minimum (no gradient); below the
        # lower one the unclipped term is (r * A < 0.8 * A), so it passes.
        self.assertAllClose(got, [0.0, 1.1 * 2.0, 0.6 * 2.0])
        got, _ = coefficients(ppo, -1.0, [-2.0, -2.0, -2.0], d)
        # A < 0: above the bound the unclipped term is the minimum (-3 < -2.4); below, the
        # clipped one (-1.6 < -1.2) binds.
        self.assertAllClose(got, [1.5 * -2.0, 1.1 * -2.0, 0.0])
        got, _ = coefficients(ppo, -1.0, [0.0], [0.3])
        self.assertAllClose(got, [0.0])

    def test_ppos_loss_is_the_clipped_surrogates(self):
        ppo = Adapter("ppo", bounds=(0.8, 1.2))
        for r, a in ((1.5, 2.0), (0.6, 2.0), (1.5, -2.0), (0.6, -2.0), (1.0, 1.0)):
            loss, _ = token_terms(ppo, math.log(r) - 1.0, -1.0, a)
            self.assertAlmostEqual(loss, -min(r * a, min(max(r, 0.8), 1.2) * a))

    def test_cispo_passes_the_clipped_ratio_times_a_on_every_token(self):
        cispo = Adapter("cispo", bounds=(0.5, 1.5))
        d = [math.log(3.0), math.log(1.1), math.log(0.2)]
        got, out = coefficients(cispo, -2.0, [1.0, -1.0, 1.0], d)
        self.assertAllClose(got, [1.5, -1.1, 0.5])
        # The loss: -sg(clip(r)) * lp * A per token.
        lps = [-2.0 + x for x in d]
        want = -(1.5 * lps[0] * 1.0 + 1.1 * lps[1] * -1.0 + 0.5 * lps[2] * 1.0)
        self.assertAlmostEqual(out.loss, want)

    def test_cispo_without_a_lower_bound_is_importance_sampling(self):
        cispo = Adapter("cispo", bounds=(0.0, 1e6))
        seq = sequence([-1.0, -2.0], [0.7, -0.4])
        out = linearise(cispo, [seq], [[-5.0, -1.3, -1.9]])
        # A' = A: exactly the advantages importance_sampling would have been sent.
        self.assertAllClose(out.advantages[0], [0.0, 0.7, -0.4])

    def test_dro_adds_its_quadratic_term(self):
        dro = Adapter("dro", beta=0.1)
        d = [0.5, 0.0, -0.5]
        got, out = coefficients(dro, -1.0, [1.0, 1.0, -1.0], d)
        # -dL/dlp = A - beta * (lp - q).
        self.assertAllClose(got, [1.0 - 0.05, 1.0, -1.0 + 0.05])
        lps = [-1.0 + x for x in d]
        want = -sum(lp * a - 0.05 * x * x for lp, a, x in zip(lps, [1.0, 1.0, -1.0], d))
        self.assertAlmostEqual(out.loss, want)

    def test_a_prompt_position_gets_nothing_not_even_dros_quadratic_term(self):
        dro = Adapter("dro", beta=1.0)
        seq = sequence([-1.0], [0.0], prompt=2)
        out = linearise(dro, [seq], [[-4.0, -6.0, -1.0]])
        self.assertEqual(out.advantages[0], [0.0, 0.0, 0.0])
        self.assertEqual(out.loss, 0.0)
        self.assertEqual(out.metrics(), {LOSS_FROM_ADAPTER: 1})

    def test_a_ratio_too_small_to_carry_is_dropped_and_counted(self):
        cispo = Adapter("cispo", bounds=(0.5, 2.0))
        seq = sequence([-1.0, -1.0], [1.0, 1.0])
        out = linearise(cispo, [seq], [[0.0, -1.0 + LOG_RATIO_FLOOR - 1.0, -1.0]])
        self.assertEqual(out.advantages[0][1], 0.0)
        self.assertAlmostEqual(out.advantages[0][2], 1.0)  # r = 1, inside: A' = A
        self.assertEqual(out.dropped, 1)
        self.assertEqual(out.metrics()[DROPPED_TOKENS], 1)

    def test_answers_that_do_not_fit_the_sequences_are_refused(self):
        seq = sequence([-1.0], [1.0])
        with self.assertRaises(ValueError):
            linearise(Adapter("dro", beta=0.1), [seq], [])
        with self.assertRaises(ValueError):
            linearise(Adapter("dro", beta=0.1), [seq], [[-1.0]])


class DefaultsTests(unittest.TestCase):
    def adapter(self, loss, low=None, high=None, beta=None):
        bounds, _ = clip_bounds(loss, low, high, True, DEFAULTS.clips)
        return local_adapter(loss, low, high, beta, bounds, DEFAULTS)

    def test_the_contract_gives_the_local_defaults(self):
        self.assertEqual(DEFAULTS, LocalDefaults(ppo_clip=(0.8, 1.2), cispo_clip=(0.0, 4.0), dro_beta=0.05))

    def test_what_skyrl_tx_computes_itself_needs_no_adapter(self):
        self.assertIsNone(self.adapter("importance_sampling"))
        self.assertIsNone(self.adapter("ppo"))

    def test_a_bound_the_run_sets_is_applied_the_other_defaults(self):
        self.assertEqual(self.adapter("ppo", high=1.28), Adapter("ppo", bounds=(0.8, 1.28)))
        self.assertEqual(self.adapter("ppo", 0.8, 1.2), Adapter("ppo", bounds=(0.8, 1.2)))
        self.assertEqual(self.adapter("cispo"), Adapter("cispo", bounds=(0.0, 4.0)))
        self.assertEqual(self.adapter("cispo", low=0.5), Adapter("cispo", bounds=(0.5, 4.0)))
        self.assertEqual(self.adapter("dro"), Adapter("dro", beta=0.05))
        self.assertEqual(self.adapter("dro", beta=0.3), Adapter("dro", beta=0.3))

    def test_the_start_says_what_the_adapter_applies(self):
        said = self.adapter("cispo").describe()
        self.assertIn("loss cispo (clip 0..4)", said)
        self.assertIn("one extra forward pass per step", said)
        self.assertIn("beta 0.05", self.adapter("dro").describe())


class FakeTraining:
    """The SDK's training client: records each call, answers logprobs `lp` per target."""

    def __init__(self, lp):
        self.lp = lp
        self.calls = []

    def forward(self, datums, loss_fn, loss_fn_config=None):
        self.calls.append(("forward", loss_fn, loss_fn_config, [list(d.loss_fn_inputs["advantages"].tolist()) for d in datums]))
        outputs = [{"logprobs": {"data": [self.lp] * len(d.model_input.to_ints())}} for d in datums]
        return asyncio.sleep(0, result=SimpleNamespace(loss_fn_outputs=outputs, metrics={}))

    def forward_backward(self, datums, loss_fn, loss_fn_config=None):
        self.calls.append(("forward_backward", loss_fn, loss_fn_config, [list(d.loss_fn_inputs["advantages"].tolist()) for d in datums]))
        return asyncio.sleep(0, result=SimpleNamespace(loss_fn_outputs=[], metrics={}))

    def optim_step(self, adam):
        self.calls.append(("optim_step", adam.learning_rate))
        return asyncio.sleep(0, result=SimpleNamespace(metrics=None))


class TrainStepTests(unittest.TestCase):
    def test_the_adapter_sends_a_forward_pass_then_importance_sampling_with_its_advantages(self):
        training = FakeTraining(lp=-1.0)
        seq = sequence([-1.0, -1.0], [2.0, -2.0])
        adapter = Adapter("dro", beta=0.5)
        _, _, secs, adapted = asyncio.run(train_step(training, [seq], 0.01, "dro", {"beta": 0.5}, adapter, 5.0))
        kinds = [call[0] for call in training.calls]
        self.assertEqual(kinds, ["forward", "forward_backward", "optim_step"])
        self.assertEqual(training.calls[0][1:3], (SURROGATE_LOSS, None))
        # At lp = q: r = 1 and A' = A; the loss_fn_config is the service's, not sent here.
        self.assertEqual(training.calls[1][1:], (SURROGATE_LOSS, None, [[0.0, 2.0, -2.0]]))
        self.assertEqual(adapted.logprobs, [[-1.0, -1.0, -1.0]])
        self.assertAlmostEqual(adapted.loss, -(-1.0 * 2.0 + -1.0 * -2.0))
        self.assertEqual(set(secs), {"forward_backward", "optim"})

    def test_without_the_adapter_the_run_s_loss_and_config_go_as_they_are(self):
        training = FakeTraining(lp=-1.0)
        seq = sequence([-1.0], [1.0])
        _, _, _, adapted = asyncio.run(train_step(training, [seq], 0.01, "cispo", {"clip_high_threshold": 4.0}, None, 5.0))
        self.assertIsNone(adapted)
        self.assertEqual([c[:3] for c in training.calls[:1]], [("forward_backward", "cispo", {"clip_high_threshold": 4.0})])
        self.assertEqual(len(training.calls), 2)


if __name__ == "__main__":
    unittest.main()
