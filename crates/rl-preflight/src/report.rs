//! What a test leaves behind: each model's report (`model`), the summary and verdict. Written
//! as `report.json` in the test's folder.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::analysis::CorrectRule;
use crate::model::ModelReport;
use crate::verdict::Summary;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreflightReport {
    pub test_id: String,
    pub environment: String,
    /// The environment's file as tested (absent in reports of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_file: Option<PathBuf>,
    pub base_url: String,
    /// The variable the key came from; never its value.
    pub key_variable: String,
    pub steps: u32,
    pub group_size: u32,
    pub correct_rule: CorrectRule,
    /// The score a completion needed to count as correct in this test.
    pub correct_from: Option<f64>,
    pub started_at: String,
    /// When a stop was asked (`rl preflight stop`): the test did not run to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<String>,
    pub duration_secs: f64,
    /// Seconds the server of the test's models (rl's, for checkpoints and base models) took to
    /// be ready, part of `duration_secs`; absent when an endpoint already served them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_ready_secs: Option<f64>,
    pub output_dir: PathBuf,
    pub models: Vec<ModelReport>,
    #[serde(flatten)]
    pub summary: Summary,
}

#[cfg(test)]
mod tests {
    /// Reports are read back and compared: every float must survive JSON exactly (serde_json's
    /// `float_roundtrip`; its default parser can be off in the last bit, as CI once showed).
    #[test]
    fn floats_survive_json_exactly() {
        for value in [
            3.387_030_745_999_999_8_f64,
            0.1,
            2.0 / 3.0,
            1e-300,
            123_456.789_012_345_68,
        ] {
            let text = serde_json::to_string(&value).unwrap_or_default();
            let back: f64 = serde_json::from_str(&text).unwrap_or(f64::NAN);
            assert_eq!(back.to_bits(), value.to_bits(), "{text}");
        }
    }
}
