//! Filling a command template from the operator's settings with one run's values.

use std::collections::BTreeMap;

use crate::ProcessError;
use crate::state::Component;

/// The values a template may use, by placeholder name (without braces).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateValues(BTreeMap<&'static str, String>);

impl TemplateValues {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.0.insert(name, value.into());
        self
    }
}

/// `template` with every `{name}` replaced, argument by argument. The first argument is the
/// program. A value is inserted as it is and never expanded again, so a path holding braces
/// stays that path.
pub fn render(
    component: Component,
    template: &[String],
    values: &TemplateValues,
) -> Result<Vec<String>, ProcessError> {
    if template
        .first()
        .is_none_or(|program| program.trim().is_empty())
    {
        return Err(ProcessError::Launch {
            component,
            reason: "its command template is empty; set commands in the operator config".to_owned(),
        });
    }
    template
        .iter()
        .map(|argument| render_one(component, argument, values))
        .collect()
}

fn render_one(
    component: Component,
    argument: &str,
    values: &TemplateValues,
) -> Result<String, ProcessError> {
    let mut out = String::with_capacity(argument.len());
    let mut rest = argument;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(unknown(component, argument, "an unclosed '{'", values));
        };
        let name = &after[..close];
        match values.0.get(name) {
            Some(value) => out.push_str(value),
            None => {
                return Err(unknown(
                    component,
                    argument,
                    &format!("'{{{name}}}'"),
                    values,
                ));
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn unknown(
    component: Component,
    argument: &str,
    what: &str,
    values: &TemplateValues,
) -> ProcessError {
    let known: Vec<String> = values.0.keys().map(|k| format!("{{{k}}}")).collect();
    ProcessError::Launch {
        component,
        reason: format!(
            "its command template argument '{argument}' has {what}; known placeholders: {}",
            known.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> TemplateValues {
        TemplateValues::new()
            .with("python", "/venv/bin/python")
            .with("api_port", "41234")
            .with("config", "/state/runs/0badc0de/config {x}.yaml")
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn default_api_command_renders() {
        let api = rl_settings::Commands::default().api;
        let rendered = render(Component::Api, &api, &values()).unwrap();
        assert_eq!(
            rendered,
            strings(&[
                "/venv/bin/python",
                "-m",
                "atroposlib.cli.run_api",
                "--host",
                "127.0.0.1",
                "--port",
                "41234"
            ])
        );
    }

    #[test]
    fn values_are_not_expanded_again() {
        let rendered = render(
            Component::Trainer,
            &strings(&["{python}", "--config={config}"]),
            &values(),
        )
        .unwrap();
        assert_eq!(rendered[1], "--config=/state/runs/0badc0de/config {x}.yaml");
    }

    #[test]
    fn unknown_placeholders_and_empty_templates_are_clear_errors() {
        let error = render(
            Component::Env,
            &strings(&["{python}", "{env_fiel}"]),
            &values(),
        )
        .unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("'{env_fiel}'") && text.contains("{api_port}"),
            "{text}"
        );
        let error = render(Component::Env, &strings(&["{python", "x"]), &values()).unwrap_err();
        assert!(error.to_string().contains("unclosed"), "{error}");
        assert!(render(Component::Api, &[], &values()).is_err());
        assert!(render(Component::Api, &strings(&["  "]), &values()).is_err());
    }
}
