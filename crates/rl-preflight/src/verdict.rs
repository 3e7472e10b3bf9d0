//! The test's answer to "is this environment ready to train on?", with the numbers behind it.

use serde::{Deserialize, Serialize};

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

pub fn summarise(models: &[ModelReport], policy: VerdictPolicy) -> Summary {
    let succeeded: Vec<&ModelReport> = models
        .iter()
        .filter(|model| model.outcome == ModelOutcome::Succeeded)
        .collect();
    let by_model: Vec<ModelVerdict> = models
        .iter()
        .map(|model| {
            let (verdict, explanation, basis) = judge(&[model], policy);
            ModelVerdict {
                model: model.model.clone(),
                verdict,
                explanation,
                basis,
            }
        })
        .collect();
    let (verdict, mut explanation, basis) = judge(&models.iter().collect::<Vec<_>>(), policy);
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
fn judge(models: &[&ModelReport], policy: VerdictPolicy) -> (Verdict, String, VerdictBasis) {
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
    } else if at_least(basis.all_correct_share, policy.nearly_all) {
        (
            Verdict::TooEasy,
            format!(
                "{} of {groups} groups are all correct: little left to learn",
                percent(basis.all_correct_share)
            ),
        )
    } else if at_least(basis.all_wrong_share, policy.nearly_all) {
        (
            Verdict::TooHard,
            format!(
                "{} of {groups} groups are all wrong: no reward to learn from",
                percent(basis.all_wrong_share)
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
    use crate::analysis::{Groups, figures};

    fn model(name: &str, outcome: ModelOutcome, scores: &[&[f64]]) -> ModelReport {
        let groups = Groups {
            scores: scores.iter().map(|g| g.to_vec()).collect(),
            parse_failures: 0,
        };
        ModelReport {
            model: name.to_owned(),
            outcome,
            duration_secs: 1.0,
            figures: figures(&groups, Some(1.0)),
            error: None,
            error_tail: Vec::new(),
            log_path: "x.log".into(),
            output_path: "x.jsonl".into(),
        }
    }

    fn verdict_of(models: &[ModelReport]) -> Verdict {
        summarise(models, VerdictPolicy::default()).verdict
    }

    const RIGHT: &[f64] = &[1.0, 1.0, 1.0, 1.0];
    const WRONG: &[f64] = &[-1.0, -1.0, -1.0, -1.0];
    const MIXED: &[f64] = &[1.0, -1.0, 1.0, -1.0];

    #[test]
    fn each_model_has_its_own_verdict_and_a_pooled_one_says_they_differ() {
        let ok = ModelOutcome::Succeeded;
        let summary = summarise(
            &[
                model("strong", ok.clone(), &[RIGHT; 10]),
                model("weak", ok.clone(), &[MIXED, MIXED, MIXED, WRONG]),
                model(
                    "gone",
                    ModelOutcome::Failed {
                        code: Some(1),
                        signal: None,
                    },
                    &[],
                ),
            ],
            VerdictPolicy::default(),
        );
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
        let alike = summarise(
            &[model("a", ok.clone(), &[MIXED]), model("b", ok, &[MIXED])],
            VerdictPolicy::default(),
        );
        assert!(
            !alike.explanation.contains("differ"),
            "{}",
            alike.explanation
        );
    }

    #[test]
    fn each_verdict_from_the_groups_behind_it() {
        let ok = ModelOutcome::Succeeded;
        assert_eq!(
            verdict_of(&[model("a", ok.clone(), &[MIXED, MIXED, RIGHT])]),
            Verdict::Ready
        );
        assert_eq!(
            verdict_of(&[model("a", ok.clone(), &[RIGHT; 10])]),
            Verdict::TooEasy
        );
        assert_eq!(
            verdict_of(&[model("a", ok.clone(), &[WRONG; 10])]),
            Verdict::TooHard
        );
        assert_eq!(
            verdict_of(&[model("a", ok, &[RIGHT, RIGHT, WRONG, WRONG, MIXED])]),
            Verdict::NoSignal
        );
        let failed = ModelOutcome::Failed {
            code: Some(1),
            signal: None,
        };
        assert_eq!(verdict_of(&[model("a", failed, &[])]), Verdict::Broken);
        assert_eq!(verdict_of(&[]), Verdict::Broken);
    }

    #[test]
    fn the_summary_names_the_best_succeeded_model_and_averages_only_those() {
        let summary = summarise(
            &[
                model("strong", ModelOutcome::Succeeded, &[RIGHT, MIXED]),
                model("weak", ModelOutcome::Succeeded, &[WRONG, MIXED]),
                model("cut", ModelOutcome::TimedOut { after_secs: 5.0 }, &[RIGHT]),
            ],
            VerdictPolicy::default(),
        );
        assert_eq!(summary.models_tested, 3);
        assert_eq!(summary.models_succeeded, 2);
        assert_eq!(summary.best_model.as_deref(), Some("strong"));
        assert_eq!(summary.average_accuracy, Some(0.5));
        assert!(summary.environment_working);
        assert_eq!(summary.basis.groups, 5);
    }
}
