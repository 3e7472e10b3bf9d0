//! `rl runs fork ID --step S [--set FIELD=VALUE]...` and `rl runs resume ID --steps +N`: their
//! arguments as a person types them, read before anything starts.

use clap::Args;
use rl_settings::Value;
use rl_tools::{Started, Tools};

use super::{CapArgs, Until};

#[derive(Debug, Args)]
pub(crate) struct ForkArgs {
    run_id: String,
    /// The step whose saved state (weights and optimizer) the new run continues from.
    #[arg(long, value_name = "S")]
    step: u64,
    /// A setting the new run changes, FIELD=VALUE (repeatable); VALUE is read as the field's
    /// type, as `rl config set` reads it.
    #[arg(long = "set", value_name = "FIELD=VALUE", value_parser = parse_setting)]
    settings: Vec<(String, String)>,
    /// Fork even though the environment's file changed since the run started.
    #[arg(long)]
    allow_changes: bool,
    /// Wait until the new run reaches this point before returning.
    #[arg(long, value_enum, value_name = "UNTIL")]
    wait: Option<Until>,
    /// Seconds `--wait` may take.
    #[arg(long, default_value_t = 1800.0)]
    timeout: f64,
    #[command(flatten)]
    caps: CapArgs,
}

/// Starts the fork `args` asks for; returns it with what `--wait` asks.
pub(crate) fn fork(tools: &Tools, args: ForkArgs) -> anyhow::Result<(Started, Option<Until>, f64)> {
    let ForkArgs {
        run_id,
        step,
        settings,
        allow_changes,
        wait,
        timeout,
        caps,
    } = args;
    let asked: Vec<(String, Value)> = settings
        .into_iter()
        .map(|(field, value)| (field, Value::Str(value)))
        .collect();
    let started = tools.fork_training(
        &tools.run_id(&run_id)?,
        step,
        &asked,
        allow_changes,
        &caps.into(),
    )?;
    Ok((started, wait, timeout))
}

/// `FIELD=VALUE`, split at the first `=` (a value may hold more).
pub(crate) fn parse_setting(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((field, value)) if !field.trim().is_empty() => {
            Ok((field.trim().to_owned(), value.to_owned()))
        }
        _ => Err(format!(
            "'{text}' is not FIELD=VALUE (e.g. --set learning_rate=1e-5)"
        )),
    }
}

/// `--steps +N` or `--steps N`: how many more steps an extension trains (its bounds are the
/// tools' to check, so every face refuses alike).
pub(crate) fn parse_extra_steps(text: &str) -> Result<u64, String> {
    let digits = text.trim().strip_prefix('+').unwrap_or(text.trim());
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(format!(
            "'{text}' is not a number of more steps: write +N with N at least 1 (e.g. --steps +3)"
        ));
    }
    digits
        .parse()
        .map_err(|_| format!("'{text}' is more steps than any run trains"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_steps_are_written_with_or_without_a_plus() {
        assert_eq!(parse_extra_steps("+3"), Ok(3));
        assert_eq!(parse_extra_steps("3"), Ok(3));
        assert_eq!(
            parse_extra_steps("+0"),
            Ok(0),
            "the tools refuse 0 with the bounds"
        );
        assert!(parse_extra_steps("-3").is_err());
        assert!(parse_extra_steps("+").is_err());
        assert!(parse_extra_steps("three").is_err());
        assert!(parse_extra_steps("+99999999999999999999999").is_err());
    }

    #[test]
    fn a_setting_is_split_at_its_first_equals_sign() {
        assert_eq!(
            parse_setting("learning_rate=1e-5"),
            Ok(("learning_rate".to_owned(), "1e-5".to_owned()))
        );
        assert_eq!(
            parse_setting("system_prompt=a=b"),
            Ok(("system_prompt".to_owned(), "a=b".to_owned()))
        );
        assert!(parse_setting("learning_rate").is_err());
        assert!(parse_setting("=1").is_err());
    }
}
