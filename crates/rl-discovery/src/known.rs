//! The environment base classes of atroposlib and verifiers, which are never scanned (they
//! live in a site-packages folder, not the environments tree), so the classes users derive
//! from are known by name.

use rl_settings::EnvironmentKind;

/// A base class environments derive from, known by name because its package is never
/// scanned (it lives in a site-packages folder, not the environments tree).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownBase {
    /// The module it is reported under.
    pub module: &'static str,
    pub class: &'static str,
    /// The config class an environment deriving from it uses unless it names another.
    pub config: &'static str,
    pub kind: EnvironmentKind,
}

/// atroposlib's `BaseEnv` and the abstract environments it ships on top of it
/// (`TeacherDistillationEnv` is in Atropos' repository after the 0.4.0 release; knowing it
/// costs nothing where it is absent), and verifiers' v1 `Taskset` (written `vf.Taskset`,
/// defined in `verifiers.v1.taskset`).
pub const KNOWN_ENV_BASES: &[KnownBase] = &[
    KnownBase {
        module: "atroposlib.envs.base",
        class: "BaseEnv",
        config: "BaseEnvConfig",
        kind: EnvironmentKind::Atropos,
    },
    KnownBase {
        module: "atroposlib.envs.teacher_distillation_env",
        class: "TeacherDistillationEnv",
        config: "TeacherDistillationConfig",
        kind: EnvironmentKind::Atropos,
    },
    KnownBase {
        module: "verifiers.v1",
        class: "Taskset",
        config: "TasksetConfig",
        kind: EnvironmentKind::VerifiersV1,
    },
];

/// The packages whose modules are never looked for in the scan: a reference into them is
/// theirs, whatever file of the tree shares a module's name.
pub(crate) fn is_known_package(first: &str) -> bool {
    KNOWN_ENV_BASES
        .iter()
        .any(|base| base.module.split('.').next() == Some(first))
}

/// Whether `name` imported from `module` (any module of the base's package: packages
/// re-export) is a known environment base. `module` is `None` for a bare, unbound name, taken
/// at its word only for atroposlib's (star imports of atroposlib were the original tool's
/// case; verifiers is always written `vf.Taskset`).
pub(crate) fn is_known_env_base(module: Option<&str>, name: &str) -> bool {
    KNOWN_ENV_BASES.iter().any(|base| {
        let package = base.module.split('.').next().unwrap_or(base.module);
        base.class == name
            && match module {
                None => base.kind == EnvironmentKind::Atropos,
                Some(m) => m == package || m.starts_with(&format!("{package}.")),
            }
    })
}

/// The qualified name under which a known base is reported.
pub(crate) fn qualified_known_base(name: &str) -> Option<String> {
    KNOWN_ENV_BASES
        .iter()
        .find(|base| base.class == name)
        .map(|base| format!("{}.{}", base.module, base.class))
}

/// The known base a qualified name ([`qualified_known_base`]) reports.
pub(crate) fn known_base(qualified: &str) -> Option<&'static KnownBase> {
    KNOWN_ENV_BASES.iter().find(|base| {
        qualified
            .strip_prefix(base.module)
            .and_then(|rest| rest.strip_prefix('.'))
            == Some(base.class)
    })
}

/// The config class a known base uses, by the qualified name [`qualified_known_base`] gives.
pub(crate) fn config_class_of(qualified: &str) -> Option<&'static str> {
    known_base(qualified).map(|base| base.config)
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
        assert!(is_known_env_base(Some("verifiers.v1"), "Taskset"));
        assert!(is_known_env_base(Some("verifiers.v1.taskset"), "Taskset"));
        assert!(!is_known_env_base(None, "Taskset"));
        assert!(!is_known_env_base(Some("mylib"), "Taskset"));
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
