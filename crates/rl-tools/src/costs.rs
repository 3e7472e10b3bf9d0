//! Where a run's tokens, seconds and money went: its accounting beside a status or results,
//! its usage in a list, and `rl runs cost`, the runs' own tokens and cost per environment and
//! per day. Read from each run's metrics file (only rl's trainer logs these keys).

use std::collections::BTreeMap;

use rl_metrics::{HistoryRow, Totals, read_metrics_file};
use rl_process::RunRecord;
use rl_settings::RunFolder;

use crate::accounting::{accounting_of, priced_currency, usage_of};
use crate::answers::{
    CostLine, CostReport, ResultsAnswer, RunList, StatusAnswer, TokensView, UsageView,
};
use crate::metrics::SourceChoice;
use crate::{Tools, ToolsError};

impl Tools {
    /// `rl_check_status`'s answer: the status and the run's accounting.
    pub async fn status_answer(
        &self,
        id: &rl_settings::RunId,
        since: i64,
        source: SourceChoice,
    ) -> Result<StatusAnswer, ToolsError> {
        let owned = id.clone();
        let status = self
            .blocking(move |tools| tools.run_status(&owned, since))
            .await?;
        self.with_metrics_and_accounting(status, source).await
    }

    /// `rl_get_results`' answer: the results and the run's accounting.
    pub async fn results_answer(
        &self,
        id: &rl_settings::RunId,
        source: SourceChoice,
    ) -> Result<ResultsAnswer, ToolsError> {
        let results = self.results(id, source).await?;
        let config = RunFolder::of(self.home(), id).config();
        let accounting = tokio::task::spawn_blocking(move || accounting_of(&config))
            .await
            .ok()
            .flatten();
        Ok(ResultsAnswer {
            results,
            accounting,
        })
    }

    /// The runs with each one's own tokens and cost so far (the end of its metrics file only;
    /// a continued run's whole file, its parent's rows left out).
    pub fn list_runs_with_usage(&self) -> Result<RunList, ToolsError> {
        let mut list = self.list_runs()?;
        let runs = self.runs()?.list()?;
        let by_id: BTreeMap<&str, &RunRecord> =
            runs.iter().map(|run| (run.id.as_str(), run)).collect();
        for entry in &mut list.runs {
            let Some(run) = by_id.get(entry.run_id.as_str()) else {
                continue;
            };
            entry.usage = match &run.resumed_from {
                None => usage_of(&run.config_path),
                Some(lineage) => {
                    let parent_rows = by_id.get(lineage.parent.as_str()).map(|p| rows_of(p));
                    own_usage(run, parent_rows.as_deref())
                }
            };
        }
        Ok(list)
    }

    /// `rl runs cost`: every run's own tokens and cost, per environment and per day; `since`
    /// a day, `YYYY-MM-DD`.
    pub fn cost_report(&self, since: Option<&str>) -> Result<CostReport, ToolsError> {
        let since = since
            .map(|text| {
                text.parse::<jiff::civil::Date>().map_err(|error| {
                    ToolsError::invalid(
                        "since",
                        format!(
                            "'{}' is not a day YYYY-MM-DD: {error}",
                            rl_settings::quoted(text)
                        ),
                    )
                })
            })
            .transpose()?;
        let runs = self.runs()?.list()?;
        Ok(cost_report(&runs, since))
    }
}

fn rows_of(run: &RunRecord) -> Vec<HistoryRow> {
    run.config_path
        .parent()
        .and_then(|dir| read_metrics_file(&RunFolder::at(dir).metrics()).ok())
        .and_then(|metrics| metrics.trainer)
        .map(|trainer| trainer.history)
        .unwrap_or_default()
}

/// One step's own share of a run: what it added to the totals, and the day it was logged.
#[derive(Debug, Clone, PartialEq)]
struct Spent {
    day: String,
    tokens: TokensView,
    cost: Option<f64>,
}

/// What each of a run's own steps spent: a resumed run's rows up to the step it resumed after
/// are its parent's (copied with the totals they had), so they are its base, not its spending.
fn own_spending(
    run: &RunRecord,
    rows: &[HistoryRow],
    parent_rows: Option<&[HistoryRow]>,
) -> Vec<Spent> {
    let resumed_after = run
        .resumed_from
        .as_ref()
        .map(|lineage| i64::try_from(lineage.step).unwrap_or(i64::MAX));
    let totals = Totals::of_history(rows);
    let inherited = |totals: &[Totals]| {
        resumed_after.and_then(|after| totals.iter().rev().find(|t| t.step <= after).copied())
    };
    let mut base = inherited(&totals)
        .or_else(|| parent_rows.and_then(|rows| inherited(&Totals::of_history(rows))))
        .unwrap_or_default();
    let run_day = run.created_at.get(..10).unwrap_or_default().to_owned();
    let mut spent = Vec::new();
    for total in totals
        .iter()
        .filter(|t| resumed_after.is_none_or(|after| t.step > after))
    {
        let day = total
            .timestamp
            .and_then(|secs| jiff::Timestamp::from_millisecond((secs * 1000.0) as i64).ok())
            .map_or_else(|| run_day.clone(), |at| at.strftime("%Y-%m-%d").to_string());
        spent.push(Spent {
            day,
            tokens: TokensView {
                prompt: total.prompt_tokens.saturating_sub(base.prompt_tokens),
                sampled: total.sampled_tokens.saturating_sub(base.sampled_tokens),
                trained: total.trained_tokens.saturating_sub(base.trained_tokens),
            },
            cost: total
                .cost
                .map(|cost| (cost - base.cost.unwrap_or(0.0)).max(0.0)),
        });
        base = *total;
    }
    spent
}

/// A continued run's own usage, as `rl runs cost` counts it: what its own steps added to the
/// totals its file carries from its parent (none while it has trained no step of its own, at
/// no cost when it is priced); `None` when its file holds no totals.
fn own_usage(run: &RunRecord, parent_rows: Option<&[HistoryRow]>) -> Option<UsageView> {
    let rows = rows_of(run);
    let last = *Totals::of_history(&rows).last()?;
    let currency = priced_currency(&run.config_path);
    let mut own = CostLine::default();
    for spent in own_spending(run, &rows, parent_rows) {
        add(&mut own, &spent);
    }
    Some(UsageView {
        step: last.step,
        tokens: own.tokens,
        cost: own.cost.or(currency.is_some().then_some(0.0)),
        currency,
    })
}

fn add(line: &mut CostLine, spent: &Spent) {
    line.tokens.prompt += spent.tokens.prompt;
    line.tokens.sampled += spent.tokens.sampled;
    line.tokens.trained += spent.tokens.trained;
    if let Some(cost) = spent.cost {
        line.cost = Some(line.cost.unwrap_or(0.0) + cost);
    }
}

/// The report over `runs` (each one's metrics file read whole: a report, asked for now and
/// then, of every step).
pub(crate) fn cost_report(runs: &[RunRecord], since: Option<jiff::civil::Date>) -> CostReport {
    let since_text = since.map(|date| date.to_string());
    let by_id: BTreeMap<&str, &RunRecord> = runs.iter().map(|run| (run.id.as_str(), run)).collect();
    let mut environments: BTreeMap<String, (CostLine, usize)> = BTreeMap::new();
    let mut days: BTreeMap<String, (CostLine, std::collections::BTreeSet<String>)> =
        BTreeMap::new();
    let mut total = CostLine {
        key: "total".to_owned(),
        ..CostLine::default()
    };
    let mut currencies = std::collections::BTreeSet::new();
    let (mut unpriced_runs, mut untracked_runs) = (0, 0);
    for run in runs {
        let rows = rows_of(run);
        let parent_rows = run
            .resumed_from
            .as_ref()
            .and_then(|lineage| by_id.get(lineage.parent.as_str()))
            .map(|parent| rows_of(parent));
        let spent: Vec<Spent> = own_spending(run, &rows, parent_rows.as_deref())
            .into_iter()
            .filter(|spent| {
                since_text
                    .as_deref()
                    .is_none_or(|since| spent.day.as_str() >= since)
            })
            .collect();
        if Totals::of_history(&rows).is_empty() {
            untracked_runs += 1;
            continue;
        }
        match priced_currency(&run.config_path) {
            Some(currency) => {
                currencies.insert(currency);
            }
            None => unpriced_runs += 1,
        }
        if spent.is_empty() {
            continue;
        }
        total.runs += 1;
        let (environment, _) = environments
            .entry(run.environment.clone())
            .or_insert_with(|| {
                (
                    CostLine {
                        key: run.environment.clone(),
                        ..CostLine::default()
                    },
                    0,
                )
            });
        environment.runs += 1;
        for step in &spent {
            add(environment, step);
            add(&mut total, step);
            let (day, day_runs) = days.entry(step.day.clone()).or_insert_with(|| {
                (
                    CostLine {
                        key: step.day.clone(),
                        ..CostLine::default()
                    },
                    std::collections::BTreeSet::new(),
                )
            });
            add(day, step);
            day_runs.insert(run.id.clone());
        }
    }
    CostReport {
        since: since_text,
        by_environment: environments.into_values().map(|(line, _)| line).collect(),
        by_day: days
            .into_values()
            .map(|(mut line, runs)| {
                line.runs = runs.len();
                line
            })
            .collect(),
        total,
        currencies: currencies.into_iter().collect(),
        unpriced_runs,
        untracked_runs,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn record(dir: &Path, id: &str, resumed_from: Option<(&str, u64)>) -> RunRecord {
        let run_dir = dir.join(id);
        std::fs::create_dir_all(&run_dir).unwrap();
        RunRecord {
            id: id.to_owned(),
            environment: "gsm8k".to_owned(),
            state: rl_process::RunState::Completed,
            created_at: "2026-11-20T10:00:00Z".to_owned(),
            updated_at: "2026-11-20T10:00:00Z".to_owned(),
            config_path: run_dir.join("config.yaml"),
            api_port: None,
            trainer_port: None,
            supervisor: None,
            error: None,
            boot_id: None,
            slurm_job: None,
            resumed_from: resumed_from.map(|(parent, step)| rl_process::Lineage {
                parent: rl_settings::RunId::parse(parent).unwrap(),
                step,
                kind: rl_process::LineageKind::Resume,
                changes: std::collections::BTreeMap::new(),
            }),
            sweep: None,
            components: Vec::new(),
        }
    }

    /// A row of totals: `trained` tokens (prompt twice, sampled half), cost a tenth of them.
    fn line(step: i64, day: u32, trained: u64) -> String {
        let at = jiff::civil::date(2026, 11, i8::try_from(day).unwrap())
            .at(12, 0, 0, 0)
            .to_zoned(jiff::tz::TimeZone::UTC)
            .unwrap()
            .timestamp()
            .as_second();
        format!(
            "{{\"step\": {step}, \"_timestamp\": {at}, \"tokens/prompt_total\": {}, \
             \"tokens/sampled_total\": {}, \"tokens/trained_total\": {trained}, \
             \"cost/total\": {}}}\n",
            trained * 2,
            trained / 2,
            trained as f64 / 10.0
        )
    }

    #[test]
    fn a_resumed_run_counts_only_its_own_steps() {
        let dir = tempfile::tempdir().unwrap();
        let parent = record(dir.path(), "0000aaaa", None);
        let child = record(dir.path(), "0000bbbb", Some(("0000aaaa", 2)));
        // The parent ran 3 steps on the 20th and 21st; the child resumed after step 2 (its
        // file holds the parent's rows up to it, as `carry_over` copies them) and ran 2 more
        // on the 22nd.
        let parent_rows = [line(1, 20, 100), line(2, 21, 200), line(3, 21, 300)].concat();
        let child_rows = [
            line(1, 20, 100),
            line(2, 21, 200),
            line(3, 22, 350),
            line(4, 22, 500),
        ]
        .concat();
        std::fs::write(dir.path().join("0000aaaa/metrics.jsonl"), parent_rows).unwrap();
        std::fs::write(dir.path().join("0000bbbb/metrics.jsonl"), child_rows).unwrap();
        let report = cost_report(&[parent.clone(), child.clone()], None);
        // 300 of the parent's own and 300 of the child's: its 200 inherited not counted twice.
        assert_eq!(report.total.tokens.trained, 600);
        assert_eq!(report.total.tokens.prompt, 1200);
        assert_eq!(report.total.runs, 2);
        let cost = report.total.cost.unwrap();
        assert!((cost - 60.0).abs() < 1e-9, "{cost}");
        let days: Vec<(&str, u64, usize)> = report
            .by_day
            .iter()
            .map(|line| (line.key.as_str(), line.tokens.trained, line.runs))
            .collect();
        assert_eq!(
            days,
            vec![
                ("2026-11-20", 100, 1),
                ("2026-11-21", 200, 1),
                ("2026-11-22", 300, 1)
            ]
        );
        assert_eq!(report.by_environment.len(), 1);
        assert_eq!(report.by_environment[0].tokens.trained, 600);
        // Neither run's config sets a price (no config at all here).
        assert_eq!(report.unpriced_runs, 2);

        // Since a day: the steps logged before it are left out.
        let since = cost_report(
            &[parent, child.clone()],
            Some(jiff::civil::date(2026, 11, 22)),
        );
        assert_eq!(since.total.tokens.trained, 300);
        assert_eq!(since.by_day.len(), 1);

        // A child whose file lacks the inherited rows takes its base from its parent's file.
        std::fs::write(
            dir.path().join("0000bbbb/metrics.jsonl"),
            [line(3, 22, 350), line(4, 22, 500)].concat(),
        )
        .unwrap();
        let parent_rows = rows_of(&record(dir.path(), "0000aaaa", None));
        let spent = own_spending(&child, &rows_of(&child), Some(&parent_rows));
        let trained: u64 = spent.iter().map(|s| s.tokens.trained).sum();
        assert_eq!(trained, 300);
    }

    /// A child that trained nothing shows none of its parent's tokens or cost as its own; once
    /// it trains, only what its steps added (before, a list showed the parent's totals).
    #[test]
    fn a_continued_run_lists_only_its_own_usage() {
        let dir = tempfile::tempdir().unwrap();
        let parent = record(dir.path(), "0000aaaa", None);
        let child = record(dir.path(), "0000bbbb", Some(("0000aaaa", 2)));
        let parent_rows = [line(1, 20, 100), line(2, 21, 200), line(3, 21, 300)];
        std::fs::write(
            dir.path().join("0000aaaa/metrics.jsonl"),
            parent_rows.concat(),
        )
        .unwrap();
        // Carried over up to step 2, nothing trained since.
        std::fs::write(
            dir.path().join("0000bbbb/metrics.jsonl"),
            parent_rows[..2].concat(),
        )
        .unwrap();
        let parent_rows = rows_of(&parent);
        let usage = own_usage(&child, Some(&parent_rows)).unwrap();
        assert_eq!(usage.tokens, TokensView::default());
        assert_eq!(usage.cost, None, "no price in its config: none shown");
        std::fs::write(
            dir.path().join("0000bbbb/metrics.jsonl"),
            [line(1, 20, 100), line(2, 21, 200), line(3, 22, 260)].concat(),
        )
        .unwrap();
        let usage = own_usage(&child, Some(&parent_rows)).unwrap();
        assert_eq!(usage.tokens.trained, 60);
        assert!((usage.cost.unwrap() - 6.0).abs() < 1e-9, "{usage:?}");
        assert_eq!(usage.step, 3);
    }

    /// A step with every key rl's trainer logs for its accounting.
    fn full_row(step: i64, priced: bool) -> String {
        let mut row = serde_json::json!({
            "step": step,
            "_timestamp": 1_763_640_000 + step * 60,
            "tokens/prompt": 1000, "tokens/sampled": 400, "tokens/trained": 1300,
            "tokens/prompt_total": 1000 * step, "tokens/sampled_total": 400 * step,
            "tokens/trained_total": 1300 * step,
            "throughput/trained_tokens_per_sec": 65.0 + step as f64,
            "throughput/sampled_tokens_per_sec": 20.0,
            "time/total_secs": 20.0,
            "time/wait_secs": 8.0, "time/logprobs_secs": 1.0, "time/rollouts_secs": 0.0,
            "time/forward_backward_secs": 6.0, "time/optim_secs": 1.0, "time/save_secs": 2.5,
            "time/sampler_update_secs": 1.0, "time/eval_secs": 0.0, "time/other_secs": 0.5,
            "time/bottleneck": "wait", "time/bottleneck_share": 0.4,
        });
        if priced {
            row["cost/step"] = serde_json::json!(0.25);
            row["cost/total"] = serde_json::json!(0.25 * step as f64);
            row["cost/estimate_at_completion"] = serde_json::json!(2.5);
        }
        format!("{row}\n")
    }

    fn run_folder(priced: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let tinker = if priced {
            "tinker:\n  currency: EUR\n  price_prompt_per_million: 0.1\n  \
             price_sampled_per_million: 0.2\n  price_trained_per_million: 0.3\n"
        } else {
            "tinker:\n  currency: USD\n"
        };
        std::fs::write(
            dir.path().join("config.yaml"),
            format!("env:\n  total_steps: 10\nopenai: []\nslurm: false\ntesting: false\n{tinker}"),
        )
        .unwrap();
        let rows: String = (1..=3).map(|step| full_row(step, priced)).collect();
        std::fs::write(dir.path().join("metrics.jsonl"), rows).unwrap();
        dir
    }

    #[test]
    fn the_accounting_of_a_priced_run() {
        let dir = run_folder(true);
        let config = dir.path().join("config.yaml");
        insta::assert_json_snapshot!("accounting_priced", accounting_of(&config));
        insta::assert_json_snapshot!("usage_priced", usage_of(&config));
    }

    #[test]
    fn the_accounting_of_a_run_without_a_price() {
        let dir = run_folder(false);
        let config = dir.path().join("config.yaml");
        let accounting = accounting_of(&config).unwrap();
        assert_eq!(accounting.cost, None);
        insta::assert_json_snapshot!("accounting_unpriced", accounting);
        let usage = usage_of(&config).unwrap();
        assert_eq!((usage.cost, usage.currency), (None, None));
    }
}
