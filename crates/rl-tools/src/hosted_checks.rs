//! What a run at a Tinker service needs besides its key, checked by `rl doctor` and again
//! before a run starts (nothing is started when one fails): the service's host can be reached,
//! and the tokenizer rl's trainer loads can be had — a folder that holds one, the Hugging Face
//! cache, or the hub, reachable. Each finding names the setting to change.

use std::path::{Path, PathBuf};

use rl_settings::{HOSTED_TINKER_URL, Settings, Value};

use crate::reach::{self, Address, PROBE_LIMIT, Reach};

/// The SDK's own variable naming another service (`resolve_base_url`).
const BASE_URL_VARIABLE: &str = "TINKER_BASE_URL";
/// The hub transformers downloads from unless `HF_ENDPOINT` names another.
const HUB_URL: &str = "https://huggingface.co";

/// A finding: what was seen, or what was seen and the fix.
pub(crate) type Finding = Result<String, (String, String)>;

/// A variable as a run's processes see it: the operator's `child_environment` over rl's own.
fn run_variable(settings: &Settings, name: &str) -> Option<String> {
    settings
        .child_environment
        .get(name)
        .cloned()
        .or_else(|| std::env::var(name).ok())
        .filter(|value| !value.trim().is_empty())
}

/// The Tinker API a hosted run's trainer talks to, and the setting that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServiceUrl {
    pub(crate) url: String,
    pub(crate) named_by: String,
}

/// As the trainer resolves it: the run config's `tinker.base_url` (the operator's
/// `[locked.tinker] base_url`), else `TINKER_BASE_URL`, else the hosted Tinker.
pub(crate) fn service_url(settings: &Settings) -> ServiceUrl {
    if let Some(Value::Str(url)) = settings.locked.tinker.get("base_url")
        && !url.trim().is_empty()
    {
        return ServiceUrl {
            url: url.trim().trim_end_matches('/').to_owned(),
            named_by: "[locked.tinker] base_url in config.toml".to_owned(),
        };
    }
    if let Some(url) = run_variable(settings, BASE_URL_VARIABLE) {
        let named_by = if settings.child_environment.contains_key(BASE_URL_VARIABLE) {
            format!("{BASE_URL_VARIABLE} in [child_environment] of config.toml")
        } else {
            format!("{BASE_URL_VARIABLE} in rl's environment")
        };
        return ServiceUrl {
            url: url.trim().trim_end_matches('/').to_owned(),
            named_by,
        };
    }
    ServiceUrl {
        url: HOSTED_TINKER_URL.to_owned(),
        named_by: "the Tinker SDK's default (the hosted Tinker); [locked.tinker] base_url in \
                   config.toml names another service"
            .to_owned(),
    }
}

/// Whether the Tinker service's host answers a connection (and a TLS handshake for https).
pub(crate) fn service_check(settings: &Settings) -> Finding {
    let service = service_url(settings);
    let fix = format!(
        "if the address is wrong, correct it ({}); else check this machine's network (DNS, \
         firewall, proxy) and the service",
        service.named_by
    );
    let address = Address::of(&service.url).map_err(|problem| (problem, fix.clone()))?;
    match reach::probe(&address, &|name| run_variable(settings, name), PROBE_LIMIT) {
        Reach::Reached => Ok(format!(
            "{} reachable ({}{}; named by {})",
            service.url,
            address.authority(),
            if address.tls {
                ", TLS handshake passed"
            } else {
                ""
            },
            service.named_by
        )),
        Reach::ThroughProxy(variable) => Ok(format!(
            "{}: not probed, the SDK reaches it through the proxy in {variable}",
            service.url
        )),
        Reach::Unreachable(found) => Err((
            format!(
                "the Tinker service at {}: {found}; its URL is {}",
                service.url, service.named_by
            ),
            fix,
        )),
    }
}

/// The tokenizer rl's trainer loads (`env.tokenizer_name`, else `tinker.base_model`) as the
/// operator locked it, and the setting that holds it; `None` when neither is locked (each
/// environment's own default then).
fn tokenizer_name(settings: &Settings) -> Option<(String, &'static str)> {
    let text = |value: Option<&Value>| match value {
        Some(Value::Str(name)) if !name.trim().is_empty() => Some(name.trim().to_owned()),
        _ => None,
    };
    text(settings.locked_env_value("tokenizer_name"))
        .map(|name| (name, "[locked.env] tokenizer_name"))
        .or_else(|| {
            text(settings.locked.tinker.get("base_model"))
                .map(|name| (name, "[locked.tinker] base_model"))
        })
}

/// Whether the trainer can load its tokenizer: from a folder that holds one, from the Hugging
/// Face cache, or from the hub (reachable, and not switched off).
pub(crate) fn tokenizer_check(settings: &Settings) -> Finding {
    let Some((name, setting)) = tokenizer_name(settings) else {
        return Ok(
            "not locked: each environment's own tokenizer_name, loaded as the run \
                   starts"
                .to_owned(),
        );
    };
    let fix = format!(
        "set {setting} in config.toml to a folder holding the base model's tokenizer (and \
         [locked.tinker] base_model to the model's name at the service), or put {name} in the \
         Hugging Face cache on a machine that reaches the hub (`hf download {name}`)"
    );
    if !is_hub_name(&name) {
        let folder = Path::new(&name);
        return match folder_problem(folder) {
            None => Ok(format!("{name} (a folder, {setting})")),
            Some(problem) => Err((format!("{name} ({setting}): {problem}"), fix)),
        };
    }
    let cache = hub_cache(settings);
    if let Some(snapshot) = cached(&cache, &name) {
        return Ok(format!(
            "{name} ({setting}), in the Hugging Face cache ({})",
            snapshot.display()
        ));
    }
    let not_cached = format!(
        "{name} ({setting}) is a Hugging Face hub name, not in this machine's cache ({})",
        cache.display()
    );
    if let Some(variable) = ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"]
        .into_iter()
        .find(|variable| run_variable(settings, variable).is_some_and(|value| is_on(&value)))
    {
        return Err((
            format!("{not_cached}, and {variable} is set: the trainer cannot load it"),
            fix,
        ));
    }
    let hub = run_variable(settings, "HF_ENDPOINT").unwrap_or_else(|| HUB_URL.to_owned());
    let address =
        Address::of(&hub).map_err(|problem| (format!("HF_ENDPOINT: {problem}"), fix.clone()))?;
    match reach::probe(
        &address,
        &|variable| run_variable(settings, variable),
        PROBE_LIMIT,
    ) {
        Reach::Reached => Ok(format!(
            "{name} ({setting}), from the hub at {hub} (reachable)"
        )),
        Reach::ThroughProxy(variable) => Ok(format!(
            "{name} ({setting}), from the hub at {hub} through the proxy in {variable} (not probed)"
        )),
        Reach::Unreachable(found) => {
            Err((format!("{not_cached}, and the hub at {hub}: {found}"), fix))
        }
    }
}

/// A Hugging Face repository id (`name` or `owner/name`), as opposed to a path.
fn is_hub_name(name: &str) -> bool {
    let part = |part: &str| {
        !part.is_empty()
            && !part.starts_with(['.', '-'])
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    let parts: Vec<&str> = name.split('/').collect();
    parts.len() <= 2 && parts.iter().all(|p| part(p)) && !Path::new(name).is_dir()
}

/// Why `folder` holds no tokenizer transformers can load; `None` when it holds one.
fn folder_problem(folder: &Path) -> Option<String> {
    if !folder.is_absolute() {
        return Some(
            "a relative path, which a run's processes would read from their own working \
             folder: write it absolute"
                .to_owned(),
        );
    }
    if !folder.is_dir() {
        return Some("no such folder".to_owned());
    }
    let files = [
        "tokenizer.json",
        "tokenizer_config.json",
        "tokenizer.model",
        "vocab.json",
    ];
    if files.iter().any(|file| folder.join(file).is_file()) {
        None
    } else {
        Some(format!("the folder holds none of {}", files.join(", ")))
    }
}

/// The hub cache transformers reads, as huggingface_hub finds it.
fn hub_cache(settings: &Settings) -> PathBuf {
    if let Some(cache) = run_variable(settings, "HF_HUB_CACHE") {
        return PathBuf::from(cache);
    }
    if let Some(home) = run_variable(settings, "HF_HOME") {
        return Path::new(&home).join("hub");
    }
    let cache = run_variable(settings, "XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| run_variable(settings, "HOME").map(|home| Path::new(&home).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache.join("huggingface").join("hub")
}

/// A snapshot of `name` in `cache` that holds a tokenizer.
fn cached(cache: &Path, name: &str) -> Option<PathBuf> {
    let snapshots = cache
        .join(format!("models--{}", name.replace('/', "--")))
        .join("snapshots");
    std::fs::read_dir(snapshots)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|snapshot| folder_problem(snapshot).is_none())
}

fn is_on(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// Whether these checks apply: rl's own trainer (whose addresses and tokenizer rl knows) at a
/// Tinker service (not the local engine, whose model folder is checked as such).
pub(crate) fn applies(settings: &Settings, rls_trainer: bool) -> bool {
    rls_trainer && settings.needs_tinker_key()
}

/// What must hold before a hosted run of rl's trainer starts: the service reachable, the
/// tokenizer loadable; the first that fails, with its fix.
pub(crate) fn before_start(settings: &Settings, rls_trainer: bool) -> Result<(), String> {
    if !applies(settings, rls_trainer) {
        return Ok(());
    }
    let checks: [fn(&Settings) -> Finding; 2] = [service_check, tokenizer_check];
    for check in checks {
        if let Err((problem, fix)) = check(settings) {
            return Err(format!("{problem}; fix: {fix}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosted() -> Settings {
        let mut settings = Settings::default();
        settings
            .child_environment
            .insert("HF_HUB_OFFLINE".to_owned(), "1".to_owned());
        settings.child_environment.insert(
            "HF_HUB_CACHE".to_owned(),
            "/nonexistent/hub-cache".to_owned(),
        );
        settings
    }

    #[test]
    fn the_service_is_the_locked_url_else_the_sdks_variable_else_the_hosted_one() {
        let mut settings = Settings::default();
        settings.child_environment.insert(
            BASE_URL_VARIABLE.to_owned(),
            "http://127.0.0.1:9/".to_owned(),
        );
        let from_variable = service_url(&settings);
        assert_eq!(from_variable.url, "http://127.0.0.1:9");
        assert!(from_variable.named_by.contains("child_environment"));
        settings
            .locked
            .tinker
            .insert("base_url".to_owned(), "https://tinker.example.com/".into());
        let locked = service_url(&settings);
        assert_eq!(locked.url, "https://tinker.example.com");
        assert_eq!(locked.named_by, "[locked.tinker] base_url in config.toml");
        settings.locked.tinker.remove("base_url");
        settings.child_environment.clear();
        if std::env::var(BASE_URL_VARIABLE).is_err() {
            assert_eq!(service_url(&settings).url, HOSTED_TINKER_URL);
        }
    }

    #[test]
    fn a_refusing_service_is_named_with_its_setting() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let mut settings = hosted();
        settings.locked.tinker.insert(
            "base_url".to_owned(),
            format!("http://127.0.0.1:{port}").into(),
        );
        let (problem, fix) = service_check(&settings).unwrap_err();
        assert!(problem.contains(&format!("127.0.0.1:{port}")), "{problem}");
        assert!(problem.contains("connection refused"), "{problem}");
        assert!(problem.contains("[locked.tinker] base_url"), "{problem}");
        assert!(fix.contains("[locked.tinker] base_url"), "{fix}");
    }

    #[test]
    fn the_default_tokenizer_offline_and_not_cached_is_named_with_the_setting() {
        let (problem, fix) = tokenizer_check(&hosted()).unwrap_err();
        assert!(problem.contains("Qwen/Qwen3-8B"), "{problem}");
        assert!(problem.contains("HF_HUB_OFFLINE"), "{problem}");
        assert!(fix.contains("[locked.env] tokenizer_name"), "{fix}");
    }

    #[test]
    fn a_tokenizer_folder_must_exist_and_hold_a_tokenizer() {
        let folder = tempfile::tempdir().unwrap();
        let mut settings = hosted();
        let lock = |settings: &mut Settings, name: &str| {
            settings
                .locked
                .env
                .insert("tokenizer_name".to_owned(), name.into());
        };
        lock(
            &mut settings,
            &folder.path().join("missing").display().to_string(),
        );
        let (problem, _) = tokenizer_check(&settings).unwrap_err();
        assert!(problem.contains("no such folder"), "{problem}");
        lock(&mut settings, &folder.path().display().to_string());
        let (problem, _) = tokenizer_check(&settings).unwrap_err();
        assert!(problem.contains("holds none of"), "{problem}");
        std::fs::write(folder.path().join("tokenizer.json"), "{}").unwrap();
        assert!(tokenizer_check(&settings).is_ok());
    }

    #[test]
    fn a_cached_hub_tokenizer_needs_no_hub() {
        let cache = tempfile::tempdir().unwrap();
        let snapshot = cache.path().join("models--Qwen--Qwen3-8B/snapshots/abc");
        std::fs::create_dir_all(&snapshot).unwrap();
        std::fs::write(snapshot.join("tokenizer_config.json"), "{}").unwrap();
        let mut settings = hosted();
        settings.child_environment.insert(
            "HF_HUB_CACHE".to_owned(),
            cache.path().display().to_string(),
        );
        let found = tokenizer_check(&settings).unwrap();
        assert!(found.contains("in the Hugging Face cache"), "{found}");
    }

    #[test]
    fn hub_names_are_told_from_paths() {
        assert!(is_hub_name("Qwen/Qwen3-8B"));
        assert!(is_hub_name("gpt2"));
        assert!(!is_hub_name("/models/qwen"));
        assert!(!is_hub_name("./qwen"));
        assert!(!is_hub_name("a/b/c"));
    }
}
