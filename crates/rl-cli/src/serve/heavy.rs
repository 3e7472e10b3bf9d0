//! The bound on heavy reads: the answers built from a run's files (its page, its metrics, a
//! step's rollouts), each up to megabytes, read and held in memory. Without a bound, a hundred
//! clients asking at once for a large rollouts file held a hundred answers (issue 30 #6).
//!
//! At most [`MAX_HEAVY_READS`] at a time; past it the answer is 503 with `Retry-After`, at once
//! (a queue would hold the waiting requests instead). A read holds its permit from its start to
//! the moment its answer's bytes are dropped: sent, or the connection gone. The work runs on a
//! task of its own, so a read whose client hung up still counts until it ends.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::responses::{failure, with_hint, worker_failed};

/// Heavy reads at once. A step's rollouts hold up to a few times `rl_metrics::MAX_ROLLOUT_BYTES`
/// (8 MB) while read and answered. A run's status, metrics or page reads its `metrics.jsonl`
/// whole (`rl_metrics::read_metrics_file`, a line a step), and `/page/runs` every run's:
/// those are bounded in number here, not in bytes.
pub(super) const MAX_HEAVY_READS: usize = 4;

/// What a refused client is told to wait, in seconds.
const RETRY_AFTER_SECS: u64 = 2;

/// The longest an answer may keep its permit while its client is slow to take it. A client
/// that stops reading would otherwise keep the pages busy for everyone; past this, its answer
/// no longer counts (its connection still holds it until the client reads or goes).
const SEND_DEADLINE: Duration = Duration::from_secs(60);

/// The permits every request shares.
#[derive(Clone)]
pub(super) struct HeavyReads(Arc<Semaphore>);

/// A heavy read under way: its permit, until its answer is sent.
pub(super) struct HeavyRead(OwnedSemaphorePermit);

impl HeavyReads {
    pub(super) fn new() -> Self {
        Self(Arc::new(Semaphore::new(MAX_HEAVY_READS)))
    }

    /// Runs `work` on a task of its own that holds a permit, and hands back its output with
    /// the permit for [`HeavyRead::json`]; the 503 to answer when every permit is taken.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<(T, HeavyRead), Response> {
        let Ok(permit) = Arc::clone(&self.0).try_acquire_owned() else {
            return Err(busy());
        };
        tokio::spawn(async move { (work.await, HeavyRead(permit)) })
            .await
            .map_err(|error| worker_failed(&error))
    }
}

impl HeavyRead {
    /// `value` as a JSON answer whose bytes keep the permit until they are dropped (all sent,
    /// or the connection closed), or [`SEND_DEADLINE`] has passed.
    pub(super) fn json<T: serde::Serialize>(self, status: StatusCode, value: &T) -> Response {
        let bytes = match serde_json::to_vec(value) {
            Ok(bytes) => bytes,
            Err(error) => {
                return failure(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("cannot encode the answer: {error}"),
                );
            }
        };
        let (sent, dropped) = oneshot::channel::<()>();
        let Self(permit) = self;
        tokio::spawn(async move {
            // Either ends it: the sender dropped with the bytes, or the deadline.
            let _ = tokio::time::timeout(SEND_DEADLINE, dropped).await;
            drop(permit);
        });
        let body = Body::from(Bytes::from_owner(HeldBytes { bytes, _sent: sent }));
        let mut response = (status, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// An answer's bytes, and the signal that they are gone.
struct HeldBytes {
    bytes: Vec<u8>,
    _sent: oneshot::Sender<()>,
}

impl AsRef<[u8]> for HeldBytes {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// 503, with when to ask again.
fn busy() -> Response {
    let mut response = with_hint(
        StatusCode::SERVICE_UNAVAILABLE,
        &format!(
            "the server is busy: {MAX_HEAVY_READS} reads of run files are under way, the most \
             it serves at once"
        ),
        &format!("Ask again in {RETRY_AFTER_SECS} seconds (the Retry-After header)"),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    response
}
