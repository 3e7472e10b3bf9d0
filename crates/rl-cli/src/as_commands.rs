//! The agents' tools as the commands people type. The operations' messages name the tools
//! (agents read them, over MCP and HTTP), as a bare name (`rl_check_status`), with its
//! parameters' names (`rl_check_status(run_id)`) or as a call (`rl_fork_training {"run_id":
//! "a1b2", "step": 4}`); a person at the shell is told the command instead, filled from the
//! call's arguments. `--json` output keeps the tools' words, as the agents' answers do.

use serde_json::Value;

/// Each tool's command: `{parameter}` is filled from the call's arguments (in capitals when
/// the message names the tool bare), and a `[...]` part is said only when the call gives its
/// parameter.
const COMMANDS: [(&str, &str); 25] = [
    ("rl_select_environment", "rl select {name}"),
    ("rl_get_current_config", "rl config show"),
    ("rl_edit_config", "rl config set {field} {value}"),
    ("rl_start_training", "rl runs start"),
    ("rl_check_status", "rl runs status {run_id}"),
    (
        "rl_wait_training",
        "rl runs wait {run_id}[ --until {until}]",
    ),
    ("rl_stop_training", "rl runs stop {run_id}"),
    (
        "rl_resume_training",
        "rl runs resume {run_id}[ --steps {steps}]",
    ),
    ("rl_fork_training", "rl runs fork {run_id} --step {step}"),
    ("rl_start_sweep", "rl sweep start"),
    ("rl_check_sweep", "rl sweep status {sweep_id}"),
    ("rl_stop_sweep", "rl sweep stop {sweep_id}"),
    ("rl_get_results", "rl runs results {run_id}"),
    ("rl_list_runs", "rl runs list"),
    ("rl_list_checkpoints", "rl checkpoints list {run_id}"),
    ("rl_test_inference", "rl preflight"),
    ("rl_stop_test", "rl preflight stop {test_id}"),
    ("rl_compare_training", "rl compare {run_id}"),
    (
        "rl_list_environments",
        "rl envs list[ --recursive{recursive}]",
    ),
    ("rl_install_environment", "rl setup --env {name}"),
    (
        "rl_export_checkpoint",
        "rl checkpoints export {run_id} {step} DIR[ --merged{merged}]",
    ),
    ("rl_serve_checkpoint", "rl checkpoints serve {run_id}"),
    ("rl_list_served", "rl checkpoints served"),
    ("rl_stop_serving", "rl checkpoints stop {serve_id}"),
    ("rl_health_check", "rl doctor"),
];

/// `text` with every tool it names replaced by the command a person types.
pub(crate) fn for_people(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("rl_") {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let starts_a_word = out
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let name_len = from
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(from.len());
        let (name, after) = from.split_at(name_len);
        match COMMANDS.iter().find(|(tool, _)| *tool == name) {
            Some((_, command)) if starts_a_word => {
                let (arguments, after) = call_arguments(after);
                out.push('`');
                out.push_str(&filled(command, arguments.as_ref()));
                out.push('`');
                rest = after;
            }
            _ => {
                out.push_str(name);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The arguments of a call written after a tool's name (` {"run_id": "a1"}`), or none for a
/// bare name or one followed by its parameters' names (`(run_id)`, consumed); and the text
/// after them.
fn call_arguments(after: &str) -> (Option<serde_json::Map<String, Value>>, &str) {
    if let Some(names) = after.strip_prefix('(') {
        if let Some(end) = names.find(')') {
            let listed = &names[..end];
            if listed
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c == ',' || c == ' ')
            {
                return (None, &names[end + 1..]);
            }
        }
        return (None, after);
    }
    let trimmed = after.trim_start_matches(' ');
    if !trimmed.starts_with('{') {
        return (None, after);
    }
    let mut values = serde_json::Deserializer::from_str(trimmed).into_iter::<Value>();
    match values.next() {
        Some(Ok(Value::Object(arguments))) => {
            let end = values.byte_offset();
            (Some(arguments), &trimmed[end..])
        }
        _ => (None, after),
    }
}

/// `command` with its parameters filled from `arguments` (see [`COMMANDS`]).
fn filled(command: &str, arguments: Option<&serde_json::Map<String, Value>>) -> String {
    let mut out = String::new();
    let mut rest = command;
    while let Some(open) = rest.find('[') {
        out.push_str(&placeholders(&rest[..open], arguments));
        let Some(close) = rest[open..].find(']') else {
            break;
        };
        let optional = &rest[open + 1..open + close];
        let names = parameters(optional);
        let said = !names.is_empty()
            && names
                .iter()
                .all(|name| arguments.is_some_and(|arguments| given(arguments.get(*name))));
        if said {
            out.push_str(&placeholders(optional, arguments));
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(&placeholders(rest, arguments));
    out
}

/// Whether an argument says something a command line spells (a flag's `true`, a value).
fn given(value: Option<&Value>) -> bool {
    !matches!(value, None | Some(Value::Null | Value::Bool(false)))
}

/// The `{parameter}` names in `part`.
fn parameters(part: &str) -> Vec<&str> {
    part.split('{')
        .skip(1)
        .filter_map(|piece| piece.split_once('}').map(|(name, _)| name))
        .collect()
}

/// `part` with each `{parameter}` its argument's value (a flag's `true` is the flag alone),
/// else its name in capitals.
fn placeholders(part: &str, arguments: Option<&serde_json::Map<String, Value>>) -> String {
    let mut out = String::new();
    let mut rest = part;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let name = &rest[open + 1..open + close];
        match arguments.and_then(|arguments| arguments.get(name)) {
            Some(Value::String(text)) => out.push_str(text),
            Some(Value::Bool(true)) => {}
            Some(value) => out.push_str(&value.to_string()),
            None => out.push_str(&name.to_uppercase()),
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::for_people;

    #[test]
    fn people_are_told_commands_where_agents_are_told_tools() {
        assert_eq!(
            for_people(
                "select one first (rl_select_environment); follow it with \
                 rl_check_status(run_id), or stop it (rl_stop_training)"
            ),
            "select one first (`rl select NAME`); follow it with `rl runs status RUN_ID`, or \
             stop it (`rl runs stop RUN_ID`)"
        );
    }

    #[test]
    fn a_call_is_told_as_its_command_with_its_arguments() {
        assert_eq!(
            for_people(
                r#"fork it: rl_fork_training {"run_id": "a1b2", "step": 4} (rl_list_checkpoints {"run_id": "a1b2"} lists them)"#
            ),
            "fork it: `rl runs fork a1b2 --step 4` (`rl checkpoints list a1b2` lists them)"
        );
        assert_eq!(
            for_people(r#"give it more: rl_resume_training {"run_id": "a1", "steps": "+N"}"#),
            "give it more: `rl runs resume a1 --steps +N`"
        );
        // An optional part is said only when its parameter is given.
        assert_eq!(
            for_people(r#"rl_resume_training {"run_id": "a1"}, rl_wait_training"#),
            "`rl runs resume a1`, `rl runs wait RUN_ID`"
        );
        assert_eq!(
            for_people(r#"rl_list_environments {"recursive": true} lists them"#),
            "`rl envs list --recursive` lists them"
        );
        assert_eq!(
            for_people(r#"set it: rl_edit_config {"field": "max_token_length", "value": 2048}."#),
            "set it: `rl config set max_token_length 2048`."
        );
    }

    #[test]
    fn every_tool_has_its_command() {
        for tool in rl_tools::TOOL_NAMES {
            assert!(
                super::COMMANDS.iter().any(|(name, _)| *name == tool),
                "{tool} has no command in COMMANDS: a message naming it would reach people as \
                 the tool's name"
            );
        }
    }

    #[test]
    fn what_is_no_tool_or_no_call_is_left_as_it_is() {
        for (text, told) in [
            ("rl_no_such_tool {\"a\": 1}", "rl_no_such_tool {\"a\": 1}"),
            ("curl_check_status", "curl_check_status"),
            ("rl_", "rl_"),
            ("", ""),
            // A tool followed by what is no call: the tool told bare, the rest as it was.
            (
                "rl_stop_test {not json",
                "`rl preflight stop TEST_ID` {not json",
            ),
            (
                "ends with rl_stop_test(",
                "ends with `rl preflight stop TEST_ID`(",
            ),
        ] {
            assert_eq!(for_people(text), told, "{text}");
        }
    }
}
