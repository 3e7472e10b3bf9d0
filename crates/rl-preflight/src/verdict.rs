//! The test's answer to "is this environment ready to train on?", with the numbers behind it.

use serde::{Deserialize, Serialize};

use crate::analysis::CorrectRule;
use crate::model::{ModelOutcome, ModelReport};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Models get some groups right and some wrong: GRPO has something to learn from.
    Ready,
    /// Nearly every group is all correct: nothing left to learn.
    TooEasy,
    /// Nearly every group is all wrong: no reward to learn from.
    TooHard,
    /// Most groups score alike throughout (right or wrong): advantages are zero.
    NoSignal,
    /// No model produced a scored group: the environment, the endpoint or the models fail.
    Broken,
}

/// "Nearly all" and "most", as shares of the scored groups of the models that produced any.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VerdictPolicy {
    pub nearly_all: f64,
    pub most: f64,
}

impl Default for VerdictPolicy {
    fn default() -> Self {
        Self {
            nearly_all: 0.9,
            most: 0.5,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub models_tested: usize,
    pub models_succeeded: usize,
    /// The succeeded model with the highest accuracy.
    pub best_model: Option<String>,
    /// Mean of the succeeded models' accuracies.
    pub average_accuracy: Option<f64>,
    /// Some model produced scored groups.
    pub environment_working: bool,
    pub verdict: Verdict,
    /// The numbers the verdict was drawn from.
    pub basis: VerdictBasis,
    /// One sentence for people.
    pub explanation: String,
    /// Each model's own verdict by the same rule: a task can be too easy for one model and
    /// ready for another (reports of earlier versions have none).
    #[serde(default)]
    pub by_model: Vec<ModelVerdict>,
}

/// One model's verdict, from its groups alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelVerdict {
    pub model: String,
    pub verdict: Verdict,
    pub explanation: String,
    pub basis: VerdictBasis,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VerdictBasis {
    pub groups: usize,
    pub all_correct_share: Option<f64>,
    pub all_wrong_share: Option<f64>,
    pub zero_variance_share: Option<f64>,
    pub policy: VerdictPolicy,
}

/// What "correct" meant in a test: its rule, and the score a completion needed under it
/// (`analysis::threshold`: `None` when the rule could not tell, infinite when nothing was).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grading {
    pub rule: CorrectRule,
    pub correct_from: Option<f64>,
}

/// What a verdict's wording rests on: the test's grading and the lowest and highest score any
/// of its models got (a model's own verdict is told against the whole test's scores).
#[derive(Debug, Clone, Copy)]
struct Context {
    policy: VerdictPolicy,
    grading: Grading,
    range: Option<(f64, f64)>,
}

pub fn summarise(models: &[ModelReport], policy: VerdictPolicy, grading: Grading) -> Summary {
    let context = Context {
        policy,
        grading,
        range: score_range(models.iter()),
    };
    let succeeded: Vec<&ModelReport> = models
        .iter()
        .filter(|model| model.outcome == ModelOutcome::Succeeded)
        .collect();
    let by_model: Vec<ModelVerdict> = models
        .iter()
        .map(|model| {
            let (verdict, explanation, basis) = judge(&[model], context);
            ModelVerdict {
                model: model.model.clone(),
                verdict,
                explanation,
                basis,
            }
        })
        .collect();
    let (verdict, mut explanation, basis) = judge(&models.iter().collect::<Vec<_>>(), context);
    let judged: Vec<&ModelVerdict> = by_model
        .iter()
        .filter(|model| model.basis.groups > 0)
        .collect();
    if judged
        .iter()
        .any(|model| model.verdict != judged[0].verdict)
    {
        let each: Vec<String> = judged
            .iter()
            .map(|model| format!("{} {}", model.model, label(model.verdict)))
            .collect();
        explanation.push_str(&format!("; the models differ: {}", each.join(", ")));
    }
    let accuracies: Vec<(&str, f64)> = succeeded
        .iter()
        .filter_map(|model| Some((model.model.as_str(), model.figures.accuracy?)))
        .collect();
    Summary {
        models_tested: models.len(),
        models_succeeded: succeeded.len(),
        best_model: accuracies
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(model, _)| (*model).to_owned()),
        average_accuracy: (!accuracies.is_empty())
            .then(|| accuracies.iter().map(|(_, a)| a).sum::<f64>() / accuracies.len() as f64),
        environment_working: basis.groups > 0,
        verdict,
        basis,
        explanation,
        by_model,
    }
}

/// The verdict of `models`' scored groups taken together (one model's, or every model's).
fn judge(models: &[&ModelReport], context: Context) -> (Verdict, String, VerdictBasis) {
    let policy = context.policy;
    // Groups from a model cut off or failed still show what the environment does.
    let scored: Vec<&&ModelReport> = models
        .iter()
        .filter(|model| model.figures.steps_tested > 0)
        .collect();
    let groups: usize = scored.iter().map(|m| m.figures.steps_tested).sum();
    let share = |count: usize| (groups > 0).then(|| count as f64 / groups as f64);
    let basis = VerdictBasis {
        groups,
        all_correct_share: share(scored.iter().map(|m| m.figures.all_correct_groups).sum()),
        all_wrong_share: share(scored.iter().map(|m| m.figures.all_wrong_groups).sum()),
        zero_variance_share: share(scored.iter().map(|m| m.figures.zero_variance_groups).sum()),
        policy,
    };
    let at_least = |value: Option<f64>, bound: f64| value.is_some_and(|v| v >= bound);
    let ended_without_signal = models.iter().find_map(|model| match &model.outcome {
        ModelOutcome::NoSignal { cause } => Some(cause.clone()),
        _ => None,
    });
    let (verdict, explanation) = if let Some(cause) = ended_without_signal {
        // Its group counts had no signal (it was ended early, or saved nothing): that is the
        // answer, whatever the few saved groups show.
        (Verdict::NoSignal, cause)
    } else if groups == 0 {
        (
            Verdict::Broken,
            if models.len() == 1 {
                "it produced no scored group: see its error and log".to_owned()
            } else {
                "no model produced a scored group: see each model's error and log".to_owned()
            },
        )
    } else if let Some(score) = score_range(scored.iter().map(|model| **model))
        .and_then(|(low, high)| (low == high).then_some(low))
    {
        constant_verdict(score, context)
    } else if at_least(basis.all_correct_share, policy.nearly_all) {
        (
            Verdict::TooEasy,
            format!(
                "{} of {groups} groups are all correct (every rollout reached {}): little \
                 left to learn",
                percent(basis.all_correct_share),
                correct_mark(context.grading)
            ),
        )
    } else if at_least(basis.all_wrong_share, policy.nearly_all) {
        (
            Verdict::TooHard,
            format!(
                "{} of {groups} groups are all wrong (no rollout reached {})",
                percent(basis.all_wrong_share),
                correct_mark(context.grading)
            ),
        )
    } else if basis
        .zero_variance_share
        .is_some_and(|share| share > policy.most)
    {
        (
            Verdict::NoSignal,
            format!(
                "{} of {groups} groups score alike throughout: GRPO's advantages are zero there",
                percent(basis.zero_variance_share)
            ),
        )
    } else {
        (
            Verdict::Ready,
            format!(
                "{groups} groups from {} model(s), {} with mixed scores: a learnable signal",
                scored.len(),
                percent(basis.zero_variance_share.map(|share| 1.0 - share))
            ),
        )
    };
    (verdict, explanation, basis)
}

/// The verdict of groups in which every rollout scored `score`: GRPO learns nothing from them
/// whatever the score, and it is "all correct" only at what the test knows as correct, "all
/// wrong" only at the bottom of what it saw; else what was seen is all there is to say.
fn constant_verdict(score: f64, context: Context) -> (Verdict, String) {
    let seen = format!("every rollout scored {}", number(score));
    let zero = "GRPO's advantages are zero";
    let Grading { rule, correct_from } = context.grading;
    let (low, high) = context.range.unwrap_or((score, score));
    if correct_from.is_some_and(|from| score >= from) {
        let why = match rule {
            CorrectRule::TopScore => "the top score the test saw".to_owned(),
            CorrectRule::AtLeast { threshold } => {
                format!("at least the threshold {}", number(threshold))
            }
        };
        return (
            Verdict::TooEasy,
            format!("{seen}, {why}: all correct, little left to learn ({zero})"),
        );
    }
    let below = correct_from.is_some_and(|from| score < from);
    if below && score <= low {
        let why = match rule {
            CorrectRule::TopScore if high > score => {
                format!("the lowest score the test saw (its top: {})", number(high))
            }
            CorrectRule::TopScore => "and no rollout in the test scored above 0".to_owned(),
            CorrectRule::AtLeast { threshold } => {
                format!("below the threshold {}", number(threshold))
            }
        };
        return (
            Verdict::TooHard,
            format!("{seen}, {why}: all wrong, no reward to learn from ({zero})"),
        );
    }
    let where_ = match rule {
        CorrectRule::TopScore if high > low => format!(
            "between the lowest ({}) and the top ({}) scores the test saw",
            number(low),
            number(high)
        ),
        CorrectRule::TopScore => "the only score the test saw, so rl cannot tell whether it \
                                  is full marks (a threshold says what counts as correct)"
            .to_owned(),
        CorrectRule::AtLeast { threshold } => format!(
            "below the threshold {} but above the lowest score the test saw ({})",
            number(threshold),
            number(low)
        ),
    };
    (Verdict::NoSignal, format!("{seen}, {where_}: {zero}"))
}

/// What a rollout had to reach to count as correct, for people.
fn correct_mark(grading: Grading) -> String {
    match (grading.rule, grading.correct_from) {
        (CorrectRule::AtLeast { threshold }, _) => format!("the threshold {}", number(threshold)),
        (CorrectRule::TopScore, Some(top)) if top.is_finite() => {
            format!("{}, the top score the test saw", number(top))
        }
        (CorrectRule::TopScore, _) => "a score above 0".to_owned(),
    }
}

/// The lowest and highest score any of `models` got.
fn score_range<'a>(models: impl Iterator<Item = &'a ModelReport>) -> Option<(f64, f64)> {
    models
        .filter_map(|model| model.figures.scores.as_ref())
        .map(|stats| (stats.min, stats.max))
        .reduce(|(low, high), (min, max)| (low.min(min), high.max(max)))
}

/// A score as people read it: as written when short (`1.0`, `0.3625`), else to four places.
fn number(score: f64) -> String {
    let rounded = (score * 10_000.0).round() / 10_000.0;
    if rounded == score {
        format!("{score:?}")
    } else {
        format!("≈{rounded:?}")
    }
}

/// A verdict as people read it (`too easy`).
pub fn label(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Ready => "ready",
        Verdict::TooEasy => "too easy",
        Verdict::TooHard => "too hard",
        Verdict::NoSignal => "no signal",
        Verdict::Broken => "broken",
    }
}

fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_owned(), |share| format!("{:.0} %", share * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{Groups, figures, threshold};

    /// One model's name, how it ended and its groups' scores.
    type Tested<'a> = (&'a str, ModelOutcome, &'a [&'a [f64]]);

    /// The summary of a test of `models` under `rule`, "correct" drawn from all their scores
    /// as `run_test` draws it.
    fn tested(models: &[Tested<'_>], rule: CorrectRule) -> Summary {
        let groups: Vec<Groups> = models
            .iter()
            .map(|(_, _, scores)| Groups {
                scores: scores.iter().map(|g| g.to_vec()).collect(),
                parse_failures: 0,
            })
            .collect();
        let correct_from = threshold(
            rule,
            groups
                .iter()
                .flat_map(|g| g.scores.iter().flatten().copied()),
        );
        let reports: Vec<ModelReport> = models
            .iter()
            .zip(&groups)
            .map(|((name, outcome, _), groups)| ModelReport {
                model: (*name).to_owned(),
                outcome: outcome.clone(),
                duration_secs: 1.0,
                figures: figures(groups, correct_from),
                error: None,
                error_tail: Vec::new(),
                log_path: "x.log".into(),
                output_path: "x.jsonl".into(),
            })
            .collect();
        summarise(
            &reports,
            VerdictPolicy::default(),
            Grading { rule, correct_from },
        )
    }

    fn top(models: &[Tested<'_>]) -> Summary {
        tested(models, CorrectRule::TopScore)
    }

    fn verdict_of(models: &[Tested<'_>]) -> Verdict {
        top(models).verdict
    }

    fn own(summary: &Summary, model: &str) -> (Verdict, String) {
        let verdict = summary
            .by_model
            .iter()
            .find(|verdict| verdict.model == model)
            .unwrap_or_else(|| panic!("no verdict of {model}: {summary:#?}"));
        (verdict.verdict, verdict.explanation.clone())
    }

    const OK: ModelOutcome = ModelOutcome::Succeeded;
    const RIGHT: &[f64] = &[1.0, 1.0, 1.0, 1.0];
    const WRONG: &[f64] = &[-1.0, -1.0, -1.0, -1.0];
    const MIXED: &[f64] = &[1.0, -1.0, 1.0, -1.0];
    const HALF: &[f64] = &[0.5, 0.5, 0.5, 0.5];
    const NOTHING: &[f64] = &[0.0, 0.0, 0.0, 0.0];
    const GRADED: &[f64] = &[0.0, 1.0, 0.5, 0.25];

    fn failed() -> ModelOutcome {
        ModelOutcome::Failed {
            code: Some(1),
            signal: None,
        }
    }

    #[test]
    fn each_model_has_its_own_verdict_and_a_pooled_one_says_they_differ() {
        let summary = top(&[
            ("strong", OK, &[RIGHT; 10]),
            ("weak", OK, &[MIXED, MIXED, MIXED, WRONG]),
            ("gone", failed(), &[]),
        ]);
        let each: Vec<(&str, Verdict)> = summary
            .by_model
            .iter()
            .map(|model| (model.model.as_str(), model.verdict))
            .collect();
        assert_eq!(
            each,
            [
                ("strong", Verdict::TooEasy),
                ("weak", Verdict::Ready),
                ("gone", Verdict::Broken)
            ]
        );
        assert_eq!(summary.by_model[0].basis.groups, 10);
        assert!(
            summary
                .explanation
                .ends_with("the models differ: strong too easy, weak ready"),
            "{}",
            summary.explanation
        );
        let alike = top(&[("a", OK, &[MIXED]), ("b", OK, &[MIXED])]);
        assert!(
            !alike.explanation.contains("differ"),
            "{}",
            alike.explanation
        );
    }

    #[test]
    fn each_verdict_from_the_groups_behind_it() {
        assert_eq!(
            verdict_of(&[("a", OK, &[MIXED, MIXED, RIGHT])]),
            Verdict::Ready
        );
        assert_eq!(
            verdict_of(&[("a", OK, &[RIGHT; 10]), ("b", OK, &[MIXED])]),
            Verdict::TooEasy
        );
        assert_eq!(
            verdict_of(&[("a", OK, &[WRONG; 10]), ("b", OK, &[MIXED])]),
            Verdict::TooHard
        );
        assert_eq!(verdict_of(&[("a", OK, &[WRONG; 10])]), Verdict::TooHard);
        assert_eq!(
            verdict_of(&[("a", OK, &[RIGHT, RIGHT, WRONG, WRONG, MIXED])]),
            Verdict::NoSignal
        );
        assert_eq!(verdict_of(&[("a", failed(), &[])]), Verdict::Broken);
        assert_eq!(verdict_of(&[]), Verdict::Broken);
    }

    /// A graded reward constant below its top (every rollout 0.5 of 1.0) was called "too easy,
    /// all correct" when the test saw nothing higher, and "too hard, all wrong" when another
    /// model scored higher: neither is what was seen.
    #[test]
    fn a_constant_score_is_all_correct_only_at_the_top_and_all_wrong_only_at_the_bottom() {
        // Alone: the test never saw another score, so nothing says 0.5 (or 1.0) is full marks.
        for scores in [HALF, RIGHT] {
            let summary = top(&[("a", OK, &[scores; 3])]);
            let (verdict, explanation) = own(&summary, "a");
            assert_eq!(verdict, Verdict::NoSignal, "{explanation}");
            assert_eq!(summary.verdict, Verdict::NoSignal);
            let seen = format!("every rollout scored {:?}", scores[0]);
            assert!(explanation.starts_with(&seen), "{explanation}");
            assert!(explanation.contains("cannot tell"), "{explanation}");
            assert!(!explanation.contains("correct,"), "{explanation}");
            assert_eq!(summary.basis.all_correct_share, Some(0.0));
        }
        // Below another model's scores, above a third's: neither top nor bottom.
        let summary = top(&[
            ("half", OK, &[HALF, HALF]),
            ("graded", OK, &[GRADED, GRADED]),
            ("right", OK, &[RIGHT, RIGHT]),
            ("nothing", OK, &[NOTHING, NOTHING]),
        ]);
        let (verdict, explanation) = own(&summary, "half");
        assert_eq!(verdict, Verdict::NoSignal, "{explanation}");
        assert_eq!(
            explanation,
            "every rollout scored 0.5, between the lowest (0.0) and the top (1.0) scores the \
             test saw: GRPO's advantages are zero"
        );
        // At the top the test saw: all correct; at its bottom: all wrong.
        let (verdict, explanation) = own(&summary, "right");
        assert_eq!(verdict, Verdict::TooEasy, "{explanation}");
        assert!(
            explanation.starts_with("every rollout scored 1.0, the top score the test saw"),
            "{explanation}"
        );
        let (verdict, explanation) = own(&summary, "nothing");
        assert_eq!(verdict, Verdict::TooHard, "{explanation}");
        assert!(
            explanation.starts_with("every rollout scored 0.0, the lowest score the test saw"),
            "{explanation}"
        );
        assert_eq!(own(&summary, "graded").0, Verdict::Ready);
        // One value at or below 0 everywhere: no reward at all.
        let (verdict, explanation) = own(&top(&[("a", OK, &[NOTHING; 2])]), "a");
        assert_eq!(verdict, Verdict::TooHard, "{explanation}");
        assert!(explanation.contains("no rollout in the test scored above 0"));
        // An odd score is told rounded, and said so.
        let odd: &[f64] = &[0.257_352_941_176_470_56; 2];
        let (_, explanation) = own(&top(&[("a", OK, &[odd])]), "a");
        assert!(
            explanation.starts_with("every rollout scored ≈0.2574"),
            "{explanation}"
        );
    }

    #[test]
    fn under_a_threshold_correct_is_what_it_says() {
        let at = |threshold: f64, models: &[Tested<'_>]| {
            tested(models, CorrectRule::AtLeast { threshold })
        };
        let (verdict, explanation) = own(&at(0.5, &[("a", OK, &[HALF; 2])]), "a");
        assert_eq!(verdict, Verdict::TooEasy, "{explanation}");
        assert!(
            explanation.contains("at least the threshold 0.5: all correct"),
            "{explanation}"
        );
        let (verdict, explanation) = own(&at(1.0, &[("a", OK, &[HALF; 2])]), "a");
        assert_eq!(verdict, Verdict::TooHard, "{explanation}");
        assert!(
            explanation.contains("below the threshold 1.0: all wrong"),
            "{explanation}"
        );
        let summary = at(1.0, &[("a", OK, &[HALF; 2]), ("b", OK, &[NOTHING; 2])]);
        let (verdict, explanation) = own(&summary, "a");
        assert_eq!(verdict, Verdict::NoSignal, "{explanation}");
        assert_eq!(own(&summary, "b").0, Verdict::TooHard);
    }

    #[test]
    fn the_summary_names_the_best_succeeded_model_and_averages_only_those() {
        let summary = top(&[
            ("strong", OK, &[RIGHT, MIXED]),
            ("weak", OK, &[WRONG, MIXED]),
            ("cut", ModelOutcome::TimedOut { after_secs: 5.0 }, &[RIGHT]),
        ]);
        assert_eq!(summary.models_tested, 3);
        assert_eq!(summary.models_succeeded, 2);
        assert_eq!(summary.best_model.as_deref(), Some("strong"));
        assert_eq!(summary.average_accuracy, Some(0.5));
        assert!(summary.environment_working);
        assert_eq!(summary.basis.groups, 5);
    }
}
