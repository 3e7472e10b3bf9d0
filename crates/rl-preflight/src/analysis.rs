//! From the groups a model's `process` run wrote to the figures a user decides on. Each line of
//! the file is one scored group (`scores`: one number per completion); a step of `process` is one
//! group, so "steps" and "groups" count the same lines.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::PreflightError;

/// When a completion counts as correct.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum CorrectRule {
    /// A score at least the highest score seen anywhere in the test (the environment's full
    /// marks, as far as the test can tell). When the whole test saw one score value only, the
    /// rule cannot tell full marks from partial credit: a value above 0 is then neither correct
    /// nor wrong (no threshold), one of 0 or below is wrong (no reward at all).
    #[default]
    TopScore,
    /// A score at least this.
    AtLeast { threshold: f64 },
}

/// The scored groups one model produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Groups {
    pub scores: Vec<Vec<f64>>,
    /// Lines that were not a JSON object with a list of numbers under `scores`.
    pub parse_failures: usize,
}

/// Reads a `process` output file; a missing file is no groups (the model produced none).
pub fn read_groups(path: &Path) -> Result<Groups, PreflightError> {
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Groups::default());
        }
        Err(source) => {
            return Err(PreflightError::Io {
                action: "read",
                path: path.to_owned(),
                source,
            });
        }
    };
    Ok(parse_groups(&text))
}

/// Groups a model has written so far: one line each.
pub(crate) fn count_groups(bytes: &[u8]) -> u32 {
    let lines = bytes.iter().filter(|byte| **byte == b'\n').count();
    u32::try_from(lines).unwrap_or(u32::MAX)
}

pub fn parse_groups(text: &str) -> Groups {
    let mut groups = Groups::default();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        match scores_of(line) {
            Some(scores) => groups.scores.push(scores),
            None => groups.parse_failures += 1,
        }
    }
    groups
}

fn scores_of(line: &str) -> Option<Vec<f64>> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    value
        .get("scores")?
        .as_array()?
        .iter()
        .map(serde_json::Value::as_f64)
        .collect::<Option<Vec<f64>>>()
        .filter(|scores| !scores.is_empty())
}

/// Mean, range and how often each score occurred.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreStats {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Score (as written, e.g. `"1.0"`, `"-1.0"`) → how many completions got it.
    pub distribution: BTreeMap<String, usize>,
}

/// What one model's groups say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    pub steps_tested: usize,
    pub completions: usize,
    pub scores: Option<ScoreStats>,
    /// Share of completions that are correct under the test's rule.
    pub accuracy: Option<f64>,
    /// The original tool's measure: share of completions scoring above 0.
    pub accuracy_score_above_zero: Option<f64>,
    pub steps_with_correct: usize,
    /// Share of steps with at least one correct completion.
    pub step_success_rate: Option<f64>,
    /// Groups whose scores are all equal: GRPO gets no signal from them.
    pub zero_variance_groups: usize,
    pub all_correct_groups: usize,
    pub all_wrong_groups: usize,
    pub parse_failures: usize,
}

/// The score a completion needs to be correct, given every score the test saw: `None` when
/// nothing was scored or the rule cannot tell (one value above 0 everywhere: full marks or a
/// constant partial credit alike), infinite when nothing is correct.
pub fn threshold(rule: CorrectRule, all_scores: impl Iterator<Item = f64>) -> Option<f64> {
    match rule {
        CorrectRule::AtLeast { threshold } => Some(threshold),
        CorrectRule::TopScore => {
            let (low, high) = all_scores.filter(|score| score.is_finite()).fold(
                None,
                |range: Option<(f64, f64)>, score| match range {
                    None => Some((score, score)),
                    Some((low, high)) => Some((low.min(score), high.max(score))),
                },
            )?;
            if high > low {
                Some(high)
            } else if high > 0.0 {
                // One value everywhere: the test never saw a score below it, so it cannot
                // tell whether it is the top (0.5 of 1.0 looks the same as 1.0 of 1.0).
                None
            } else {
                // One value everywhere, and not a positive one: nothing was answered right.
                Some(f64::INFINITY)
            }
        }
    }
}

fn share(part: usize, whole: usize) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

pub fn figures(groups: &Groups, correct_from: Option<f64>) -> Figures {
    let all: Vec<f64> = groups.scores.iter().flatten().copied().collect();
    let is_correct = |score: f64| correct_from.is_some_and(|threshold| score >= threshold);
    let correct = all.iter().filter(|score| is_correct(**score)).count();
    let above_zero = all.iter().filter(|score| **score > 0.0).count();
    let mut figures = Figures {
        steps_tested: groups.scores.len(),
        completions: all.len(),
        scores: score_stats(&all),
        accuracy: correct_from.and(share(correct, all.len())),
        accuracy_score_above_zero: share(above_zero, all.len()),
        steps_with_correct: 0,
        step_success_rate: None,
        zero_variance_groups: 0,
        all_correct_groups: 0,
        all_wrong_groups: 0,
        parse_failures: groups.parse_failures,
    };
    for group in &groups.scores {
        let right = group.iter().filter(|score| is_correct(**score)).count();
        if right > 0 {
            figures.steps_with_correct += 1;
        }
        if group.iter().all(|score| *score == group[0]) {
            figures.zero_variance_groups += 1;
        }
        if correct_from.is_some() && right == group.len() {
            figures.all_correct_groups += 1;
        }
        if correct_from.is_some() && right == 0 {
            figures.all_wrong_groups += 1;
        }
    }
    figures.step_success_rate =
        correct_from.and(share(figures.steps_with_correct, figures.steps_tested));
    figures
}

fn score_stats(all: &[f64]) -> Option<ScoreStats> {
    if all.is_empty() {
        return None;
    }
    let mut distribution = BTreeMap::new();
    for score in all {
        *distribution.entry(format!("{score:?}")).or_insert(0) += 1;
    }
    Some(ScoreStats {
        mean: all.iter().sum::<f64>() / all.len() as f64,
        min: all.iter().copied().fold(f64::INFINITY, f64::min),
        max: all.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        distribution,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(scores: &[&[f64]]) -> Groups {
        Groups {
            scores: scores.iter().map(|group| group.to_vec()).collect(),
            parse_failures: 0,
        }
    }

    #[test]
    fn lines_without_a_list_of_scores_are_parse_failures() {
        let parsed = parse_groups(
            "{\"scores\": [1.0, -1.0], \"tokens\": [[1]]}\n\
             not json\n\
             {\"scores\": []}\n\
             {\"scores\": [\"x\"]}\n\
             [1, 2]\n\
             \n\
             {\"scores\": [0.5]}\n",
        );
        assert_eq!(parsed.scores, vec![vec![1.0, -1.0], vec![0.5]]);
        assert_eq!(parsed.parse_failures, 4);
    }

    #[test]
    fn the_top_score_is_full_marks_and_one_value_everywhere_is_no_top_at_all() {
        let top = |scores: &[f64]| threshold(CorrectRule::TopScore, scores.iter().copied());
        assert_eq!(top(&[-1.0, 1.0, 1.0]), Some(1.0));
        assert_eq!(top(&[0.2, 0.7]), Some(0.7));
        // One positive value everywhere: full marks or a constant partial credit, unknown.
        assert_eq!(top(&[1.0, 1.0]), None);
        assert_eq!(top(&[0.5, 0.5]), None);
        assert_eq!(top(&[-1.0, -1.0]), Some(f64::INFINITY));
        assert_eq!(top(&[0.0]), Some(f64::INFINITY));
        assert_eq!(top(&[]), None);
        let fixed = CorrectRule::AtLeast { threshold: 0.5 };
        assert_eq!(threshold(fixed, [1.0].into_iter()), Some(0.5));
    }

    #[test]
    fn figures_count_completions_steps_and_group_kinds() {
        let figures = figures(
            &groups(&[
                &[1.0, 1.0, 1.0, 1.0],
                &[-1.0, -1.0, -1.0, -1.0],
                &[1.0, -1.0, -1.0, -1.0],
            ]),
            Some(1.0),
        );
        assert_eq!(figures.steps_tested, 3);
        assert_eq!(figures.completions, 12);
        assert_eq!(figures.accuracy, Some(5.0 / 12.0));
        assert_eq!(figures.accuracy_score_above_zero, Some(5.0 / 12.0));
        assert_eq!(figures.steps_with_correct, 2);
        assert_eq!(figures.step_success_rate, Some(2.0 / 3.0));
        assert_eq!(figures.zero_variance_groups, 2);
        assert_eq!(figures.all_correct_groups, 1);
        assert_eq!(figures.all_wrong_groups, 1);
        let stats = figures.scores.unwrap();
        assert_eq!((stats.min, stats.max), (-1.0, 1.0));
        assert_eq!(stats.distribution["1.0"], 5);
        assert_eq!(stats.distribution["-1.0"], 7);
    }

    #[test]
    fn partial_credit_is_not_full_marks_but_is_above_zero() {
        let figures = figures(&groups(&[&[0.5, 1.0], &[0.5, 0.0]]), Some(1.0));
        assert_eq!(figures.accuracy, Some(0.25));
        assert_eq!(figures.accuracy_score_above_zero, Some(0.75));
        assert_eq!(figures.zero_variance_groups, 0);
    }

    #[test]
    fn no_groups_means_no_rates() {
        let figures = figures(&Groups::default(), None);
        assert_eq!(figures.accuracy, None);
        assert_eq!(figures.step_success_rate, None);
        assert_eq!(figures.scores, None);
        assert_eq!(figures.completions, 0);
    }
}
