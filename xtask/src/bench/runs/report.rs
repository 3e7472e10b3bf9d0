//! The report's section: the samples' spreads as a table against the goals, and what
//! they mean.

use std::fmt::Write as _;

use super::{COMPONENTS, MEMORY_GOAL_BYTES, START_GOAL_SECS, STOP_GOAL_SECS, Sample, TITLE};
use crate::bench::verdict;

/// How a row's values are shown.
#[derive(Clone, Copy)]
enum Unit {
    Seconds,
    /// Seconds shown in ms, for short times.
    Millis,
    Ratio,
    Bytes,
}

impl Unit {
    fn show(self, value: f64) -> String {
        match self {
            Self::Seconds => format!("{value:.2} s"),
            Self::Millis => format!("{:.0} ms", value * 1e3),
            Self::Ratio => format!("{value:.2}×"),
            Self::Bytes => format!("{:.1} MB", value / 1e6),
        }
    }
}

#[derive(Clone, Copy)]
struct Spread {
    /// The upper one of an even count, as elsewhere in the file.
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    fn of(samples: &[Sample], value: impl Fn(&Sample) -> f64) -> Self {
        let mut values: Vec<f64> = samples.iter().map(value).collect();
        values.sort_by(f64::total_cmp);
        let at = |index: usize| values.get(index).copied().unwrap_or(f64::NAN);
        Self {
            median: at(values.len() / 2),
            min: at(0),
            max: at(values.len().saturating_sub(1)),
        }
    }
}

/// One line of the table.
struct Row {
    label: String,
    unit: Unit,
    spread: Spread,
    goal: String,
}

impl Row {
    fn new(label: impl Into<String>, unit: Unit, spread: Spread) -> Self {
        Self {
            label: label.into(),
            unit,
            spread,
            goal: String::new(),
        }
    }

    fn goal(mut self, goal: &str, met: bool) -> Self {
        self.goal = format!("{goal}: **{}**", verdict(met));
        self
    }
}

pub(super) fn report(samples: &[Sample]) -> String {
    let spread = |value: fn(&Sample) -> f64| Spread::of(samples, value);
    let to_running = spread(|s| s.to_running);
    let slowest = spread(|s| s.slowest().1);
    let sum = spread(Sample::readiness_sum);
    let over_slowest = spread(|s| s.to_running - s.slowest().1);
    let over_sum = spread(|s| s.to_running - s.readiness_sum());
    let others = spread(|s| s.readiness_sum() - s.slowest().1);
    let rss = spread(|s| s.rss_bytes);
    let hwm = spread(|s| s.hwm_bytes);
    let stop = spread(|s| s.stop);
    let store_stop = spread(|s| s.store_stop);
    let graceful = samples.iter().filter(|s| s.graceful).count();
    let slowest_label = COMPONENTS
        .iter()
        .enumerate()
        .map(|(index, name)| {
            let count = samples.iter().filter(|s| s.slowest().0 == index).count();
            (name, count)
        })
        .filter(|(_, count)| *count > 0)
        .map(|(name, count)| format!("{name} in {count} of {}", samples.len()))
        .collect::<Vec<_>>()
        .join(", ");

    let start_met = over_slowest.median <= START_GOAL_SECS;
    let overhead_met = over_sum.median <= START_GOAL_SECS;
    // Memory is hardly noisy: judged on the largest reading, not the median.
    let memory_met = rss.max <= MEMORY_GOAL_BYTES;
    let stop_met = stop.median <= STOP_GOAL_SECS;

    let rows = [
        Row::new(
            "`rl runs start --json` returns",
            Unit::Millis,
            spread(|s| s.start_returns),
        ),
        Row::new(
            "**start → running**, as the caller sees it (`rl runs start` + `rl runs wait --until running`)",
            Unit::Seconds,
            to_running,
        ),
        Row::new(
            "start → running in the store (`created` → `running` event)",
            Unit::Seconds,
            spread(|s| s.store_to_running),
        ),
        Row::new(
            "api readiness (launch → `GET /status` answers)",
            Unit::Seconds,
            spread(|s| s.ready[0]),
        ),
        Row::new(
            "trainer readiness (launch → `GET /health` succeeds)",
            Unit::Seconds,
            spread(|s| s.ready[1]),
        ),
        Row::new(
            "env readiness (launch → registered with the API)",
            Unit::Seconds,
            spread(|s| s.ready[2]),
        ),
        Row::new(
            format!("slowest readiness ({slowest_label})"),
            Unit::Seconds,
            slowest,
        ),
        Row::new("sum of the three readiness times", Unit::Seconds, sum),
        Row::new(
            "start → running − slowest readiness",
            Unit::Seconds,
            over_slowest,
        )
        .goal("≤ 1 s (issue 4)", start_met),
        Row::new(
            "start → running ÷ slowest readiness",
            Unit::Ratio,
            spread(|s| s.to_running / s.slowest().1),
        ),
        Row::new(
            "start → running − sum (the orchestration's own overhead)",
            Unit::Millis,
            over_sum,
        )
        .goal("≤ 1 s", overhead_met),
        Row::new(
            "start → running in the store − sum (the supervisor's share of it)",
            Unit::Millis,
            spread(|s| s.store_to_running - s.readiness_sum()),
        ),
        Row::new(
            "start → running ÷ sum",
            Unit::Ratio,
            spread(|s| s.to_running / s.readiness_sum()),
        ),
        Row::new("supervisor VmRSS while running", Unit::Bytes, rss)
            .goal("≤ 15 MB (largest)", memory_met),
        Row::new(
            "supervisor VmHWM (its peak RSS so far) while running",
            Unit::Bytes,
            hwm,
        ),
        Row::new(
            "**`rl runs stop --json`** of a running run, until it returns",
            Unit::Seconds,
            stop,
        )
        .goal("≤ 1 s", stop_met),
        Row::new(
            "stop in the store (`stopping: stop requested` → `stopped` event)",
            Unit::Seconds,
            store_stop,
        ),
    ];

    let mut text = format!(
        "{TITLE}\n\n\
         The run lifecycle on the local stack (`fixtures/local-stack.toml` in a temporary \
         `RL_HOME`: atroposlib 0.4.0's run-api, the fixture trainer and the arithmetic \
         environment, on loopback), driven through the release `rl` binary: `rl select \
         arithmetic` once, then for each run `rl runs start --json`, `rl runs wait ID --until running \
         --json`, the supervisor's `/proc/PID/status`, and `rl runs stop ID --json`. The fixture \
         trainer's step is 5 s instead of 0.2 s, so that a run stays `running` (about 30 s) \
         until it is stopped. {n} runs one after another after one warm-up; ratios and \
         differences are taken within each run, then the median, min and max over the runs. A \
         component's readiness is its own launch → ready time, from its `ready` event \
         (`env ready after 2.17 s (…)`).\n\n\
         | measure | median | min | max | goal |\n\
         |---|---|---|---|---|\n",
        n = samples.len(),
    );
    for row in &rows {
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} | {} |",
            row.label,
            row.unit.show(row.spread.median),
            row.unit.show(row.spread.min),
            row.unit.show(row.spread.max),
            row.goal,
        );
    }

    let _ = write!(
        text,
        "\n**Start.** The components start in sequence by design: run-api first, then the \
         trainer (it registers with run-api as it starts), then the environment (it needs both). \
         start → running can therefore never be shorter than the sum of the three readiness \
         times ({:.2} s), only approach it. Against the issue's yardstick, the slowest single \
         readiness ({:.2} s), start → running is {:.2} s over (median; {:.2} s in the worst \
         run): the goal of at most 1 s over it is **{}**",
        sum.median,
        slowest.median,
        over_slowest.median,
        over_slowest.max,
        verdict(start_met),
    );
    let _ = if start_met {
        write!(
            text,
            ", but only because the two faster components are quick ({:.2} s together) and \
             fit in that second with the overhead; a slower API or trainer would break it \
             without rl doing anything worse.",
            others.median
        )
    } else if others.median > START_GOAL_SECS {
        write!(
            text,
            ", because the two faster components alone take {:.2} s, and they must be ready \
             before the slowest is even launched: no sequential start of these components can \
             meet it, whatever rl does.",
            others.median
        )
    } else {
        write!(
            text,
            ": the two faster components take {:.2} s before the slowest is launched, and the \
             orchestration adds {:.0} ms.",
            others.median,
            over_sum.median * 1e3
        )
    };
    let _ = writeln!(
        text,
        " The meaningful number for a sequential start is the orchestration's own overhead, \
         start → running minus the sum: {:.0} ms (two `rl` processes, the detached supervisor's \
         launch, the store writes between components, `rl runs wait` reading the store every 50 ms; \
         the gates' 100 ms polling is inside the readiness times), so the same 1 s budget over \
         the sum is **{}**.\n\n\
         **Memory.** The supervisor (the `rl` binary itself, detached), read once just after the \
         run is running, holds {:.1} MB resident at most (peak {:.1} MB; MB = 10⁶ bytes), \
         {:.0} % of the budget: the ≤ 15 MB goal is **{}**.\n\n\
         **Stop.** `rl runs stop` of a running run returns in {:.2} s (median; {:.2} s in the \
         store); all three components ended on SIGTERM, without SIGKILL, in {graceful} of {} \
         runs. The ≤ 1 s goal is **{}**.",
        over_sum.median * 1e3,
        verdict(overhead_met),
        rss.max / 1e6,
        hwm.max / 1e6,
        rss.max / MEMORY_GOAL_BYTES * 100.0,
        verdict(memory_met),
        stop.median,
        store_stop.median,
        samples.len(),
        verdict(stop_met),
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slowest_is_the_largest_readiness() {
        let sample = Sample {
            start_returns: 0.0,
            to_running: 3.0,
            store_to_running: 3.0,
            ready: [0.5, 0.1, 2.4],
            rss_bytes: 0.0,
            hwm_bytes: 0.0,
            stop: 0.0,
            store_stop: 0.0,
            graceful: true,
        };
        assert_eq!(sample.slowest(), (2, 2.4));
        assert!((sample.readiness_sum() - 3.0).abs() < 1e-9);
        let spread = Spread::of(&[sample], |s| s.to_running);
        assert_eq!((spread.median, spread.min, spread.max), (3.0, 3.0, 3.0));
    }
}
