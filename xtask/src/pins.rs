//! `cargo xtask pins`: each Python package rl pins (`crates/rl-python/requirements/`, and the
//! packages installed beside them: atroposlib, skyrl-tx) beside the newest release on PyPI, and
//! how far behind the pin is — releases since, and days between the two uploads. It only
//! reports: upstream releases must never block a landing, so it exits 0 whatever it finds
//! (and says which packages it could not ask).

use std::collections::BTreeMap;
use std::process::Command;

use anyhow::Context as _;
use rl_python::{ATROPOSLIB, ENGINE_PACKAGE, ENGINE_REQUIREMENTS, Pin, TRAINER_REQUIREMENTS, pins};

/// Packages asked at once (each is one HTTP request by curl).
const AT_ONCE: usize = 8;

/// What PyPI says of one package against its pin.
struct Standing {
    pin: Pin,
    /// The requirements files that pin it.
    files: Vec<&'static str>,
    newest: Result<Release, String>,
}

struct Release {
    version: String,
    /// Final releases newer than the pin.
    behind: usize,
    /// Days from the pin's upload to the newest's (None when either date is unknown).
    days: Option<i64>,
}

pub(crate) fn run() {
    // The two Pythons are separate venvs: a package may be pinned at two versions, one row each.
    let mut pinned: BTreeMap<(&'static str, &'static str), (Pin, Vec<&'static str>)> =
        BTreeMap::new();
    let sources = [
        (
            "trainer.txt",
            std::iter::once(ATROPOSLIB)
                .chain(pins(TRAINER_REQUIREMENTS))
                .collect::<Vec<_>>(),
        ),
        (
            "engine.txt",
            std::iter::once(ENGINE_PACKAGE)
                .chain(pins(ENGINE_REQUIREMENTS))
                .collect(),
        ),
    ];
    for (file, list) in sources {
        for pin in list {
            pinned
                .entry((pin.name, pin.version))
                .or_insert_with(|| (pin, Vec::new()))
                .1
                .push(file);
        }
    }
    let wanted: Vec<(Pin, Vec<&'static str>)> = pinned.into_values().collect();
    let mut standings = Vec::with_capacity(wanted.len());
    for chunk in wanted.chunks(AT_ONCE) {
        let asked: Vec<_> = chunk
            .iter()
            .map(|(pin, _)| {
                let pin = *pin;
                std::thread::spawn(move || newest(pin))
            })
            .collect();
        for ((pin, files), handle) in chunk.iter().zip(asked) {
            let newest = handle
                .join()
                .unwrap_or_else(|_| Err("the look-up panicked".to_owned()));
            standings.push(Standing {
                pin: *pin,
                files: files.clone(),
                newest,
            });
        }
    }
    print(&standings);
}

#[allow(clippy::print_stdout)]
fn print(standings: &[Standing]) {
    println!(
        "{:<24} {:<12} {:<12} {:>7} {:>6}  pinned in",
        "package", "pinned", "newest", "behind", "days"
    );
    let mut current = 0;
    let mut unknown = Vec::new();
    for standing in standings {
        let files = standing.files.join(", ");
        match &standing.newest {
            Ok(release) => {
                if release.behind == 0 {
                    current += 1;
                }
                println!(
                    "{:<24} {:<12} {:<12} {:>7} {:>6}  {files}",
                    standing.pin.name,
                    standing.pin.version,
                    release.version,
                    release.behind,
                    release
                        .days
                        .map_or_else(|| "?".to_owned(), |days| days.to_string()),
                );
            }
            Err(why) => {
                println!(
                    "{:<24} {:<12} {:<12} {:>7} {:>6}  {files}",
                    standing.pin.name, standing.pin.version, "?", "?", "?"
                );
                unknown.push(format!("{}: {why}", standing.pin.name));
            }
        }
    }
    println!(
        "{current} of {} pins are the newest release; `behind` counts final releases since the pin",
        standings.len()
    );
    for line in unknown {
        println!("not asked: {line}");
    }
}

/// The newest final release of `pin`'s package on PyPI, and how far the pin is behind it.
fn newest(pin: Pin) -> Result<Release, String> {
    let url = format!("https://pypi.org/pypi/{}/json", pin.name);
    let output = Command::new("curl")
        .args([
            "--fail",
            "--silent",
            "--show-error",
            "--location",
            "--max-time",
            "60",
            &url,
        ])
        .output()
        .map_err(|error| format!("cannot run curl: {error}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).trim().to_owned());
    }
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout)
        .context("PyPI's answer is not JSON")
        .map_err(|error| format!("{error:#}"))?;
    standing(pin, &answer)
}

/// A final release's version as numbers (`2026.10.18` → [2026, 10, 18]); None for a pre-,
/// post- or dev release, which a pin is never told to move to.
fn numbers(version: &str) -> Option<Vec<u64>> {
    version.split('.').map(|part| part.parse().ok()).collect()
}

fn upload_day(answer: &serde_json::Value, version: &str) -> Option<jiff::civil::Date> {
    let files = answer["releases"][version].as_array()?;
    let first = files
        .iter()
        .filter_map(|file| file["upload_time_iso_8601"].as_str())
        .min()?;
    first
        .parse::<jiff::Timestamp>()
        .ok()
        .map(|at| at.to_zoned(jiff::tz::TimeZone::UTC).date())
}

fn standing(pin: Pin, answer: &serde_json::Value) -> Result<Release, String> {
    let releases = answer["releases"]
        .as_object()
        .ok_or_else(|| "PyPI's answer has no releases".to_owned())?;
    let pinned = numbers(pin.version);
    let mut finals: Vec<(Vec<u64>, &str)> = releases
        .iter()
        .filter(|(_, files)| files.as_array().is_some_and(|files| !files.is_empty()))
        .filter_map(|(version, _)| Some((numbers(version)?, version.as_str())))
        .collect();
    finals.sort();
    let (_, newest) = finals
        .last()
        .ok_or_else(|| "PyPI lists no final release".to_owned())?;
    let behind = match &pinned {
        Some(pinned) => finals
            .iter()
            .filter(|(version, _)| version > pinned)
            .count(),
        None => 0,
    };
    let days = match (upload_day(answer, pin.version), upload_day(answer, newest)) {
        (Some(then), Some(now)) => then.until(now).ok().map(|span| i64::from(span.get_days())),
        _ => None,
    };
    Ok(Release {
        version: (*newest).to_owned(),
        behind,
        days,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_final_release_and_the_distance_to_it() {
        let answer = serde_json::json!({"releases": {
            "0.16.1": [{"upload_time_iso_8601": "2026-01-10T12:00:00.000Z"}],
            "0.22.3": [{"upload_time_iso_8601": "2026-06-01T08:00:00Z"}],
            "0.38.0": [{"upload_time_iso_8601": "2026-11-20T08:00:00Z"}],
            "0.39.0rc1": [{"upload_time_iso_8601": "2026-11-24T08:00:00Z"}],
            "0.40.0": [],
        }});
        let pin = Pin {
            name: "tinker",
            version: "0.16.1",
        };
        let release = standing(pin, &answer).unwrap();
        assert_eq!(release.version, "0.38.0");
        assert_eq!(release.behind, 2);
        assert_eq!(release.days, Some(314));
        let current = Pin {
            name: "tinker",
            version: "0.38.0",
        };
        assert_eq!(standing(current, &answer).unwrap().behind, 0);
    }
}
