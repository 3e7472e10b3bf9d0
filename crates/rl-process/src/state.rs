//! The life of a run, and of each of its components.

use std::fmt;
use std::str::FromStr;

use rl_settings::trainer::EXIT_CAPPED;
use serde::{Deserialize, Serialize};

/// The cooperating processes of a run, in start order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    /// A local Tinker-compatible engine (skyrl-tx), for runs that train on this machine
    /// instead of the hosted Tinker: the only optional component.
    Engine,
    /// Atropos' trajectory API (`run-api`).
    Api,
    /// The Tinker trainer, which also serves inference.
    Trainer,
    /// The Atropos environment (`<env_file> serve`).
    Env,
}

impl Component {
    pub const START_ORDER: [Component; 4] = [
        Component::Engine,
        Component::Api,
        Component::Trainer,
        Component::Env,
    ];
    /// Stops go the other way: nothing is left talking to a component that is already gone.
    pub const STOP_ORDER: [Component; 4] = [
        Component::Env,
        Component::Trainer,
        Component::Api,
        Component::Engine,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Component::Engine => "engine",
            Component::Api => "api",
            Component::Trainer => "trainer",
            Component::Env => "env",
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Component {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Component::START_ORDER
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("unknown component '{s}'"))
    }
}

/// What a starting run waits for: its place on a cluster, then each component's readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Submitted to a cluster's scheduler, waiting for an allocation.
    Queued,
    Engine,
    Api,
    Trainer,
    Env,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Queued => "queued",
            Phase::Engine => "engine",
            Phase::Api => "api",
            Phase::Trainer => "trainer",
            Phase::Env => "env",
        }
    }
}

impl From<Component> for Phase {
    fn from(component: Component) -> Self {
        match component {
            Component::Engine => Phase::Engine,
            Component::Api => Phase::Api,
            Component::Trainer => Phase::Trainer,
            Component::Env => Phase::Env,
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Phase {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            Phase::Queued,
            Phase::Engine,
            Phase::Api,
            Phase::Trainer,
            Phase::Env,
        ]
        .into_iter()
        .find(|phase| phase.as_str() == s)
        .ok_or_else(|| format!("unknown phase '{s}'"))
    }
}

/// Where a run is. `Starting` carries what the run waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "phase")]
pub enum RunState {
    Starting(Phase),
    Running,
    Stopping,
    Stopped,
    Completed,
    /// The trainer ended it before a step that would pass one of its caps (cost, tokens,
    /// hours), after saving its state: not a failure; `rl runs resume` continues it.
    Capped,
    Failed,
    /// Its supervisor vanished without recording an end (the machine rebooted, it was killed).
    Lost,
}

impl RunState {
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            RunState::Stopped
                | RunState::Completed
                | RunState::Capped
                | RunState::Failed
                | RunState::Lost
        )
    }

    /// The transitions a run may make. Everything else is a bug or a race lost to another
    /// writer, and is refused rather than recorded.
    pub fn can_become(self, next: RunState) -> bool {
        use RunState::{Capped, Completed, Failed, Lost, Running, Starting, Stopped, Stopping};
        match (self, next) {
            (from, _) if from.is_finished() => false,
            (Starting(a), Starting(b)) => b > a,
            // Capped: a cap passed before the first step (a resume whose parents spent it).
            (Starting(_), Running | Stopping | Failed | Lost | Completed | Capped) => true,
            (Running, Stopping | Completed | Capped | Failed | Lost) => true,
            // Completed (or capped): the run finished by itself while a stop was on its way.
            (Stopping, Stopped | Completed | Capped | Failed | Lost) => true,
            _ => false,
        }
    }

    /// `starting: trainer`, `running`, … as status shows it.
    pub fn label(self) -> String {
        match self {
            RunState::Starting(phase) => format!("starting: {phase}"),
            other => other.name().to_owned(),
        }
    }

    /// The state's name without its phase, as stored.
    pub fn name(self) -> &'static str {
        match self {
            RunState::Starting(_) => "starting",
            RunState::Running => "running",
            RunState::Stopping => "stopping",
            RunState::Stopped => "stopped",
            RunState::Completed => "completed",
            RunState::Capped => "capped",
            RunState::Failed => "failed",
            RunState::Lost => "lost",
        }
    }

    pub fn from_parts(name: &str, phase: Option<&str>) -> Result<Self, String> {
        Ok(match name {
            "starting" => {
                let phase = phase.ok_or("a starting run needs a phase")?;
                RunState::Starting(phase.parse()?)
            }
            "running" => RunState::Running,
            "stopping" => RunState::Stopping,
            "stopped" => RunState::Stopped,
            "completed" => RunState::Completed,
            "capped" => RunState::Capped,
            "failed" => RunState::Failed,
            "lost" => RunState::Lost,
            other => return Err(format!("unknown run state '{other}'")),
        })
    }

    pub fn phase(self) -> Option<Phase> {
        match self {
            RunState::Starting(phase) => Some(phase),
            _ => None,
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// How a component's process ended, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum ComponentStatus {
    NotStarted,
    Running,
    Exited {
        code: i32,
    },
    Signalled {
        signal: i32,
    },
    /// Ended without its end being seen: its supervisor was gone (killed, or the machine
    /// restarted), so how it ended is unknown.
    Lost,
}

impl ComponentStatus {
    pub fn has_ended(self) -> bool {
        matches!(
            self,
            ComponentStatus::Exited { .. }
                | ComponentStatus::Signalled { .. }
                | ComponentStatus::Lost
        )
    }
}

/// What a run becomes when one of its components ends on its own: the trainer or the
/// environment finishing cleanly completes the run; the trainer leaving with the contract's
/// capped code (`trainer::EXIT_CAPPED`, after saving its state) caps it; anything else, or the
/// API or the engine ending at all, fails it.
pub fn outcome_of_exit(component: Component, status: ComponentStatus) -> RunState {
    match (component, status) {
        (Component::Trainer | Component::Env, ComponentStatus::Exited { code: 0 }) => {
            RunState::Completed
        }
        (Component::Trainer, ComponentStatus::Exited { code }) if code == EXIT_CAPPED => {
            RunState::Capped
        }
        _ => RunState::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_only_move_forward() {
        let api = RunState::Starting(Phase::Api);
        let env = RunState::Starting(Phase::Env);
        assert!(RunState::Starting(Phase::Queued).can_become(api));
        assert!(!api.can_become(RunState::Starting(Phase::Queued)));
        assert!(api.can_become(RunState::Starting(Phase::Trainer)));
        assert!(!env.can_become(api));
        assert!(env.can_become(RunState::Running));
    }

    #[test]
    fn finished_runs_stay_finished() {
        for finished in [
            RunState::Stopped,
            RunState::Completed,
            RunState::Capped,
            RunState::Failed,
            RunState::Lost,
        ] {
            for next in [
                RunState::Running,
                RunState::Stopping,
                RunState::Starting(Phase::Api),
                RunState::Failed,
            ] {
                assert!(!finished.can_become(next), "{finished} -> {next}");
            }
        }
    }

    #[test]
    fn stopping_is_reachable_from_every_live_state_and_ends_stopped() {
        for live in [
            RunState::Starting(Phase::Api),
            RunState::Starting(Phase::Env),
            RunState::Running,
        ] {
            assert!(live.can_become(RunState::Stopping));
        }
        assert!(RunState::Stopping.can_become(RunState::Stopped));
        assert!(
            !RunState::Running.can_become(RunState::Stopped),
            "a stop always passes through stopping"
        );
        assert!(!RunState::Stopping.can_become(RunState::Running));
        assert!(
            RunState::Stopping.can_become(RunState::Completed),
            "a run that finished while being stopped says so"
        );
    }

    #[test]
    fn exits_map_to_outcomes() {
        let cases = [
            (
                Component::Trainer,
                ComponentStatus::Exited { code: 0 },
                RunState::Completed,
            ),
            (
                Component::Env,
                ComponentStatus::Exited { code: 0 },
                RunState::Completed,
            ),
            (
                Component::Api,
                ComponentStatus::Exited { code: 0 },
                RunState::Failed,
            ),
            (
                Component::Engine,
                ComponentStatus::Exited { code: 0 },
                RunState::Failed,
            ),
            (
                Component::Env,
                ComponentStatus::Exited { code: 2 },
                RunState::Failed,
            ),
            (
                Component::Trainer,
                ComponentStatus::Signalled { signal: 9 },
                RunState::Failed,
            ),
            (
                Component::Trainer,
                ComponentStatus::Exited { code: EXIT_CAPPED },
                RunState::Capped,
            ),
            (
                Component::Env,
                ComponentStatus::Exited { code: EXIT_CAPPED },
                RunState::Failed,
            ),
        ];
        for (component, status, expected) in cases {
            assert_eq!(
                outcome_of_exit(component, status),
                expected,
                "{component} {status:?}"
            );
        }
    }

    #[test]
    fn a_capped_run_ends_from_running_or_stopping_and_is_finished() {
        assert!(RunState::Running.can_become(RunState::Capped));
        assert!(
            RunState::Stopping.can_become(RunState::Capped),
            "capped by itself while a stop was on its way"
        );
        assert!(RunState::Capped.is_finished());
        assert!(!RunState::Capped.can_become(RunState::Failed));
        assert!(!RunState::Completed.can_become(RunState::Capped));
        assert_eq!(RunState::Capped.label(), "capped");
    }

    #[test]
    fn stored_form_round_trips() {
        for state in [
            RunState::Starting(Phase::Trainer),
            RunState::Running,
            RunState::Capped,
            RunState::Lost,
        ] {
            let phase = state.phase().map(Phase::as_str);
            assert_eq!(RunState::from_parts(state.name(), phase).unwrap(), state);
        }
        assert!(RunState::from_parts("starting", None).is_err());
        assert!(RunState::from_parts("paused", None).is_err());
        assert_eq!(RunState::Starting(Phase::Env).label(), "starting: env");
    }
}
