//! What one prompt's group of scores says of a model, measure by measure: its mean score, the
//! chance that at least one of `k` completions is correct (pass@k), and the best score of `k`
//! (best-of-k). Each is the unbiased estimate from the `n ≥ k` completions sampled: the expected
//! value over every `k`-subset of them (Chen et al. 2021's pass@k; the same counting gives the
//! expected maximum), not the value of one arbitrary subset.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A per-prompt measure a comparison's verdict can rest on; by its name in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum Measure {
    /// The mean score of the prompt's completions.
    #[default]
    MeanScore,
    /// The chance that one completion is correct.
    PassAt1,
    /// The chance that at least one of `n` completions is correct (`n`: the group size).
    PassAtN,
    /// The expected best score of `n` completions.
    BestOfN,
}

impl Measure {
    pub const ALL: [Measure; 4] = [
        Measure::MeanScore,
        Measure::PassAt1,
        Measure::PassAtN,
        Measure::BestOfN,
    ];

    /// Every measure's name, in `ALL`'s order.
    pub fn names() -> Vec<&'static str> {
        Measure::ALL.iter().map(|measure| measure.name()).collect()
    }

    /// The name agents and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            Measure::MeanScore => "mean_score",
            Measure::PassAt1 => "pass@1",
            Measure::PassAtN => "pass@n",
            Measure::BestOfN => "best_of_n",
        }
    }

    /// How a sentence names it, with the group size for `n`.
    pub fn label(self, n: usize) -> String {
        match self {
            Measure::MeanScore => "mean score".to_owned(),
            Measure::PassAt1 => "pass@1".to_owned(),
            Measure::PassAtN => format!("pass@{n}"),
            Measure::BestOfN => format!("best-of-{n}"),
        }
    }

    /// Whether its values are chances (bounded by 0 and 1), not scores.
    pub fn is_chance(self) -> bool {
        matches!(self, Measure::PassAt1 | Measure::PassAtN)
    }
}

impl fmt::Display for Measure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Measure {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Measure::ALL
            .into_iter()
            .find(|measure| measure.name() == text)
            .ok_or_else(|| {
                format!(
                    "unknown measure {text:?}: one of {}",
                    Measure::names().join(", ")
                )
            })
    }
}

impl TryFrom<String> for Measure {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<Measure> for &'static str {
    fn from(measure: Measure) -> Self {
        measure.name()
    }
}

/// pass@k of a group with `correct` of its `n` completions correct: 1 − C(n−c, k) / C(n, k),
/// as the product 1 − Π_{i=n−c+1..n} (1 − k/i), which neither overflows nor loses precision.
/// `k` is clamped to `1..=n`; an empty group has none.
pub fn pass_at(n: usize, correct: usize, k: usize) -> Option<f64> {
    if n == 0 {
        return None;
    }
    let k = k.clamp(1, n);
    let correct = correct.min(n);
    if n - correct < k {
        return Some(1.0);
    }
    let missed: f64 = (n - correct + 1..=n)
        .map(|i| 1.0 - as_f64(k) / as_f64(i))
        .product();
    Some(1.0 - missed)
}

/// The expected best score of `k` completions drawn without replacement from the group: with
/// the scores sorted up, the i-th (from 1) is the best of a k-subset in C(i−1, k−1) of the
/// C(n, k) subsets. `k` is clamped to `1..=n`; an empty group has none.
pub fn best_of(scores: &[f64], k: usize) -> Option<f64> {
    let n = scores.len();
    if n == 0 {
        return None;
    }
    let k = k.clamp(1, n);
    let mut sorted = scores.to_vec();
    sorted.sort_by(f64::total_cmp);
    // The weight of the i-th score, C(i−1, k−1) / C(n, k): k/n for the highest, and each lower
    // one's from the one above it by (i − k) / (i − 1), down to i = k.
    let mut weight = as_f64(k) / as_f64(n);
    let mut expected = 0.0;
    for i in (k..=n).rev() {
        expected += weight * sorted[i - 1];
        if i > 1 {
            weight *= as_f64(i - k) / as_f64(i - 1);
        }
    }
    Some(expected)
}

fn as_f64(n: usize) -> f64 {
    n as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    #[test]
    fn pass_at_k_matches_hand_counted_subsets() {
        // 2 correct of 4, k = 2: 5 of the 6 pairs hold a correct one.
        assert!(close(pass_at(4, 2, 2), 5.0 / 6.0));
        // k = 1 is the share correct.
        assert!(close(pass_at(4, 1, 1), 0.25));
        assert!(close(pass_at(8, 3, 1), 3.0 / 8.0));
        // k = n: any correct one is enough.
        assert!(close(pass_at(4, 1, 4), 1.0));
        assert!(close(pass_at(4, 0, 4), 0.0));
        // 1 correct of 5, k = 3: 1 − C(4,3)/C(5,3) = 1 − 4/10.
        assert!(close(pass_at(5, 1, 3), 0.6));
        // Too few wrong ones to fill a subset: certain.
        assert!(close(pass_at(4, 3, 2), 1.0));
    }

    #[test]
    fn pass_at_k_clamps_k_and_counts_and_has_nothing_for_no_completion() {
        assert_eq!(pass_at(0, 0, 1), None);
        assert!(close(pass_at(4, 1, 0), 0.25));
        assert!(close(pass_at(4, 1, 9), 1.0));
        assert!(close(pass_at(4, 7, 1), 1.0));
    }

    #[test]
    fn best_of_k_is_the_expected_maximum_over_every_subset() {
        let scores = [0.0, 1.0, 0.5, 0.25];
        // k = 1: the mean.
        assert!(close(best_of(&scores, 1), 0.4375));
        // k = n: the maximum.
        assert!(close(best_of(&scores, 4), 1.0));
        // k = 2, by hand over the 6 pairs: maxima 1, 0.5, 0.25, 1, 1, 0.5 → 4.25 / 6.
        assert!(close(best_of(&scores, 2), 4.25 / 6.0));
        // k = 3, the 4 triples: maxima 1, 1, 1, 0.5 (without the 1.0) → 3.5 / 4.
        assert!(close(best_of(&scores, 3), 3.5 / 4.0));
        assert_eq!(best_of(&[], 1), None);
        assert!(close(best_of(&[-2.0], 5), -2.0));
    }

    #[test]
    fn best_of_k_agrees_with_pass_at_k_on_scores_of_zero_and_one() {
        let scores = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0];
        for k in 1..=7 {
            let best = best_of(&scores, k).unwrap_or(f64::NAN);
            let pass = pass_at(7, 2, k).unwrap_or(f64::NAN);
            assert!((best - pass).abs() < 1e-12, "k {k}: {best} vs {pass}");
        }
    }

    #[test]
    fn measures_parse_by_their_names_and_refuse_others() {
        for measure in Measure::ALL {
            assert_eq!(measure.name().parse::<Measure>(), Ok(measure));
        }
        let refused = "pass@3".parse::<Measure>().unwrap_err();
        assert!(
            refused.contains("mean_score, pass@1, pass@n, best_of_n"),
            "{refused}"
        );
        assert_eq!(Measure::PassAtN.label(8), "pass@8");
        assert_eq!(
            serde_json::to_value(Measure::BestOfN).ok(),
            Some("best_of_n".into())
        );
        let parsed: Result<Measure, _> = serde_json::from_str("\"pass@n\"");
        assert_eq!(parsed.ok(), Some(Measure::PassAtN));
        let wrong = serde_json::from_str::<Measure>("\"best\"")
            .unwrap_err()
            .to_string();
        assert!(wrong.contains("unknown measure \"best\""), "{wrong}");
        assert_eq!(Measure::BestOfN.label(8), "best-of-8");
    }
}
