//! What rl asks WandB: the key's default entity, a role's runs by display-name prefix within
//! the run's group, and a run's summary and full history, page by page.

use std::collections::{BTreeMap, HashSet};

use serde_json::json;

use super::responses::{
    HistoryProject, ProjectData, RowOutcome, RunNode, RunsProject, ViewerData, last_step,
    parse_row, parse_summary,
};
use super::{DEFAULT_BASE_URL, WandbApi};
use crate::error::MetricsError;
use crate::model::{HistoryRow, LoggedRun, MetricValue, RunRole};
use crate::source::WandbNames;

/// Where people look at runs of the hosted service; a self-hosted server serves both.
const HOSTED_APP_URL: &str = "https://wandb.ai";
const RUNS_PER_PAGE: u32 = 50;

const VIEWER_QUERY: &str = "query Viewer { viewer { id entity } }";

const RUNS_QUERY: &str = "query Runs($project: String!, $entity: String!, $cursor: String, \
$perPage: Int, $filters: JSONString) { project(name: $project, entityName: $entity) { \
runs(filters: $filters, after: $cursor, first: $perPage, order: \"+created_at\") { \
edges { node { name displayName state group summaryMetrics historyKeys createdAt } cursor } \
pageInfo { endCursor hasNextPage } } } }";

const HISTORY_QUERY: &str = "query RunHistoryPage($project: String!, $entity: String!, \
$name: String!, $minStep: Int64!, $maxStep: Int64!, $samples: Int!) { \
project(name: $project, entityName: $entity) { run(name: $name) { \
history(minStep: $minStep, maxStep: $maxStep, samples: $samples) } } }";

impl WandbApi {
    pub(super) async fn entity(&self) -> Result<&str, MetricsError> {
        if let Some(entity) = self.config.entity.as_deref() {
            return Ok(entity);
        }
        self.viewer_entity
            .get_or_try_init(|| async {
                let data: ViewerData = self.graphql(VIEWER_QUERY, json!({})).await?;
                data.viewer
                    .and_then(|viewer| viewer.entity)
                    .filter(|entity| !entity.is_empty())
                    .ok_or_else(|| MetricsError::NotFound {
                        what: "default entity for this API key (set WANDB_ENTITY)".to_owned(),
                    })
            })
            .await
            .map(String::as_str)
    }

    /// The newest run of `role`, or `None` when it has not logged yet.
    pub(super) async fn find_run(
        &self,
        entity: &str,
        names: &WandbNames,
        role: RunRole,
        warnings: &mut Vec<String>,
    ) -> Result<Option<RunNode>, MetricsError> {
        let prefix = match role {
            RunRole::Trainer => names.trainer_name_prefix.as_str(),
            RunRole::Env => match names.env_name_prefix.as_deref() {
                Some(prefix) => prefix,
                None => return Ok(None),
            },
        };
        let mut conditions =
            vec![json!({ "display_name": { "$regex": format!("^{}", escape_regex(prefix)) } })];
        if let Some(group) = &names.group {
            conditions.push(json!({ "group": group }));
        }
        let filters = json!({ "$and": conditions }).to_string();
        let mut runs = self.list_runs(entity, &names.project, &filters).await?;
        // The server's regex dialect is not ours to rely on, and an env prefix can be a prefix
        // of the trainer's: the same test the local sources use decides.
        runs.retain(|run| {
            run.display_name.as_deref().is_some_and(|name| match role {
                RunRole::Trainer => names.is_trainer_run(name),
                RunRole::Env => names.is_env_run(name),
            })
        });
        let count = runs.len();
        // Oldest first: a restarted training run's newest run is the live one.
        let Some(newest) = runs.pop() else {
            return Ok(None);
        };
        if count > 1 {
            let group = names
                .group
                .as_deref()
                .map(|group| format!(" in group '{group}'"))
                .unwrap_or_default();
            warnings.push(format!(
                "{count} WandB {role} runs are named '{prefix}…'{group}; using the newest, '{}' ({})",
                newest.display_name.as_deref().unwrap_or_default(),
                newest.name,
            ));
        }
        Ok(Some(newest))
    }

    async fn list_runs(
        &self,
        entity: &str,
        project: &str,
        filters: &str,
    ) -> Result<Vec<RunNode>, MetricsError> {
        let mut runs = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen_cursors = HashSet::new();
        loop {
            let variables = json!({
                "entity": entity,
                "project": project,
                "filters": filters,
                "cursor": cursor,
                "perPage": RUNS_PER_PAGE,
            });
            let data: ProjectData<RunsProject> = self.graphql(RUNS_QUERY, variables).await?;
            let Some(found) = data.project else {
                return Err(MetricsError::NotFound {
                    what: format!("project '{entity}/{project}'"),
                });
            };
            let Some(connection) = found.runs else {
                break;
            };
            let last_edge_cursor = connection.edges.last().and_then(|edge| edge.cursor.clone());
            runs.extend(connection.edges.into_iter().map(|edge| edge.node));
            if !connection.page_info.has_next_page {
                break;
            }
            // A cursor seen before would page forever.
            match connection.page_info.end_cursor.or(last_edge_cursor) {
                Some(next) if seen_cursors.insert(next.clone()) => cursor = Some(next),
                _ => {
                    return Err(MetricsError::Malformed(
                        "the runs list has more pages but its cursor does not advance".to_owned(),
                    ));
                }
            }
        }
        Ok(runs)
    }

    pub(super) async fn logged_run(
        &self,
        entity: &str,
        project: &str,
        node: RunNode,
        warnings: &mut Vec<String>,
    ) -> Result<LoggedRun, MetricsError> {
        let summary = parse_summary(node.summary_metrics.as_ref(), &node.name, warnings);
        let last_step = last_step(node.history_keys.as_ref()).or_else(|| {
            summary
                .get("_step")
                .and_then(MetricValue::as_f64)
                .map(|step| step as i64)
        });
        let history = match last_step {
            Some(last_step) => {
                self.history(entity, project, &node.name, last_step, warnings)
                    .await?
            }
            None => Vec::new(),
        };
        let url = format!(
            "{}/{entity}/{project}/runs/{}",
            app_url(&self.config.base_url),
            node.name
        );
        Ok(LoggedRun {
            id: Some(node.name),
            name: node.display_name,
            group: node.group,
            state: node.state,
            url: Some(url),
            path: None,
            summary,
            history,
        })
    }

    /// Every row up to `last_step`, a page of steps `[min, max)` at a time, as the SDK's
    /// `scan_history` reads it: with at most one row per step, `samples` equal to the page's
    /// width returns the page unsampled.
    async fn history(
        &self,
        entity: &str,
        project: &str,
        run_id: &str,
        last_step: i64,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<HistoryRow>, MetricsError> {
        let page = i64::from(self.config.history_page_size.max(1));
        let mut end = last_step.saturating_add(1);
        // A trainer that numbers steps by samples would otherwise cost thousands of requests.
        let limit = i64::from(self.config.max_history_pages.max(1)).saturating_mul(page);
        if end > limit {
            warnings.push(format!(
                "WandB run {run_id} logs steps up to {last_step}; only steps below {limit} were read ({} requests of {page} steps)",
                self.config.max_history_pages
            ));
            end = limit;
        }
        let mut rows = BTreeMap::new();
        let mut unreadable = 0usize;
        let mut min = 0i64;
        while min < end {
            let max = min.saturating_add(page).min(end);
            let variables = json!({
                "entity": entity,
                "project": project,
                "name": run_id,
                "minStep": min,
                "maxStep": max,
                "samples": page,
            });
            let data: ProjectData<HistoryProject> = self.graphql(HISTORY_QUERY, variables).await?;
            let Some(run) = data.project.and_then(|project| project.run) else {
                return Err(MetricsError::NotFound {
                    what: format!("run '{entity}/{project}/{run_id}'"),
                });
            };
            for line in run.history.unwrap_or_default() {
                match parse_row(&line) {
                    RowOutcome::Row(row) => {
                        // A server that counts `maxStep` in would send a boundary row twice.
                        rows.entry(row.step).or_insert(row);
                    }
                    RowOutcome::NoStep => {}
                    RowOutcome::Unreadable => unreadable += 1,
                }
            }
            min = max;
        }
        if unreadable > 0 {
            warnings.push(format!(
                "{unreadable} history row(s) of WandB run {run_id} could not be read and were skipped"
            ));
        }
        Ok(rows.into_values().collect())
    }
}

/// The filter's `$regex` is matched by the server, so the prefix must match only itself.
fn escape_regex(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

fn app_url(base_url: &str) -> &str {
    let base_url = base_url.trim_end_matches('/');
    if base_url == DEFAULT_BASE_URL {
        HOSTED_APP_URL
    } else {
        base_url
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_the_hosted_service_link_to_its_app() {
        assert_eq!(app_url("https://api.wandb.ai"), "https://wandb.ai");
        assert_eq!(
            app_url("https://wandb.example.com"),
            "https://wandb.example.com"
        );
    }

    #[test]
    fn regex_metacharacters_in_a_prefix_are_escaped() {
        assert_eq!(escape_regex("gsm8k-1a2b-trainer-"), "gsm8k-1a2b-trainer-");
        assert_eq!(escape_regex("a.b+(c)[d]$"), r"a\.b\+\(c\)\[d\]\$");
    }
}
