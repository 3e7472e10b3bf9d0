//! atroposlib's own environment base classes. atroposlib is never scanned (it lives in a
//! site-packages folder, not the environments tree), so the classes users may derive from are
//! known by name.

/// `(module, class, its config class)`: `BaseEnv` itself, and the abstract environments
/// atroposlib ships on top of it. `TeacherDistillationEnv` is in Atropos' repository after the
/// 0.4.0 release; knowing it costs nothing where it is absent.
pub const KNOWN_ENV_BASES: &[(&str, &str, &str)] = &[
    ("atroposlib.envs.base", "BaseEnv", "BaseEnvConfig"),
    (
        "atroposlib.envs.teacher_distillation_env",
        "TeacherDistillationEnv",
        "TeacherDistillationConfig",
    ),
];

/// Whether `name` imported from `module` (any atroposlib module: packages may re-export) is one
/// of atroposlib's environment bases. `module` is `None` for a bare, unbound name.
pub(crate) fn is_known_env_base(module: Option<&str>, name: &str) -> bool {
    let in_atroposlib = module.is_none_or(|m| m == "atroposlib" || m.starts_with("atroposlib."));
    in_atroposlib && KNOWN_ENV_BASES.iter().any(|(_, class, _)| *class == name)
}

/// The qualified name under which a known base is reported.
pub(crate) fn qualified_known_base(name: &str) -> Option<String> {
    KNOWN_ENV_BASES
        .iter()
        .find(|(_, class, _)| *class == name)
        .map(|(module, class, _)| format!("{module}.{class}"))
}

/// The config class a known base uses, by the qualified name [`qualified_known_base`] gives.
pub(crate) fn config_class_of(qualified: &str) -> Option<&'static str> {
    KNOWN_ENV_BASES
        .iter()
        .find(|(module, class, _)| {
            qualified
                .strip_prefix(module)
                .and_then(|rest| rest.strip_prefix('.'))
                == Some(class)
        })
        .map(|(_, _, config)| *config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bases_are_recognised_from_any_atroposlib_module() {
        assert!(is_known_env_base(Some("atroposlib.envs.base"), "BaseEnv"));
        assert!(is_known_env_base(Some("atroposlib.envs"), "BaseEnv"));
        assert!(is_known_env_base(None, "TeacherDistillationEnv"));
        assert!(!is_known_env_base(Some("mylib.envs"), "BaseEnv"));
        assert!(!is_known_env_base(
            Some("atroposlib.envs.base"),
            "BaseEnvConfig"
        ));
    }

    #[test]
    fn config_class_by_qualified_name() {
        let qualified = qualified_known_base("TeacherDistillationEnv").unwrap();
        assert_eq!(
            config_class_of(&qualified),
            Some("TeacherDistillationConfig")
        );
        assert_eq!(
            config_class_of("atroposlib.envs.base.BaseEnv"),
            Some("BaseEnvConfig")
        );
    }
}
