//! A run's events as `rl runs status --json` prints them, and the times read from them.

use anyhow::Context;
use serde_json::Value;

pub(super) struct Event {
    pub(super) at: jiff::Timestamp,
    pub(super) kind: String,
    pub(super) message: String,
}

pub(super) fn events_of(status: &Value) -> anyhow::Result<Vec<Event>> {
    status["events"]
        .as_array()
        .context("the run's status has no events")?
        .iter()
        .map(|event| {
            let at = event["at"].as_str().context("an event has no time")?;
            Ok(Event {
                at: at
                    .parse()
                    .with_context(|| format!("an event's time {at:?} is not RFC 3339"))?,
                kind: event["kind"].as_str().unwrap_or_default().to_owned(),
                message: event["message"].as_str().unwrap_or_default().to_owned(),
            })
        })
        .collect()
}

/// The time of the first event of `kind` whose message matches.
pub(super) fn event_at(
    events: &[Event],
    kind: &str,
    matches: impl Fn(&str) -> bool,
) -> anyhow::Result<jiff::Timestamp> {
    events
        .iter()
        .find(|event| event.kind == kind && matches(&event.message))
        .map(|event| event.at)
        .with_context(|| {
            let kinds: Vec<String> = events
                .iter()
                .map(|e| format!("{}: {}", e.kind, e.message))
                .collect();
            format!("no such {kind} event among:\n  {}", kinds.join("\n  "))
        })
}

/// The component's own launch → ready time, from its `ready` event: `env ready after 2.17 s (…)`.
pub(super) fn readiness(events: &[Event], component: &str) -> anyhow::Result<f64> {
    let prefix = format!("{component} ready after ");
    let event = events
        .iter()
        .find(|event| event.kind == "ready" && event.message.starts_with(&prefix))
        .with_context(|| format!("the run has no `{prefix}…` event"))?;
    event.message[prefix.len()..]
        .split_once(" s")
        .and_then(|(secs, _)| secs.parse::<f64>().ok())
        .with_context(|| format!("cannot read a time in {:?}", event.message))
}

pub(super) fn seconds_between(from: jiff::Timestamp, to: jiff::Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(at: &str, kind: &str, message: &str) -> Event {
        Event {
            at: at.parse().unwrap(),
            kind: kind.to_owned(),
            message: message.to_owned(),
        }
    }

    #[test]
    fn readiness_is_read_from_the_components_ready_event() {
        let events = [
            event(
                "2026-11-21T02:02:15.105Z",
                "state",
                "created; starting: api",
            ),
            event(
                "2026-11-21T02:02:15.629Z",
                "ready",
                "api ready after 0.51 s (GET http://127.0.0.1:46181/)",
            ),
            event(
                "2026-11-21T02:02:18.133Z",
                "ready",
                "env ready after 2.39 s (registration via GET http://127.0.0.1:46181/status-env)",
            ),
        ];
        assert!((readiness(&events, "api").unwrap() - 0.51).abs() < 1e-9);
        assert!((readiness(&events, "env").unwrap() - 2.39).abs() < 1e-9);
        assert!(readiness(&events, "trainer").is_err());
        let created = event_at(&events, "state", |m| m.starts_with("created")).unwrap();
        let env_ready = events[2].at;
        assert!((seconds_between(created, env_ready) - 3.028).abs() < 1e-9);
        assert!(event_at(&events, "state", |m| m == "stopped").is_err());
    }
}
