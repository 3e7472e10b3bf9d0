//! The part of WandB's `wandb_internal.Record` schema (`wandb/proto/wandb_internal.proto`) that
//! metrics need. Field numbers are the schema's; prost skips every field not declared here, so
//! files from newer SDKs still decode. The schema's `oneof record_type` is declared as separate
//! optional fields, which is the same encoding on the wire.

#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Record {
    #[prost(message, optional, tag = "2")]
    pub history: Option<HistoryRecord>,
    #[prost(message, optional, tag = "3")]
    pub summary: Option<SummaryRecord>,
    #[prost(message, optional, tag = "5")]
    pub config: Option<ConfigRecord>,
    #[prost(message, optional, tag = "17")]
    pub run: Option<RunRecord>,
    #[prost(message, optional, tag = "18")]
    pub exit: Option<RunExitRecord>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct HistoryRecord {
    #[prost(message, repeated, tag = "1")]
    pub item: Vec<Item>,
    #[prost(message, optional, tag = "2")]
    pub step: Option<HistoryStep>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct HistoryStep {
    #[prost(int64, tag = "1")]
    pub num: i64,
}

/// `HistoryItem`, `SummaryItem` and `ConfigItem` share this shape.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Item {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, repeated, tag = "2")]
    pub nested_key: Vec<String>,
    #[prost(string, tag = "16")]
    pub value_json: String,
}

impl Item {
    /// Current SDKs fill `nested_key`; older files only `key`.
    pub(super) fn name(&self) -> String {
        if self.nested_key.is_empty() {
            self.key.clone()
        } else {
            self.nested_key.join(".")
        }
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SummaryRecord {
    #[prost(message, repeated, tag = "1")]
    pub update: Vec<Item>,
    #[prost(message, repeated, tag = "2")]
    pub remove: Vec<Item>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ConfigRecord {
    #[prost(message, repeated, tag = "1")]
    pub update: Vec<Item>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct RunRecord {
    #[prost(string, tag = "1")]
    pub run_id: String,
    #[prost(string, tag = "2")]
    pub entity: String,
    #[prost(string, tag = "3")]
    pub project: String,
    #[prost(message, optional, tag = "4")]
    pub config: Option<ConfigRecord>,
    #[prost(message, optional, tag = "5")]
    pub summary: Option<SummaryRecord>,
    #[prost(string, tag = "6")]
    pub run_group: String,
    #[prost(string, tag = "8")]
    pub display_name: String,
    #[prost(string, repeated, tag = "10")]
    pub tags: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct RunExitRecord {
    #[prost(int32, tag = "1")]
    pub exit_code: i32,
    #[prost(int32, tag = "2")]
    pub runtime: i32,
}
