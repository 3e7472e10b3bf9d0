//! The WandB API source against a local fake of WandB's GraphQL endpoint: answers shaped like
//! the real service's (JSON strings for summaries and history rows, `null` for a missing
//! project, Relay cursors), dispatched on the query text and its variables.

use std::path::PathBuf;
use std::time::Duration;

use rl_metrics::{
    MetricsError, MetricsSource, RunMetrics, RunTarget, SourceKind, WandbApi, WandbApiConfig,
    WandbNames,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const KEY: &str = "test-key-0123456789abcdef0123";
/// `"Basic " + base64("api:" + KEY)`.
const AUTHORIZATION: &str = "Basic YXBpOnRlc3Qta2V5LTAxMjM0NTY3ODlhYmNkZWYwMTIz";
const ENTITY: &str = "team-a";
const PROJECT: &str = "rl-project";
const GROUP: &str = "grp-1";
const TRAINER_PREFIX: &str = "gsm8k-1a2b";

#[derive(Clone)]
struct FakeRun {
    id: String,
    display_name: String,
    group: Option<String>,
    summary: String,
    /// `(step, JSON text of the row)`, as WandB stores them.
    rows: Vec<(i64, String)>,
}

impl FakeRun {
    fn new(id: &str, display_name: &str, group: Option<&str>) -> Self {
        Self {
            id: id.to_owned(),
            display_name: display_name.to_owned(),
            group: group.map(str::to_owned),
            summary: "{}".to_owned(),
            rows: Vec::new(),
        }
    }

    fn summary(mut self, summary: &str) -> Self {
        summary.clone_into(&mut self.summary);
        self
    }

    /// `values` is the inside of a JSON object, Python-style (`NaN` allowed).
    fn row(mut self, step: i64, values: &str) -> Self {
        let timestamp = 1_700_000_000 + step;
        let comma = if values.is_empty() { "" } else { ", " };
        self.rows.push((
            step,
            format!(r#"{{"_step": {step}, "_timestamp": {timestamp}.5, "_runtime": {step}{comma}{values}}}"#),
        ));
        self
    }

    fn node(&self, index: usize) -> Value {
        let history_keys = match self.rows.iter().map(|(step, _)| *step).max() {
            Some(last) => json!({ "keys": {}, "lastStep": last }),
            None => json!({ "keys": {} }),
        };
        json!({
            "name": self.id,
            "displayName": self.display_name,
            "state": "finished",
            "group": self.group,
            "config": "{\"lr\": {\"value\": 0.0001}}",
            "summaryMetrics": self.summary,
            "historyKeys": history_keys,
            "createdAt": format!("2026-01-01T00:00:{index:02}"),
        })
    }
}

/// WandB's GraphQL endpoint for one entity and project.
#[derive(Clone)]
struct FakeWandb {
    project_exists: bool,
    /// Oldest first, as `order: "+created_at"` lists them.
    runs: Vec<FakeRun>,
    runs_per_page: usize,
    /// A server that returns the row at `maxStep` too (the client must not count it twice).
    inclusive_max_step: bool,
}

impl FakeWandb {
    fn new(runs: Vec<FakeRun>) -> Self {
        Self {
            project_exists: true,
            runs,
            runs_per_page: 50,
            inclusive_max_step: false,
        }
    }

    fn runs_page(&self, variables: &Value) -> Value {
        let filters: Value =
            serde_json::from_str(variables["filters"].as_str().expect("filters is a string"))
                .expect("filters is JSON");
        let matching: Vec<&FakeRun> = self
            .runs
            .iter()
            .filter(|run| matches_filters(run, &filters))
            .collect();
        let start = match variables["cursor"].as_str() {
            Some(cursor) => cursor
                .strip_prefix("cursor-")
                .expect("our cursor")
                .parse()
                .expect("a number"),
            None => 0,
        };
        let first = usize::try_from(variables["perPage"].as_u64().expect("perPage")).unwrap();
        let end = (start + first.min(self.runs_per_page)).min(matching.len());
        let edges: Vec<Value> = (start..end)
            .map(|index| json!({ "node": matching[index].node(index), "cursor": format!("cursor-{}", index + 1) }))
            .collect();
        json!({ "project": {
            "runCount": matching.len(),
            "runs": {
                "edges": edges,
                "pageInfo": { "endCursor": format!("cursor-{end}"), "hasNextPage": end < matching.len() },
            },
        }})
    }

    fn history(&self, variables: &Value) -> Value {
        let Some(run) = self
            .runs
            .iter()
            .find(|run| variables["name"].as_str() == Some(&run.id))
        else {
            return json!({ "project": { "run": null } });
        };
        let samples = usize::try_from(variables["samples"].as_u64().unwrap_or(500)).unwrap();
        let rows: Vec<&String> =
            match (variables["minStep"].as_i64(), variables["maxStep"].as_i64()) {
                (Some(min), Some(max)) => run
                    .rows
                    .iter()
                    .filter(|(step, _)| {
                        *step >= min && (*step < max || (self.inclusive_max_step && *step == max))
                    })
                    .map(|(_, row)| row)
                    .take(samples)
                    .collect(),
                // Without a step range WandB samples; so does the fake (every other row).
                _ => run.rows.iter().step_by(2).map(|(_, row)| row).collect(),
            };
        json!({ "project": { "run": { "history": rows } } })
    }
}

fn matches_filters(run: &FakeRun, filters: &Value) -> bool {
    filters["$and"]
        .as_array()
        .expect("an $and of conditions")
        .iter()
        .all(|condition| {
            if let Some(regex) = condition["display_name"]["$regex"].as_str() {
                let prefix = unescape_prefix(regex.strip_prefix('^').expect("anchored"));
                run.display_name.starts_with(&prefix)
            } else if let Some(group) = condition["group"].as_str() {
                run.group.as_deref() == Some(group)
            } else {
                panic!("unexpected condition {condition}")
            }
        })
}

fn unescape_prefix(regex: &str) -> String {
    let mut prefix = String::new();
    let mut chars = regex.chars();
    while let Some(c) = chars.next() {
        prefix.push(if c == '\\' { chars.next().unwrap() } else { c });
    }
    prefix
}

impl Respond for FakeWandb {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).expect("a JSON body");
        let query = body["query"].as_str().expect("a query");
        let variables = &body["variables"];
        let data = if query.contains("viewer") {
            json!({ "viewer": { "id": "VXNlcjox", "entity": ENTITY } })
        } else if !self.project_exists
            || variables["entity"] != ENTITY
            || variables["project"] != PROJECT
        {
            json!({ "project": null })
        } else if query.contains("history(") {
            self.history(variables)
        } else if query.contains("runs(") {
            self.runs_page(variables)
        } else {
            return ResponseTemplate::new(400)
                .set_body_json(json!({ "errors": [{ "message": "unknown query" }] }));
        };
        ResponseTemplate::new(200).set_body_json(json!({ "data": data }))
    }
}

async fn serve(fake: FakeWandb) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/graphql"))
        .and(header("authorization", AUTHORIZATION))
        .respond_with(fake)
        .mount(&server)
        .await;
    server
}

/// A server that always answers `response`.
async fn answering(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/graphql"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

fn config(uri: &str, entity: Option<&str>) -> WandbApiConfig {
    let mut config = WandbApiConfig::new(uri, KEY);
    config.entity = entity.map(str::to_owned);
    config.request_timeout = Duration::from_secs(5);
    config.max_attempts = 3;
    config.initial_backoff = Duration::from_millis(10);
    config.max_backoff = Duration::from_millis(50);
    config
}

fn api(server: &MockServer, entity: Option<&str>) -> WandbApi {
    WandbApi::new(config(&server.uri(), entity)).unwrap()
}

fn names(env: bool) -> WandbNames {
    WandbNames::new(
        PROJECT,
        Some(GROUP.to_owned()),
        TRAINER_PREFIX,
        env.then_some("gsm8k"),
    )
}

fn target(names: WandbNames) -> RunTarget {
    RunTarget::new(PathBuf::from("/nonexistent/run"), Vec::new(), Some(names))
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|request| serde_json::from_slice(&request.body).unwrap())
        .collect()
}

async fn count_queries(server: &MockServer, needle: &str) -> usize {
    bodies(server)
        .await
        .iter()
        .filter(|body| body["query"].as_str().unwrap().contains(needle))
        .count()
}

fn assert_no_key(error: &MetricsError) {
    assert!(!error.to_string().contains(KEY), "{error}");
    assert!(!format!("{error:?}").contains(KEY), "{error:?}");
}

fn trainer_run(id: &str, suffix: &str) -> FakeRun {
    FakeRun::new(
        id,
        &format!("{TRAINER_PREFIX}-trainer-{suffix}"),
        Some(GROUP),
    )
}

async fn fetch(api: &WandbApi, names: WandbNames) -> Result<Option<RunMetrics>, MetricsError> {
    api.fetch(&target(names)).await
}

#[tokio::test]
async fn finds_the_trainer_and_env_runs_with_summary_and_full_history() {
    let trainer = trainer_run("tr1", "x7k2")
        .summary(
            r#"{"_step": 2, "_timestamp": 1700000002.5, "reward/mean": 0.75, "train/loss": 0.5, "train/grad_norm": Infinity, "_wandb": {"runtime": 30}}"#,
        )
        .row(0, r#""reward/mean": 0.25, "train/loss": 1.5"#)
        .row(1, r#""reward/mean": 0.5, "train/loss": NaN"#)
        .row(2, r#""reward/mean": 0.75, "train/loss": 0.5"#);
    let env = FakeRun::new("en1", "gsm8k-2026-01-02-abcdef", Some(GROUP))
        .summary(r#"{"_step": 1, "gsm8k_train/percent_correct": 0.4}"#)
        .row(0, r#""gsm8k_train/percent_correct": 0.3"#)
        .row(1, r#""gsm8k_train/percent_correct": 0.4"#);
    let unrelated = FakeRun::new("zz1", "other-trainer-abc", Some(GROUP));
    let server = serve(FakeWandb::new(vec![trainer, env, unrelated])).await;

    let metrics = fetch(&api(&server, None), names(true))
        .await
        .unwrap()
        .unwrap();

    assert_eq!(metrics.source, SourceKind::WandbApi);
    assert_eq!(metrics.final_weights, None);
    assert!(metrics.checkpoints.is_empty());
    assert!(metrics.warnings.is_empty(), "{:?}", metrics.warnings);

    let trainer = metrics.trainer.unwrap();
    assert_eq!(trainer.id.as_deref(), Some("tr1"));
    assert_eq!(trainer.name.as_deref(), Some("gsm8k-1a2b-trainer-x7k2"));
    assert_eq!(trainer.group.as_deref(), Some(GROUP));
    assert_eq!(trainer.state.as_deref(), Some("finished"));
    assert_eq!(
        trainer.url.as_deref(),
        Some(format!("{}/{ENTITY}/{PROJECT}/runs/tr1", server.uri()).as_str())
    );
    assert_eq!(trainer.path, None);
    assert_eq!(trainer.summary_number("reward/mean"), Some(0.75));
    assert_eq!(trainer.summary_number("train/loss"), Some(0.5));
    assert_eq!(trainer.summary_number("_step"), Some(2.0));
    assert_eq!(
        trainer.summary_number("train/grad_norm"),
        Some(f64::INFINITY)
    );
    assert_eq!(trainer.last_step(), Some(2));
    let steps: Vec<i64> = trainer.history.iter().map(|row| row.step).collect();
    assert_eq!(steps, [0, 1, 2]);
    assert_eq!(trainer.history[0].number("reward/mean"), Some(0.25));
    assert_eq!(trainer.history[0].number("train/loss"), Some(1.5));
    assert!(trainer.history[1].number("train/loss").unwrap().is_nan());
    assert_eq!(trainer.history[2].timestamp, Some(1_700_000_002.5));
    for row in &trainer.history {
        let keys: Vec<&str> = row.values.keys().map(String::as_str).collect();
        assert_eq!(keys, ["reward/mean", "train/loss"]);
    }

    let env = metrics.env.unwrap();
    assert_eq!(env.id.as_deref(), Some("en1"));
    assert_eq!(env.name.as_deref(), Some("gsm8k-2026-01-02-abcdef"));
    assert_eq!(env.summary_number("train/percent_correct"), Some(0.4));
    let env_values: Vec<Option<f64>> = env
        .history
        .iter()
        .map(|row| row.number("gsm8k_train/percent_correct"))
        .collect();
    assert_eq!(env_values, [Some(0.3), Some(0.4)]);

    // The entity came from the viewer query, asked once.
    assert_eq!(count_queries(&server, "viewer").await, 1);
}

#[tokio::test]
async fn a_configured_entity_is_used_without_asking_the_viewer() {
    let server = serve(FakeWandb::new(vec![trainer_run("tr1", "a")])).await;
    let metrics = fetch(&api(&server, Some(ENTITY)), names(false))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(metrics.trainer.unwrap().id.as_deref(), Some("tr1"));
    assert_eq!(count_queries(&server, "viewer").await, 0);
    for body in bodies(&server).await {
        assert_eq!(body["variables"]["entity"], ENTITY);
    }
}

#[tokio::test]
async fn the_default_entity_is_asked_once_per_client() {
    let server = serve(FakeWandb::new(vec![trainer_run("tr1", "a")])).await;
    let api = api(&server, None);
    fetch(&api, names(false)).await.unwrap().unwrap();
    fetch(&api, names(false)).await.unwrap().unwrap();
    assert_eq!(count_queries(&server, "viewer").await, 1);
}

#[tokio::test]
async fn the_filter_asks_for_the_name_prefix_within_the_group() {
    let server = serve(FakeWandb::new(vec![])).await;
    let names = WandbNames::new(PROJECT, Some(GROUP.to_owned()), "run.v1+x", None);
    assert!(
        fetch(&api(&server, Some(ENTITY)), names)
            .await
            .unwrap()
            .is_none()
    );
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 1);
    let filters: Value =
        serde_json::from_str(bodies[0]["variables"]["filters"].as_str().unwrap()).unwrap();
    assert_eq!(
        filters,
        json!({ "$and": [
            { "display_name": { "$regex": r"^run\.v1\+x-trainer-" } },
            { "group": GROUP },
        ]})
    );
    assert!(bodies[0]["query"].as_str().unwrap().contains("+created_at"));
}

#[tokio::test]
async fn no_run_with_the_prefix_in_the_group_is_none() {
    let server = serve(FakeWandb::new(vec![
        FakeRun::new("o1", "gsm8k-1a2b-trainer-zz", Some("other-group")),
        FakeRun::new("o2", "something-else", Some(GROUP)),
    ]))
    .await;
    let found = fetch(&api(&server, Some(ENTITY)), names(true))
        .await
        .unwrap();
    assert_eq!(found, None);
}

#[tokio::test]
async fn a_target_without_wandb_asks_nothing() {
    let server = serve(FakeWandb::new(vec![])).await;
    let mut target = target(names(true));
    target.wandb = None;
    assert_eq!(api(&server, None).fetch(&target).await.unwrap(), None);
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn an_env_run_alone_is_reported_without_a_trainer() {
    let server = serve(FakeWandb::new(vec![FakeRun::new(
        "en1",
        "gsm8k-2026-01-02-abcdef",
        Some(GROUP),
    )]))
    .await;
    let metrics = fetch(&api(&server, Some(ENTITY)), names(true))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(metrics.trainer, None);
    assert_eq!(metrics.env.unwrap().id.as_deref(), Some("en1"));
}

#[tokio::test]
async fn a_missing_project_is_not_found() {
    let mut fake = FakeWandb::new(vec![trainer_run("tr1", "a")]);
    fake.project_exists = false;
    let server = serve(fake).await;
    let error = fetch(&api(&server, Some(ENTITY)), names(true))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, MetricsError::NotFound { what } if what == "project 'team-a/rl-project'"),
        "{error:?}"
    );
    assert_no_key(&error);
}

#[tokio::test]
async fn the_newest_of_several_matching_runs_is_chosen_with_a_warning() {
    let server = serve(FakeWandb::new(vec![
        trainer_run("old1", "aaaa").row(0, r#""train/loss": 3.0"#),
        trainer_run("old2", "bbbb").row(0, r#""train/loss": 2.0"#),
        trainer_run("new3", "cccc").row(0, r#""train/loss": 1.0"#),
    ]))
    .await;
    let metrics = fetch(&api(&server, Some(ENTITY)), names(false))
        .await
        .unwrap()
        .unwrap();
    let trainer = metrics.trainer.unwrap();
    assert_eq!(trainer.id.as_deref(), Some("new3"));
    assert_eq!(trainer.history[0].number("train/loss"), Some(1.0));
    assert_eq!(metrics.warnings.len(), 1);
    let warning = &metrics.warnings[0];
    assert!(warning.contains('3'), "{warning}");
    assert!(warning.contains("gsm8k-1a2b-trainer-cccc"), "{warning}");
    assert!(warning.contains("new3"), "{warning}");
    // Only the chosen run's history is read.
    let history_runs: Vec<String> = bodies(&server)
        .await
        .iter()
        .filter(|body| body["query"].as_str().unwrap().contains("history("))
        .map(|body| body["variables"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(history_runs, ["new3"]);
}

#[tokio::test]
async fn the_runs_list_is_read_across_pages() {
    let mut fake = FakeWandb::new(vec![
        trainer_run("r1", "aaaa"),
        trainer_run("r2", "bbbb"),
        trainer_run("r3", "cccc"),
    ]);
    fake.runs_per_page = 2;
    let server = serve(fake).await;
    let metrics = fetch(&api(&server, Some(ENTITY)), names(false))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(metrics.trainer.unwrap().id.as_deref(), Some("r3"));
    let cursors: Vec<Value> = bodies(&server)
        .await
        .iter()
        .filter(|body| body["query"].as_str().unwrap().contains("runs("))
        .map(|body| body["variables"]["cursor"].clone())
        .collect();
    assert_eq!(cursors, [Value::Null, json!("cursor-2")]);
}

async fn read_paged_history(inclusive_max_step: bool) {
    let mut trainer = trainer_run("tr1", "a");
    // Steps 0..=7 with step 4 never logged: 7 rows, last step 7.
    for step in (0..=7).filter(|step| *step != 4) {
        trainer = trainer.row(step, &format!(r#""train/loss": {step}.5"#));
    }
    let mut fake = FakeWandb::new(vec![trainer]);
    fake.inclusive_max_step = inclusive_max_step;
    let server = serve(fake).await;
    let mut config = config(&server.uri(), Some(ENTITY));
    config.history_page_size = 3;
    let metrics = fetch(&WandbApi::new(config).unwrap(), names(false))
        .await
        .unwrap()
        .unwrap();

    let history = metrics.trainer.unwrap().history;
    let steps: Vec<i64> = history.iter().map(|row| row.step).collect();
    assert_eq!(steps, [0, 1, 2, 3, 5, 6, 7]);
    for row in &history {
        let expected = row.step as f64 + 0.5;
        assert_eq!(row.number("train/loss"), Some(expected));
    }
    let pages: Vec<(i64, i64, i64)> = bodies(&server)
        .await
        .iter()
        .filter(|body| body["query"].as_str().unwrap().contains("history("))
        .map(|body| {
            let variables = &body["variables"];
            (
                variables["minStep"].as_i64().unwrap(),
                variables["maxStep"].as_i64().unwrap(),
                variables["samples"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(pages, [(0, 3, 3), (3, 6, 3), (6, 8, 3)]);
}

#[tokio::test]
async fn history_is_read_in_step_ranges_and_every_row_once() {
    read_paged_history(false).await;
}

#[tokio::test]
async fn a_row_sent_on_both_sides_of_a_page_boundary_is_kept_once() {
    read_paged_history(true).await;
}

#[tokio::test]
async fn a_rate_limit_is_waited_out() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("Retry-After", "0"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/graphql"))
        .respond_with(FakeWandb::new(vec![trainer_run("tr1", "a")]))
        .with_priority(2)
        .mount(&server)
        .await;
    let metrics = fetch(&api(&server, Some(ENTITY)), names(false))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(metrics.trainer.unwrap().id.as_deref(), Some("tr1"));
    // The refused runs query, then the same query answered (the run has no history).
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0], bodies[1]);
}

#[tokio::test]
async fn server_errors_give_up_after_max_attempts() {
    let server = answering(ResponseTemplate::new(500).set_body_string("upstream exploded")).await;
    let error = fetch(&api(&server, Some(ENTITY)), names(false))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, MetricsError::Http { status: 500, attempts: 3, detail } if detail == "upstream exploded"),
        "{error:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
    assert_no_key(&error);
}

#[tokio::test]
async fn a_refused_key_is_not_retried() {
    let server = answering(
        ResponseTemplate::new(401)
            .set_body_json(json!({ "errors": [{ "message": "user is not logged in" }] })),
    )
    .await;
    let error = fetch(&api(&server, None), names(false)).await.unwrap_err();
    assert!(
        matches!(&error, MetricsError::Unauthorized { status: 401, detail } if detail.contains("user is not logged in")),
        "{error:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    assert_no_key(&error);
}

#[tokio::test]
async fn a_server_echoing_the_key_does_not_put_it_in_the_error() {
    let server =
        answering(ResponseTemplate::new(403).set_body_string(format!("bad key {KEY}"))).await;
    let error = fetch(&api(&server, Some(ENTITY)), names(false))
        .await
        .unwrap_err();
    assert!(
        matches!(error, MetricsError::Unauthorized { status: 403, .. }),
        "{error:?}"
    );
    assert_no_key(&error);
}

#[tokio::test]
async fn a_bad_request_is_not_retried() {
    let server = answering(
        ResponseTemplate::new(400)
            .set_body_json(json!({ "errors": [{ "message": "Cannot query field" }] })),
    )
    .await;
    let error = fetch(&api(&server, Some(ENTITY)), names(false))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, MetricsError::Http { status: 400, attempts: 1, detail } if detail == "Cannot query field"),
        "{error:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_missing_endpoint_is_not_found_and_not_retried() {
    let server = MockServer::start().await; // Nothing mounted: wiremock answers 404.
    let error = fetch(&api(&server, Some(ENTITY)), names(false))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, MetricsError::NotFound { what } if what.contains("/graphql") && what.contains("404")),
        "{error:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_body_that_is_not_json_is_malformed() {
    let server =
        answering(ResponseTemplate::new(200).set_body_string("<html>maintenance</html>")).await;
    let error = fetch(&api(&server, Some(ENTITY)), names(false))
        .await
        .unwrap_err();
    assert!(matches!(error, MetricsError::Malformed(_)), "{error:?}");
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn an_answer_of_the_wrong_shape_is_malformed() {
    let server = answering(
        ResponseTemplate::new(200).set_body_json(json!({ "data": { "project": { "runs": 5 } } })),
    )
    .await;
    let error = fetch(&api(&server, Some(ENTITY)), names(false))
        .await
        .unwrap_err();
    assert!(matches!(error, MetricsError::Malformed(_)), "{error:?}");
}

#[tokio::test]
async fn graphql_errors_in_a_200_are_reported() {
    let server = answering(ResponseTemplate::new(200).set_body_json(json!({
        "data": null,
        "errors": [{ "message": "first problem" }, { "message": "second problem" }],
    })))
    .await;
    let error = fetch(&api(&server, Some(ENTITY)), names(false))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, MetricsError::GraphQl(messages) if messages == "first problem; second problem"),
        "{error:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_slow_server_times_out_after_max_attempts() {
    let server = answering(
        ResponseTemplate::new(200)
            .set_body_json(json!({ "data": { "project": null } }))
            .set_delay(Duration::from_secs(60)),
    )
    .await;
    let mut config = config(&server.uri(), Some(ENTITY));
    // Long enough that each attempt is sent and received however loaded the machine is.
    config.request_timeout = Duration::from_secs(1);
    config.max_attempts = 2;
    let error = fetch(&WandbApi::new(config).unwrap(), names(false))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            MetricsError::Timeout {
                seconds: 1,
                attempts: 2
            }
        ),
        "{error:?}"
    );
    // The server may record the second request a moment after the client gave up on it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while server.received_requests().await.unwrap().len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the second attempt never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error() {
    // Port 1 (tcpmux) is privileged and served by nothing: a port freed by this test could be
    // taken by another test's server before the connection is tried.
    let uri = "http://127.0.0.1:1".to_owned();
    let error = fetch(
        &WandbApi::new(config(&uri, Some(ENTITY))).unwrap(),
        names(false),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&error, MetricsError::Transport { url, .. } if *url == format!("{uri}/graphql")),
        "{error:?}"
    );
    assert_no_key(&error);
}

#[tokio::test]
async fn the_key_is_sent_as_basic_auth_and_nowhere_else() {
    let server = serve(FakeWandb::new(vec![
        trainer_run("tr1", "a").row(0, r#""x": 1"#),
    ]))
    .await;
    fetch(&api(&server, None), names(false))
        .await
        .unwrap()
        .unwrap();
    let requests = server.received_requests().await.unwrap();
    assert!(!requests.is_empty());
    for request in &requests {
        assert_eq!(request.headers.get("authorization").unwrap(), AUTHORIZATION);
        assert!(!request.url.as_str().contains(KEY));
        assert!(!String::from_utf8_lossy(&request.body).contains(KEY));
    }
}

#[tokio::test]
async fn asked_for_the_env_only_it_neither_looks_up_nor_reads_the_trainer() {
    let mut trainer = trainer_run("tr1", "a");
    for step in 0..5 {
        trainer = trainer.row(step, &format!(r#""train/loss": {step}.5"#));
    }
    let env = FakeRun::new("en1", "gsm8k-2026-01-02-abcdef", Some(GROUP));
    let server = serve(FakeWandb::new(vec![trainer, env])).await;
    let target = RunTarget {
        env_only: true,
        ..target(names(true))
    };
    let metrics = api(&server, Some(ENTITY))
        .fetch(&target)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(metrics.trainer, None);
    assert_eq!(metrics.env.unwrap().id.as_deref(), Some("en1"));
    let asked_for_trainer = bodies(&server)
        .await
        .iter()
        .filter(|body| body.to_string().contains("-trainer-") || body.to_string().contains("tr1"))
        .count();
    assert_eq!(asked_for_trainer, 0);
}

#[tokio::test]
async fn history_beyond_the_page_limit_is_left_out_with_a_warning() {
    let mut trainer = trainer_run("tr1", "a");
    for step in 0..10 {
        trainer = trainer.row(step, &format!(r#""train/loss": {step}.5"#));
    }
    let server = serve(FakeWandb::new(vec![trainer])).await;
    let mut config = config(&server.uri(), Some(ENTITY));
    config.history_page_size = 3;
    config.max_history_pages = 2;
    let metrics = fetch(&WandbApi::new(config).unwrap(), names(false))
        .await
        .unwrap()
        .unwrap();
    let steps: Vec<i64> = metrics
        .trainer
        .unwrap()
        .history
        .iter()
        .map(|row| row.step)
        .collect();
    assert_eq!(steps, [0, 1, 2, 3, 4, 5]);
    assert!(
        metrics
            .warnings
            .iter()
            .any(|w| w.contains("only steps below 6")),
        "{:?}",
        metrics.warnings
    );
}

/// An endpoint that answers each request just before its timeout would fire: every attempt
/// succeeds at the transport level, so only the lookup's deadline can bound the whole.
#[tokio::test]
async fn a_slow_server_cannot_hold_a_lookup_past_its_deadline() {
    let server = answering(
        ResponseTemplate::new(500)
            .set_body_string("slow and failing")
            .set_delay(Duration::from_millis(400)),
    )
    .await;
    let mut config = config(&server.uri(), Some(ENTITY));
    config.max_attempts = 50;
    config.deadline = Duration::from_millis(900);
    let api = WandbApi::new(config).unwrap();
    let error = fetch(&api, names(false)).await.unwrap_err();
    assert!(
        matches!(error, MetricsError::Deadline { seconds: 1 }),
        "{error:?}"
    );
    assert!(error.to_string().contains("1 s"), "{error}");
    // Without the deadline, 50 attempts would have been made.
    let asked = server.received_requests().await.unwrap().len();
    assert!(asked < 5, "{asked} requests");
}
