//! Sweeps: a grid of settings over the selected environment, each point an ordinary run grouped
//! under the sweep's id, at most `max_parallel` going at once (within `max_active_runs`), the
//! rest queued in the store and started as places free up. Every point is checked before
//! anything starts; the queue outlives whoever started it (`driver.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use rl_config::{RunSetting, Selection};
use rl_process::{NewSweep, RunStore, SweepCreated, SweepRecord};
use rl_settings::{Caps, SweepId, Value};
use serde::{Deserialize, Serialize};

use crate::answers::{SweepList, SweepStarted};
use crate::{Tools, ToolsError};

mod driver;
mod ranking;

pub use ranking::SweepMetric;

use crate::limits::{MAX_SWEEP_POINTS, MAX_SWEEP_SETTINGS, MAX_SWEEP_VALUES};

/// What a caller asks of a sweep.
#[derive(Debug, Clone, Default)]
pub struct SweepRequest {
    /// Each setting and the values it takes, in the caller's order: the grid is their product.
    pub grid: Vec<(String, Vec<Value>)>,
    /// Runs going at once; the operator's `max_active_runs` when absent.
    pub max_parallel: Option<u32>,
    /// What ranks the runs (`reward` when absent).
    pub metric: Option<String>,
    /// Whether the lowest value ranks first (by default only for a `…loss` metric).
    pub lower_is_better: Option<bool>,
    /// Each run's own caps, under the operator's.
    pub caps: Caps,
}

/// What a sweep's driver needs to start its points, recorded in the store as it starts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SweepSpec {
    /// The environment and edits selected when the sweep started: later points run them too,
    /// whatever is selected by then.
    pub(crate) selection: Selection,
    /// Each point's checked settings, by point index.
    pub(crate) points: Vec<Vec<RunSetting>>,
    pub(crate) caps: Caps,
    pub(crate) metric: SweepMetric,
    /// The tree the starter's command line chose, for a driver started by another command.
    pub(crate) tinker_atropos_root: Option<PathBuf>,
    pub(crate) environments_dir: Option<PathBuf>,
}

impl SweepSpec {
    pub(crate) fn of(sweep: &SweepRecord) -> Result<Self, ToolsError> {
        serde_json::from_str(&sweep.spec).map_err(|error| {
            ToolsError::Internal(format!(
                "sweep {}'s record cannot be read: {error}",
                sweep.id
            ))
        })
    }
}

impl Tools {
    /// Checks every point of the grid, records the sweep and its queue, starts what fits now
    /// and hands the rest to a detached driver. Nothing is recorded or started when any point
    /// is refused.
    pub fn start_sweep(&self, request: &SweepRequest) -> Result<SweepStarted, ToolsError> {
        let service = self.service()?;
        let settings = service.settings();
        let limit = settings.max_active_runs.max(1);
        let max_parallel = match request.max_parallel {
            None => limit,
            Some(0) => return Err(ToolsError::invalid("max_parallel", "it must be at least 1")),
            Some(n) if n > limit => {
                return Err(ToolsError::invalid(
                    "max_parallel",
                    format!(
                        "{n} is more than the {limit} runs the operator allows at once \
                         (max_active_runs in config.toml)"
                    ),
                ));
            }
            Some(n) => n,
        };
        let metric = SweepMetric::parse(request.metric.as_deref(), request.lower_is_better)?;
        let caps = settings.caps.for_run(&request.caps)?;
        checked_grid(&request.grid)?;
        let selection = service.selection()?;
        service.check_caps(&selection, &caps)?;
        self.importable(&selection.environment)?;
        let mut points = Vec::new();
        for asked in product(&request.grid) {
            let point = service.check_run_settings(&selection, &asked)?;
            // "8,08" or "1e-4,0.0001": the same run twice is a mistake, not a wider grid.
            if points.contains(&point) {
                let spelled: Vec<String> = point.iter().map(RunSetting::spelled).collect();
                return Err(ToolsError::invalid(
                    "the sweep",
                    format!(
                        "two of its points are the same run ({}): give each value once",
                        spelled.join(" ")
                    ),
                ));
            }
            points.push(point);
        }
        let id = self.unused_sweep_id()?;
        let spec = SweepSpec {
            selection: selection.clone(),
            points: points.clone(),
            caps: request.caps,
            metric,
            tinker_atropos_root: settings
                .tinker_atropos_root
                .as_deref()
                .map(std::path::absolute)
                .transpose()
                .map_err(|error| ToolsError::Internal(error.to_string()))?,
            environments_dir: settings
                .environments_dir
                .as_deref()
                .map(std::path::absolute)
                .transpose()
                .map_err(|error| ToolsError::Internal(error.to_string()))?,
        };
        let text = serde_json::to_string(&spec)
            .map_err(|error| ToolsError::Internal(error.to_string()))?;
        let created = RunStore::open(self.home())?.create_sweep(
            &NewSweep {
                id: id.clone(),
                environment: selection.environment.key.clone(),
                max_parallel,
                spec: text,
                points: points.iter().map(|point| settings_map(point)).collect(),
            },
            Some(settings.max_active_sweeps),
        )?;
        if let SweepCreated::Same(going) = created {
            // A caller that retries does not start the grid twice.
            return Ok(SweepStarted::again(self.sweep_view(&going)?));
        }
        // The first places are taken here, so the answer names their runs; the driver takes
        // the rest as they free up.
        let advanced = self.advance_sweep(&id);
        let driver = self.spawn_sweep_driver(&id);
        let view = self.sweep_view(&id)?;
        let mut notes = Vec::new();
        if let Err(error) = advanced {
            notes.push(format!("starting its first runs: {error}"));
        }
        if let Err(error) = driver {
            notes.push(format!(
                "its driver did not start ({error}); the next rl command starts one"
            ));
        }
        Ok(SweepStarted::new(view, notes))
    }

    /// Every sweep, newest first.
    pub fn list_sweeps(&self) -> Result<SweepList, ToolsError> {
        let sweeps = RunStore::open(self.home())?.sweeps()?;
        Ok(SweepList::new(&sweeps))
    }

    fn unused_sweep_id(&self) -> Result<SweepId, ToolsError> {
        let store = RunStore::open(self.home())?;
        for _ in 0..16 {
            let id = SweepId::generate();
            if store.sweep(&id)?.is_none() {
                return Ok(id);
            }
        }
        Err(ToolsError::Internal(
            "no unused sweep id after 16 tries".to_owned(),
        ))
    }

    /// The sweep `id`, or the error that lists the sweeps there are.
    pub(crate) fn sweep_record(&self, id: &SweepId) -> Result<SweepRecord, ToolsError> {
        let store = RunStore::open(self.home())?;
        match store.sweep(id)? {
            Some(sweep) => Ok(sweep),
            None => Err(ToolsError::UnknownSweep {
                sweep_id: id.to_string(),
                known: store
                    .sweeps()?
                    .into_iter()
                    .take(crate::KNOWN_RUNS_SHOWN)
                    .map(|sweep| sweep.id)
                    .collect(),
            }),
        }
    }
}

/// The grid with its names and values checked for shape (each value then as a run takes it).
fn checked_grid(grid: &[(String, Vec<Value>)]) -> Result<(), ToolsError> {
    if grid.is_empty() {
        return Err(ToolsError::invalid(
            "the sweep",
            "it sets nothing: give at least one setting and its values (--set field=v1,v2)",
        ));
    }
    if grid.len() > MAX_SWEEP_SETTINGS {
        return Err(ToolsError::invalid(
            "the sweep",
            format!(
                "it varies {} settings; a sweep varies at most {MAX_SWEEP_SETTINGS}",
                grid.len()
            ),
        ));
    }
    let mut points: usize = 1;
    for (index, (field, values)) in grid.iter().enumerate() {
        if grid[..index].iter().any(|(other, _)| other == field) {
            return Err(ToolsError::invalid(
                format!("the setting '{field}'"),
                "it is given twice; list all its values once (field=v1,v2)",
            ));
        }
        if values.is_empty() {
            return Err(ToolsError::invalid(
                format!("the setting '{field}'"),
                "it has no values",
            ));
        }
        if values.len() > MAX_SWEEP_VALUES {
            return Err(ToolsError::invalid(
                format!("the setting '{field}'"),
                format!(
                    "{} values; a sweep takes at most {MAX_SWEEP_VALUES} per setting",
                    values.len()
                ),
            ));
        }
        points = points.saturating_mul(values.len());
    }
    if points > MAX_SWEEP_POINTS {
        return Err(ToolsError::invalid(
            "the sweep",
            format!(
                "its grid has {points} points, more than the {MAX_SWEEP_POINTS} a sweep may \
                 have; take fewer values"
            ),
        ));
    }
    Ok(())
}

/// The grid's settings with their values as the runs take them (`"1e-4"` as 0.0001), read off
/// the checked points in their order: what the answers show of the grid.
pub(crate) fn axes(points: &[Vec<RunSetting>]) -> Vec<(String, Vec<Value>)> {
    let Some(first) = points.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(index, setting)| {
            let mut values: Vec<Value> = Vec::new();
            for value in points
                .iter()
                .filter_map(|point| point.get(index))
                .map(|s| &s.value)
            {
                if !values.contains(value) {
                    values.push(value.clone());
                }
            }
            (setting.field.clone(), values)
        })
        .collect()
}

/// Every combination of the grid's values, the last setting varying fastest.
fn product(grid: &[(String, Vec<Value>)]) -> Vec<Vec<(String, Value)>> {
    grid.iter()
        .fold(vec![Vec::new()], |points, (field, values)| {
            points
                .iter()
                .flat_map(|point| {
                    values.iter().map(move |value| {
                        let mut next = point.clone();
                        next.push((field.clone(), value.clone()));
                        next
                    })
                })
                .collect()
        })
}

/// A point's settings as the store keeps them: field → value.
pub(crate) fn settings_map(point: &[RunSetting]) -> BTreeMap<String, Value> {
    point
        .iter()
        .map(|setting| (setting.field.clone(), setting.value.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_is_every_combination_in_order() {
        let grid = vec![
            (
                "learning_rate".to_owned(),
                vec![Value::from("1e-4"), Value::from("3e-4")],
            ),
            ("group_size".to_owned(), vec![Value::Int(8), Value::Int(16)]),
        ];
        checked_grid(&grid).unwrap();
        let points = product(&grid);
        assert_eq!(points.len(), 4);
        assert_eq!(
            points[1],
            vec![
                ("learning_rate".to_owned(), Value::from("1e-4")),
                ("group_size".to_owned(), Value::Int(16)),
            ]
        );
    }

    #[test]
    fn empty_repeated_and_huge_grids_are_refused() {
        assert!(checked_grid(&[]).is_err());
        assert!(checked_grid(&[("a".to_owned(), vec![])]).is_err());
        let twice = vec![
            ("a".to_owned(), vec![Value::Int(1)]),
            ("a".to_owned(), vec![Value::Int(2)]),
        ];
        assert!(checked_grid(&twice).is_err());
        let wide: Vec<Value> = (0..8).map(Value::Int).collect();
        let huge = vec![
            ("a".to_owned(), wide.clone()),
            ("b".to_owned(), wide.clone()),
            ("c".to_owned(), wide),
        ];
        let refused = checked_grid(&huge).unwrap_err().to_string();
        assert!(refused.contains("512 points"), "{refused}");
        let long: Vec<Value> = (0..33).map(Value::Int).collect();
        assert!(checked_grid(&[("a".to_owned(), long)]).is_err());
    }
}
