//! A run's curves in the terminal: each main series as a sparkline over its steps with its last
//! value, minimum and maximum, numbers rounded to what a person reads (4 significant digits).
//! Pure text: `rl runs status`, `rl runs results` and `rl runs watch` print what this returns.

use rl_tools::MetricsView;

/// Columns of a sparkline; longer series are drawn as this many buckets.
pub(crate) const WIDTH: usize = 40;
const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// A step with no value (or a NaN, an infinity) in a series.
const GAP: char = ' ';

/// Reads one series' value from a step's numbers.
type Reader = fn(&MetricsView) -> Option<f64>;

/// The series people judge a run by, in the order shown: the reward, the loss, the share
/// correct (in training and held out), the held-out mean score and pass@n, and the two the
/// health digest watches (`logprobs/diff`, `advantages/std`).
const SERIES: [(&str, Reader); 8] = [
    ("reward_mean", |m| m.reward_mean),
    ("loss", |m| m.loss),
    ("percent_correct", |m| m.percent_correct),
    ("eval_percent_correct", |m| m.eval_percent_correct),
    ("eval_mean_score", |m| m.eval_mean_score),
    ("eval_pass_at_n", |m| m.eval_pass_at_n),
    ("logprobs_diff", |m| m.logprobs_diff),
    ("advantages_std", |m| m.advantages_std),
];

/// `value` to 4 significant digits: `1.008`, `0.4583`, `12350`, `1.235e-7`; NaN and the
/// infinities spelt out.
pub(crate) fn significant(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if value == 0.0 {
        return "0".to_owned();
    }
    let magnitude = value.abs().log10().floor() as i32;
    if !(-4..15).contains(&magnitude) {
        return format!("{value:.3e}");
    }
    if magnitude >= 3 {
        let unit = 10f64.powi(magnitude - 3);
        return format!("{:.0}", (value / unit).round() * unit);
    }
    let decimals = usize::try_from(3 - magnitude).unwrap_or(0);
    let text = format!("{value:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    };
    if text == "-0" { "0".to_owned() } else { text }
}

/// `values` as block characters scaled between their minimum and maximum, at most `width`
/// columns (each the mean of its bucket's steps); a missing or non-finite value is a gap.
pub(crate) fn sparkline(values: &[Option<f64>], width: usize) -> String {
    let finite = |value: &Option<f64>| value.filter(|v| v.is_finite());
    let columns: Vec<Option<f64>> = if values.len() <= width {
        values.iter().map(finite).collect()
    } else {
        (0..width)
            .map(|column| {
                let bucket =
                    &values[column * values.len() / width..(column + 1) * values.len() / width];
                let numbers: Vec<f64> = bucket.iter().filter_map(finite).collect();
                let count = numbers.len() as f64;
                (!numbers.is_empty()).then(|| numbers.iter().sum::<f64>() / count)
            })
            .collect()
    };
    let (low, high) = columns
        .iter()
        .flatten()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), v| {
            (low.min(*v), high.max(*v))
        });
    columns
        .iter()
        .map(|column| match column {
            None => GAP,
            Some(_) if high <= low => BLOCKS[(BLOCKS.len() - 1) / 2],
            Some(value) => {
                let index =
                    (((value - low) / (high - low)) * (BLOCKS.len() - 1) as f64).round() as usize;
                BLOCKS[index.min(BLOCKS.len() - 1)]
            }
        })
        .collect()
}

/// One line per series the run has logged: name, sparkline, last, min, max.
pub(crate) fn lines(history: &[MetricsView], width: usize) -> Vec<String> {
    SERIES
        .iter()
        .filter_map(|(name, read)| {
            let values: Vec<Option<f64>> = history.iter().map(read).collect();
            let numbers: Vec<f64> = values.iter().flatten().copied().collect();
            let last = *numbers.last()?;
            let finite = numbers.iter().copied().filter(|v| v.is_finite());
            let min = finite.clone().fold(f64::INFINITY, f64::min);
            let max = finite.fold(f64::NEG_INFINITY, f64::max);
            let (min, max) = if min <= max {
                (significant(min), significant(max))
            } else {
                ("-".to_owned(), "-".to_owned())
            };
            Some(format!(
                "{name:<20} {:<width$}  last {}  min {min}  max {max}",
                sparkline(&values, width),
                significant(last),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_a_person_reads_them() {
        let cases = [
            (1.008_000_000_000_000_2, "1.008"),
            (0.458_333_333, "0.4583"),
            (0.5, "0.5"),
            (2.0, "2"),
            (-0.000_123_456, "-0.0001235"),
            (12_345.6, "12350"),
            (999.96, "1000"),
            (9.999_95, "10"),
            (1.234_567e-7, "1.235e-7"),
            (6.02e23, "6.020e23"),
            (-0.0, "0"),
            (-1e-30, "-1.000e-30"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (value, expected) in cases {
            assert_eq!(significant(value), expected, "{value}");
        }
    }

    #[test]
    fn sparklines_scale_bucket_and_leave_gaps() {
        assert_eq!(sparkline(&[Some(0.0), Some(1.0)], 40), "▁█");
        assert_eq!(sparkline(&[Some(3.0)], 40), "▄");
        assert_eq!(sparkline(&[Some(2.0), Some(2.0), Some(2.0)], 40), "▄▄▄");
        assert_eq!(
            sparkline(&[Some(-1.0), None, Some(f64::NAN), Some(1.0)], 40),
            "▁  █"
        );
        assert_eq!(sparkline(&[], 40), "");
        let long: Vec<Option<f64>> = (0..1000).map(|i| Some(f64::from(i))).collect();
        let drawn = sparkline(&long, 40);
        assert_eq!(drawn.chars().count(), 40);
        assert!(drawn.starts_with('▁') && drawn.ends_with('█'), "{drawn}");
        assert_eq!(sparkline(&[None, None], 40), "  ");
    }

    #[test]
    fn only_logged_series_are_drawn() {
        let row = |reward: f64, loss: Option<f64>| MetricsView {
            step: None,
            reward_mean: Some(reward),
            loss,
            ..MetricsView::default()
        };
        let history = [
            row(0.1, Some(1.5)),
            row(0.3, None),
            row(0.2, Some(f64::NAN)),
        ];
        let drawn = lines(&history, 40);
        assert_eq!(drawn.len(), 2, "{drawn:#?}");
        assert!(drawn[0].starts_with("reward_mean"), "{drawn:#?}");
        assert!(
            drawn[0].ends_with("last 0.2  min 0.1  max 0.3"),
            "{drawn:#?}"
        );
        assert!(
            drawn[1].ends_with("last NaN  min 1.5  max 1.5"),
            "{drawn:#?}"
        );
        assert!(lines(&[], 40).is_empty());
    }
}
