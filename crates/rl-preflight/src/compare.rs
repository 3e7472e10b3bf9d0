//! "Is the trained model better than the base?" from the scores both got on the same prompts:
//! each model's mean score, percent correct, pass@1, pass@n and best-of-n with 95% confidence
//! intervals, the difference of one measure (the mean score unless asked) with its own, and a
//! verdict that is directional only when that interval excludes zero.
//!
//! The unit is the prompt, not the completion: the completions of one group answer the same
//! prompt and rise and fall together, so treating them as independent would make every
//! interval too narrow. Each model's figure is the mean of its per-prompt values, its interval
//! Student's t over those; the difference is Welch's (unequal variances). `n` is one number for
//! both models (the fewest completions any prompt of either got), so that their pass@n and
//! best-of-n are measured alike.

use crate::measures::{Measure, best_of, pass_at};

/// Below this many prompts per model, no direction is claimed, whatever the numbers.
pub const MIN_PROMPTS: usize = 2;

/// A value and its 95% confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

/// One model's figures on the compared prompts.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelEstimate {
    pub prompts: usize,
    pub completions: usize,
    pub mean_score: Estimate,
    /// Percent of completions scoring at least the test's threshold of "correct".
    pub percent_correct: Estimate,
    /// The `n` of pass@n and best-of-n: the fewest completions a prompt got (the group size
    /// when none was lost).
    pub n: usize,
    /// The chance that a completion is correct (0 to 1).
    pub pass_at_1: Estimate,
    /// The chance that at least one of `n` completions is correct (0 to 1).
    pub pass_at_n: Estimate,
    /// The expected best score of `n` completions.
    pub best_of_n: Estimate,
}

impl ModelEstimate {
    /// The figure of `measure`.
    pub fn of(&self, measure: Measure) -> Estimate {
        match measure {
            Measure::MeanScore => self.mean_score,
            Measure::PassAt1 => self.pass_at_1,
            Measure::PassAtN => self.pass_at_n,
            Measure::BestOfN => self.best_of_n,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Better,
    NoDetectableDifference,
    Worse,
}

impl Direction {
    pub fn label(self) -> &'static str {
        match self {
            Direction::Better => "better",
            Direction::NoDetectableDifference => "no detectable difference",
            Direction::Worse => "worse",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub base: ModelEstimate,
    pub trained: ModelEstimate,
    /// What the verdict rests on.
    pub measure: Measure,
    /// Trained minus base, in `measure`.
    pub difference: Estimate,
    pub verdict: Direction,
    /// The verdict in a sentence, with the measure and the samples it rests on.
    pub explanation: String,
}

/// Compares `trained`'s groups of scores with `base`'s on `measure`; a completion is correct
/// from `correct_from` on. `None` when either model has no scored completion.
pub fn compare(
    base: &[Vec<f64>],
    trained: &[Vec<f64>],
    correct_from: f64,
    measure: Measure,
) -> Option<Comparison> {
    let n = fewest(base).min(fewest(trained));
    let (base_values, base_figures) = estimate(base, correct_from, n)?;
    let (trained_values, trained_figures) = estimate(trained, correct_from, n)?;
    let (base_values, trained_values) = (base_values.of(measure), trained_values.of(measure));
    let difference = welch(trained_values, base_values);
    let enough = base_values.len() >= MIN_PROMPTS && trained_values.len() >= MIN_PROMPTS;
    let verdict = if !enough {
        Direction::NoDetectableDifference
    } else if difference.low > 0.0 {
        Direction::Better
    } else if difference.high < 0.0 {
        Direction::Worse
    } else {
        Direction::NoDetectableDifference
    };
    let basis = format!(
        "{} prompts ({} completions) for the base model, {} ({}) for the trained one",
        base_figures.prompts,
        base_figures.completions,
        trained_figures.prompts,
        trained_figures.completions
    );
    let change = format!(
        "{} {:+.4} (95% CI {:+.4} to {:+.4})",
        measure.label(n),
        difference.value,
        difference.low,
        difference.high
    );
    let explanation = match verdict {
        _ if !enough => format!(
            "{change}; too few prompts to tell a difference (at least {MIN_PROMPTS} per model): {basis}"
        ),
        Direction::Better => format!("better: {change}, on {basis}"),
        Direction::Worse => format!("worse: {change}, on {basis}"),
        Direction::NoDetectableDifference => format!(
            "no detectable difference: {change} includes 0, on {basis}; more prompts narrow it"
        ),
    };
    Some(Comparison {
        base: base_figures,
        trained: trained_figures,
        measure,
        difference,
        verdict,
        explanation,
    })
}

/// One model's figures on its groups of scores, as a comparison reports each side: what an
/// evaluation during training logs. `None` when no completion was scored.
pub fn evaluate(groups: &[Vec<f64>], correct_from: f64) -> Option<ModelEstimate> {
    estimate(groups, correct_from, fewest(groups)).map(|(_, figures)| figures)
}

/// The fewest completions a prompt got, empty groups left out (0 when none has any).
fn fewest(groups: &[Vec<f64>]) -> usize {
    groups
        .iter()
        .map(Vec::len)
        .filter(|len| *len > 0)
        .min()
        .unwrap_or(0)
}

/// Each measure's per-prompt values, in the order of the prompts.
struct PerPrompt {
    mean: Vec<f64>,
    pass_at_1: Vec<f64>,
    pass_at_n: Vec<f64>,
    best_of_n: Vec<f64>,
}

impl PerPrompt {
    fn of(&self, measure: Measure) -> &[f64] {
        match measure {
            Measure::MeanScore => &self.mean,
            Measure::PassAt1 => &self.pass_at_1,
            Measure::PassAtN => &self.pass_at_n,
            Measure::BestOfN => &self.best_of_n,
        }
    }
}

/// Per-prompt values, and the model's figures, with pass@n and best-of-n at `n`. Empty groups
/// are left out.
fn estimate(
    groups: &[Vec<f64>],
    correct_from: f64,
    n: usize,
) -> Option<(PerPrompt, ModelEstimate)> {
    let groups: Vec<&Vec<f64>> = groups.iter().filter(|group| !group.is_empty()).collect();
    if groups.is_empty() {
        return None;
    }
    let n = n.max(1);
    let mut values = PerPrompt {
        mean: Vec::new(),
        pass_at_1: Vec::new(),
        pass_at_n: Vec::new(),
        best_of_n: Vec::new(),
    };
    for group in &groups {
        let hits = group.iter().filter(|score| **score >= correct_from).count();
        values.mean.push(mean(group));
        values
            .pass_at_1
            .push(pass_at(group.len(), hits, 1).unwrap_or(0.0));
        values
            .pass_at_n
            .push(pass_at(group.len(), hits, n).unwrap_or(0.0));
        values.best_of_n.push(best_of(group, n).unwrap_or(f64::NAN));
    }
    let percents: Vec<f64> = values.pass_at_1.iter().map(|share| 100.0 * share).collect();
    let figures = ModelEstimate {
        prompts: groups.len(),
        completions: groups.iter().map(|group| group.len()).sum(),
        mean_score: interval(&values.mean),
        percent_correct: within(interval(&percents), 100.0),
        n,
        pass_at_1: within(interval(&values.pass_at_1), 1.0),
        pass_at_n: within(interval(&values.pass_at_n), 1.0),
        best_of_n: interval(&values.best_of_n),
    };
    Some((values, figures))
}

/// `estimate`'s interval cut to what a share can be: 0 to `top`.
fn within(estimate: Estimate, top: f64) -> Estimate {
    Estimate {
        low: estimate.low.max(0.0),
        high: estimate.high.min(top),
        ..estimate
    }
}

/// The mean of `values` with Student's t interval (infinite for a single value).
fn interval(values: &[f64]) -> Estimate {
    let value = mean(values);
    let n = values.len();
    if n < 2 {
        return Estimate {
            value,
            low: f64::NEG_INFINITY,
            high: f64::INFINITY,
        };
    }
    let half = t_critical(count(n - 1)) * (variance(values) / count(n)).sqrt();
    Estimate {
        value,
        low: value - half,
        high: value + half,
    }
}

/// `a`'s mean minus `b`'s, with Welch's interval.
fn welch(a: &[f64], b: &[f64]) -> Estimate {
    let value = mean(a) - mean(b);
    if a.len() < 2 || b.len() < 2 {
        return Estimate {
            value,
            low: f64::NEG_INFINITY,
            high: f64::INFINITY,
        };
    }
    let (va, vb) = (variance(a) / count(a.len()), variance(b) / count(b.len()));
    let se = (va + vb).sqrt();
    if se == 0.0 {
        // Every prompt scored alike within each model: the difference is exact.
        return Estimate {
            value,
            low: value,
            high: value,
        };
    }
    let df =
        (va + vb).powi(2) / (va.powi(2) / count(a.len() - 1) + vb.powi(2) / count(b.len() - 1));
    let half = t_critical(df) * se;
    Estimate {
        value,
        low: value - half,
        high: value + half,
    }
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / count(values.len())
}

/// The sample variance (n - 1).
fn variance(values: &[f64]) -> f64 {
    let m = mean(values);
    values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / count(values.len() - 1)
}

fn count(n: usize) -> f64 {
    n as f64
}

/// Student's t two-sided 95% critical value for `df` degrees of freedom, rounded down to the
/// table's next entry (a wider, never narrower, interval).
fn t_critical(df: f64) -> f64 {
    const TABLE: [(f64, f64); 34] = [
        (1.0, 12.706),
        (2.0, 4.303),
        (3.0, 3.182),
        (4.0, 2.776),
        (5.0, 2.571),
        (6.0, 2.447),
        (7.0, 2.365),
        (8.0, 2.306),
        (9.0, 2.262),
        (10.0, 2.228),
        (11.0, 2.201),
        (12.0, 2.179),
        (13.0, 2.160),
        (14.0, 2.145),
        (15.0, 2.131),
        (16.0, 2.120),
        (17.0, 2.110),
        (18.0, 2.101),
        (19.0, 2.093),
        (20.0, 2.086),
        (21.0, 2.080),
        (22.0, 2.074),
        (23.0, 2.069),
        (24.0, 2.064),
        (25.0, 2.060),
        (26.0, 2.056),
        (27.0, 2.052),
        (28.0, 2.048),
        (29.0, 2.045),
        (30.0, 2.042),
        (40.0, 2.021),
        (60.0, 2.000),
        (120.0, 1.980),
        (f64::INFINITY, 1.960),
    ];
    TABLE
        .iter()
        .rev()
        .find(|(at_least, _)| df >= *at_least)
        .map_or(TABLE[0].1, |(_, critical)| *critical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(rows: &[&[f64]]) -> Vec<Vec<f64>> {
        rows.iter().map(|row| row.to_vec()).collect()
    }

    #[test]
    fn a_clear_gain_is_better_and_says_what_it_rests_on() {
        let base = groups(&[
            &[-1.0, -1.0, 0.0, -1.0],
            &[-1.0, 0.0, -1.0, -1.0],
            &[-1.0; 4],
            &[0.0, -1.0, -1.0, -1.0],
        ]);
        let trained = groups(&[
            &[1.0, 1.0, 0.0, 1.0],
            &[1.0; 4],
            &[1.0, 0.0, 1.0, 1.0],
            &[1.0; 4],
        ]);
        let comparison = compare(&base, &trained, 1.0, Measure::MeanScore).unwrap();
        assert_eq!(comparison.verdict, Direction::Better, "{comparison:?}");
        assert!(comparison.difference.low > 0.0);
        assert_eq!(
            (comparison.base.prompts, comparison.base.completions),
            (4, 16)
        );
        assert!((comparison.trained.percent_correct.value - 87.5).abs() < 1e-9);
        assert_eq!(comparison.base.percent_correct.value, 0.0);
        assert!(
            comparison
                .explanation
                .starts_with("better: mean score +1.6875"),
            "{}",
            comparison.explanation
        );
        assert!(
            comparison
                .explanation
                .contains("4 prompts (16 completions) for the base model")
        );
    }

    #[test]
    fn a_clear_loss_is_worse() {
        let good = groups(&[&[1.0, 0.8], &[0.9, 1.0], &[1.0, 1.0]]);
        let bad = groups(&[&[0.1, 0.0], &[0.2, 0.1], &[0.0, 0.0]]);
        assert_eq!(
            compare(&good, &bad, 1.0, Measure::MeanScore)
                .unwrap()
                .verdict,
            Direction::Worse
        );
    }

    #[test]
    fn overlapping_scores_are_no_detectable_difference() {
        let base = groups(&[&[1.0, -1.0], &[-1.0, -1.0], &[1.0, 1.0], &[-1.0, 1.0]]);
        let trained = groups(&[&[1.0, 1.0], &[-1.0, -1.0], &[1.0, -1.0], &[-1.0, 1.0]]);
        let comparison = compare(&base, &trained, 1.0, Measure::MeanScore).unwrap();
        assert_eq!(comparison.verdict, Direction::NoDetectableDifference);
        assert!(comparison.difference.low < 0.0 && comparison.difference.high > 0.0);
        assert!(comparison.explanation.contains("includes 0"));
    }

    #[test]
    fn one_prompt_claims_nothing_however_large_the_gap() {
        let comparison = compare(
            &groups(&[&[-1.0; 8]]),
            &groups(&[&[1.0; 8]]),
            1.0,
            Measure::MeanScore,
        )
        .unwrap();
        assert_eq!(comparison.verdict, Direction::NoDetectableDifference);
        assert!(
            comparison.explanation.contains("too few prompts"),
            "{}",
            comparison.explanation
        );
        assert!(comparison.base.mean_score.low.is_infinite());
    }

    #[test]
    fn identical_constant_scores_are_no_difference_and_constant_gaps_are_exact() {
        let same = groups(&[&[0.5, 0.5], &[0.5, 0.5]]);
        let comparison = compare(&same, &same, 1.0, Measure::MeanScore).unwrap();
        assert_eq!(comparison.verdict, Direction::NoDetectableDifference);
        assert_eq!(
            comparison.difference,
            Estimate {
                value: 0.0,
                low: 0.0,
                high: 0.0
            }
        );
        let higher = groups(&[&[0.75, 0.75], &[0.75, 0.75]]);
        assert_eq!(
            compare(&same, &higher, 1.0, Measure::MeanScore)
                .unwrap()
                .verdict,
            Direction::Better
        );
    }

    #[test]
    fn no_scores_is_no_comparison_and_empty_groups_are_left_out() {
        assert!(compare(&[], &groups(&[&[1.0]]), 1.0, Measure::MeanScore).is_none());
        assert!(compare(&groups(&[&[]]), &groups(&[&[1.0]]), 1.0, Measure::MeanScore).is_none());
        let with_empty = groups(&[&[1.0, 0.0], &[], &[0.0, 1.0]]);
        assert_eq!(
            compare(&with_empty, &with_empty, 1.0, Measure::MeanScore)
                .unwrap()
                .base
                .prompts,
            2
        );
    }

    #[test]
    fn intervals_use_students_t_for_few_prompts() {
        // Means 0 and 1: mean 0.5, sd 0.7071, se 0.5, t(1) = 12.706.
        let estimate = interval(&[0.0, 1.0]);
        assert!(
            (estimate.high - (0.5 + 12.706 * 0.5)).abs() < 1e-9,
            "{estimate:?}"
        );
        assert_eq!(t_critical(0.5), 12.706);
        assert_eq!(t_critical(35.0), 2.042);
        assert_eq!(t_critical(1e9), 1.980);
        assert_eq!(t_critical(f64::INFINITY), 1.960);
    }

    #[test]
    fn an_evaluation_is_one_side_of_a_comparison() {
        let scores = groups(&[&[1.0, 0.0], &[1.0, 1.0], &[0.0, 0.5]]);
        let alone = evaluate(&scores, 1.0).unwrap();
        let compared = compare(&scores, &scores, 1.0, Measure::MeanScore).unwrap();
        assert_eq!(alone, compared.trained);
        assert_eq!(alone.prompts, 3);
        assert_eq!(alone.completions, 6);
        assert!((alone.mean_score.value - 0.583_333).abs() < 1e-6);
        assert!((alone.percent_correct.value - 50.0).abs() < 1e-9);
        assert_eq!(evaluate(&[], 1.0), None);
    }

    #[test]
    fn percent_correct_stays_within_0_and_100() {
        let comparison = compare(
            &groups(&[&[1.0, 1.0], &[1.0, 0.0]]),
            &groups(&[&[0.0], &[0.0]]),
            1.0,
            Measure::MeanScore,
        )
        .unwrap();
        assert!(comparison.base.percent_correct.high <= 100.0);
        assert!(comparison.trained.percent_correct.low >= 0.0);
    }

    #[test]
    fn pass_at_n_can_tell_what_the_mean_cannot_and_says_so() {
        // The trained model gets one completion of four right on every prompt; the base gets
        // all four right on one prompt in four and none elsewhere: the same mean, but the
        // trained model solves every prompt within four tries.
        let base = groups(&[&[1.0; 4], &[0.0; 4], &[0.0; 4], &[0.0; 4]]);
        let one_of_four: &[f64] = &[1.0, 0.0, 0.0, 0.0];
        let trained = groups(&[one_of_four; 4]);
        let by_mean = compare(&base, &trained, 1.0, Measure::MeanScore).unwrap();
        assert_eq!(by_mean.verdict, Direction::NoDetectableDifference);
        let by_pass = compare(&base, &trained, 1.0, Measure::PassAtN).unwrap();
        assert_eq!(by_pass.measure, Measure::PassAtN);
        assert_eq!(by_pass.trained.n, 4);
        assert!((by_pass.trained.pass_at_n.value - 1.0).abs() < 1e-12);
        assert!((by_pass.base.pass_at_n.value - 0.25).abs() < 1e-12);
        assert!((by_pass.trained.pass_at_1.value - 0.25).abs() < 1e-12);
        assert!((by_pass.trained.best_of_n.value - 1.0).abs() < 1e-12);
        assert!(
            by_pass.explanation.contains("pass@4 +0.7500"),
            "{}",
            by_pass.explanation
        );
        // The base's prompts scored alike within each of two kinds: a wide interval, still
        // clear of zero at four prompts? Not claimed here: only the measure and its numbers.
        assert_eq!(
            by_pass.trained.of(Measure::PassAt1),
            by_pass.trained.pass_at_1
        );
    }

    #[test]
    fn n_is_the_fewest_completions_of_either_model_and_shares_stay_within_0_and_1() {
        let base = groups(&[&[1.0, 0.0, 0.0], &[0.0, 0.0, 1.0]]);
        let trained = groups(&[&[1.0, 0.0], &[0.0, 1.0, 1.0, 0.0]]);
        let comparison = compare(&base, &trained, 1.0, Measure::BestOfN).unwrap();
        assert_eq!((comparison.base.n, comparison.trained.n), (2, 2));
        // Base: 1 correct of 3 at k = 2 on both prompts: 1 − C(2,2)/C(3,2) = 2/3.
        assert!((comparison.base.pass_at_n.value - 2.0 / 3.0).abs() < 1e-12);
        for figure in [comparison.base.pass_at_1, comparison.trained.pass_at_n] {
            assert!(figure.low >= 0.0 && figure.high <= 1.0, "{figure:?}");
        }
        // Alone, a model's n is its own fewest.
        assert_eq!(evaluate(&trained, 1.0).map(|e| e.n), Some(2));
        assert_eq!(evaluate(&base, 1.0).map(|e| e.n), Some(3));
    }
}
