//! What `rl serve`'s run pages read: the list of runs with their latest step and reward, one
//! run's page (its record and events after a cursor, every step's numbers, health,
//! checkpoints, log tails, the steps with rollouts), and one step's rollouts. Read-only, and
//! data only: the page renders every text as text.

use rl_metrics::{RolloutMessage, RolloutRow, StepRollouts, ToolCall};
use serde::Serialize;

use super::algorithm::AlgorithmView;
use super::checkpoints::CheckpointEntry;
use super::metrics::{AccountingView, GroupsView, HealthView, MetricsView, UsageView};
use super::runs::{ComponentLog, RunView};

/// `GET /page/runs`.
#[derive(Debug, Clone, Serialize)]
pub struct RunRows {
    pub runs: Vec<RunRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    pub run_id: String,
    pub environment: String,
    /// As in [`RunView`].
    pub environment_kind: Option<rl_settings::EnvironmentKind>,
    pub state: &'static str,
    pub phase: Option<&'static str>,
    pub created_at: String,
    pub updated_at: String,
    /// The latest step and its reward, from the run's metrics file (`null` without one).
    pub step: Option<i64>,
    pub reward_mean: Option<f64>,
    pub total_steps: Option<u64>,
    /// Its tokens and cost so far (the end of its metrics file); `null` before any.
    pub usage: Option<UsageView>,
}

/// `GET /page/runs/{id}?since=N`.
#[derive(Debug, Clone, Serialize)]
pub struct RunPage {
    /// The record, with the events after `since` and the next cursor.
    pub run: RunView,
    pub total_steps: Option<u64>,
    pub eta_secs: Option<f64>,
    pub metrics_source: Option<&'static str>,
    /// Every trainer step's numbers, in step order.
    pub history: Vec<MetricsView>,
    pub health: Option<HealthView>,
    /// The groups the environment made (`rl_env`'s counts); absent before the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<GroupsView>,
    /// The loss, advantages and truncation its config sets; `null` when unreadable.
    pub algorithm: Option<AlgorithmView>,
    pub checkpoints: Vec<CheckpointEntry>,
    pub logs: Vec<ComponentLog>,
    /// Steps whose rollouts the run kept, oldest first.
    pub rollout_steps: Vec<i64>,
    /// The charts, in order: each a `history` row's field and its label.
    pub series: Vec<SeriesLabel>,
    /// Where the run's tokens, seconds and money went; `null` for a trainer that logs no
    /// token totals.
    pub accounting: Option<AccountingView>,
    /// Each step's parts' seconds and pace (rl's trainer's rows).
    pub anatomy: Anatomy,
}

/// The anatomy of the run's steps: a stacked bar per step, and the pace over time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Anatomy {
    /// The parts timed, in the order a step goes through them; `steps[].secs` follows it.
    pub parts: Vec<&'static str>,
    pub steps: Vec<StepAnatomy>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepAnatomy {
    pub step: i64,
    /// Seconds since the Unix epoch the step was logged.
    pub timestamp: Option<f64>,
    pub total_secs: Option<f64>,
    /// Each part's seconds, in `parts` order (0 when not timed).
    pub secs: Vec<f64>,
    pub trained_tokens_per_sec: Option<f64>,
    pub sampled_tokens_per_sec: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeriesLabel {
    pub field: &'static str,
    /// The key the trainer logs it as.
    pub label: &'static str,
}

/// `GET /page/runs/{id}/rollouts/{step}`.
#[derive(Debug, Clone, Serialize)]
pub struct RolloutsView {
    pub step: i64,
    pub rows: Vec<RolloutView>,
    /// The file, a row or a text went past its bound and was cut.
    pub truncated: bool,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RolloutView {
    pub group: Option<i64>,
    pub index: Option<i64>,
    pub prompt: Option<String>,
    pub completion: Option<String>,
    pub score: Option<f64>,
    pub advantage: Option<f64>,
    pub skipped: bool,
    pub skip_reason: Option<String>,
    /// The rollout it is a branch of, when the environment says (a verifiers environment's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<i64>,
    /// The conversation, turn by turn, when the environment sent one (the page then shows it
    /// instead of the decoded prompt and completion).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<MessageView>>,
}

/// One turn of a rollout's conversation.
#[derive(Debug, Clone, Serialize)]
pub struct MessageView {
    pub role: String,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolCallView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    pub arguments: String,
}

impl From<&RolloutMessage> for MessageView {
    fn from(message: &RolloutMessage) -> Self {
        Self {
            role: message.role.clone(),
            content: message.content.clone(),
            reasoning: message.reasoning.clone(),
            tool_calls: message.tool_calls.iter().map(ToolCallView::from).collect(),
            tool_call_id: message.tool_call_id.clone(),
            name: message.name.clone(),
        }
    }
}

impl From<&ToolCall> for ToolCallView {
    fn from(call: &ToolCall) -> Self {
        Self {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        }
    }
}

impl From<&StepRollouts> for RolloutsView {
    fn from(rollouts: &StepRollouts) -> Self {
        Self {
            step: rollouts.step,
            rows: rollouts.rows.iter().map(RolloutView::from).collect(),
            truncated: rollouts.truncated,
            warnings: rollouts.warnings.clone(),
        }
    }
}

impl From<&RolloutRow> for RolloutView {
    fn from(row: &RolloutRow) -> Self {
        Self {
            group: row.group,
            index: row.index,
            prompt: row.prompt.clone(),
            completion: row.completion.clone(),
            score: row.score,
            advantage: row.advantage,
            skipped: row.skipped,
            skip_reason: row.skip_reason.clone(),
            rollout: row.rollout,
            messages: row
                .messages
                .as_ref()
                .map(|messages| messages.iter().map(MessageView::from).collect()),
        }
    }
}
