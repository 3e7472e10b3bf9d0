//! One test per rule of "derives from BaseEnv", each on a small tree written for it.

use rl_discovery::{ConfigClassSource, ScanOptions, scan};

use crate::tree;

fn env_classes(files: &[(&str, &[u8])]) -> Vec<String> {
    let dir = tree(files);
    let scan = crate::scan_recursive(dir.path());
    assert!(scan.skipped.is_empty(), "{:?}", scan.skipped);
    let mut classes: Vec<String> = scan
        .environments
        .into_iter()
        .map(|e| e.class_name)
        .collect();
    classes.sort();
    classes
}

const IMPORT: &[u8] = b"from atroposlib.envs.base import BaseEnv\n";

#[test]
fn direct_name_base() {
    assert_eq!(
        env_classes(&[(
            "a.py",
            b"from atroposlib.envs.base import BaseEnv\nclass A(BaseEnv): pass\n"
        )]),
        ["A"]
    );
}

#[test]
fn attribute_base_through_module_imports() {
    assert_eq!(
        env_classes(&[(
            "a.py",
            b"from atroposlib.envs import base\nimport atroposlib.envs.base as b2\nimport atroposlib.envs.base\n\
class A(base.BaseEnv): pass\nclass B(b2.BaseEnv): pass\nclass C(atroposlib.envs.base.BaseEnv): pass\n",
        )]),
        ["A", "B", "C"]
    );
}

#[test]
fn aliased_import() {
    assert_eq!(
        env_classes(&[("a.py", b"from atroposlib.envs.base import BaseEnv as AtroposBaseEnv\nclass A(AtroposBaseEnv): pass\n")]),
        ["A"]
    );
}

#[test]
fn earlier_class_in_the_same_file_but_not_a_later_one() {
    let files: &[(&str, &[u8])] = &[(
        "a.py",
        b"from atroposlib.envs.base import BaseEnv\nclass Early(Late): pass\nclass Late(BaseEnv): pass\nclass Child(Late): pass\nclass Grandchild(Child): pass\n",
    )];
    assert_eq!(env_classes(files), ["Child", "Grandchild", "Late"]);
}

#[test]
fn sibling_files_by_absolute_and_relative_import() {
    let files: &[(&str, &[u8])] = &[
        (
            "pkg/envs/a.py",
            b"from atroposlib.envs.base import BaseEnv\nclass AEnv(BaseEnv): pass\n",
        ),
        (
            "pkg/envs/b.py",
            b"from pkg.envs.a import AEnv\nclass BEnv(AEnv): pass\n",
        ),
        (
            "pkg/envs/c.py",
            b"from .a import AEnv as Parent\nclass CEnv(Parent): pass\n",
        ),
        (
            "pkg/envs/d.py",
            b"from . import b\nclass DEnv(b.BEnv): pass\n",
        ),
        (
            "pkg/envs/sub/e.py",
            b"from ..c import CEnv\nclass EEnv(CEnv): pass\n",
        ),
    ];
    assert_eq!(env_classes(files), ["AEnv", "BEnv", "CEnv", "DEnv", "EEnv"]);
}

#[test]
fn reexport_through_a_private_module_which_is_not_listed() {
    let files: &[(&str, &[u8])] = &[
        ("_common.py", b"from atroposlib.envs.base import BaseEnv\nclass MathBase(BaseEnv): pass\n"),
        ("gsm.py", b"from _common import MathBase, BaseEnv\nclass Gsm(MathBase): pass\nclass Direct(BaseEnv): pass\n"),
    ];
    assert_eq!(env_classes(files), ["Direct", "Gsm"]);
}

#[test]
fn atroposlib_subclasses_from_the_builtin_table() {
    assert_eq!(
        env_classes(&[(
            "t.py",
            b"from atroposlib.envs.teacher_distillation_env import TeacherDistillationEnv\nclass T(TeacherDistillationEnv): pass\n",
        )]),
        ["T"]
    );
}

#[test]
fn bare_base_env_without_import_counts_as_the_original_did() {
    assert_eq!(
        env_classes(&[(
            "a.py",
            b"from atroposlib.envs.base import *\nclass A(BaseEnv): pass\n"
        )]),
        ["A"]
    );
}

#[test]
fn a_base_env_from_another_library_is_not_atropos() {
    assert!(
        env_classes(&[(
            "a.py",
            b"from gymnasium.core import BaseEnv\nclass A(BaseEnv): pass\n"
        )])
        .is_empty()
    );
}

#[test]
fn import_cycles_end() {
    let files: &[(&str, &[u8])] = &[
        ("a.py", b"from b import B\nclass A(B): pass\n"),
        ("b.py", b"from a import A\nclass B(A): pass\n"),
    ];
    assert!(env_classes(files).is_empty());
}

#[test]
fn try_except_fallback_is_one_environment() {
    let files: &[(&str, &[u8])] = &[(
        "a.py",
        b"try:\n    from atroposlib.envs.base import BaseEnv\n    class A(BaseEnv): pass\nexcept ImportError:\n    class BaseEnv: pass\n    class A(BaseEnv): pass\nclass B(BaseEnv): pass\n",
    )];
    assert_eq!(env_classes(files), ["A", "B"]);
}

#[test]
fn generic_subscripted_base() {
    assert_eq!(
        env_classes(&[(
            "a.py",
            &[IMPORT, b"class A(BaseEnv[int], Generic[T]): pass\n"].concat()
        )]),
        ["A"]
    );
}

#[test]
fn config_class_comes_from_attribute_annotation_ancestor_or_default() {
    let dir = tree(&[
        ("p.py", b"from atroposlib.envs.base import BaseEnv\nclass P(BaseEnv):\n    env_config_cls = PConfig\n"),
        ("q.py", b"from p import P\nclass Q(P):\n    @classmethod\n    def config_init(cls) -> Tuple[QConfig, List[S]]: ...\n"),
        ("r.py", b"from q import Q\nclass R(Q): pass\n"),
        ("s.py", b"from atroposlib.envs.base import BaseEnv\nclass S(BaseEnv): pass\n"),
        ("t.py", b"from atroposlib.envs.teacher_distillation_env import TeacherDistillationEnv as T\nclass U(T): pass\n"),
    ]);
    let scan = scan(dir.path(), &ScanOptions::default()).unwrap();
    let config = |class: &str| {
        let env = scan
            .environments
            .iter()
            .find(|e| e.class_name == class)
            .unwrap();
        (
            env.config_class.clone(),
            env.config_class_source.clone(),
            env.has_config_init,
        )
    };
    assert_eq!(
        config("P"),
        ("PConfig".into(), ConfigClassSource::EnvConfigCls, false)
    );
    assert_eq!(
        config("Q"),
        (
            "QConfig".into(),
            ConfigClassSource::ConfigInitAnnotation,
            true
        )
    );
    assert_eq!(
        config("R"),
        (
            "QConfig".into(),
            ConfigClassSource::Inherited { from: "Q".into() },
            true
        )
    );
    assert_eq!(
        config("S"),
        ("BaseEnvConfig".into(), ConfigClassSource::Default, false)
    );
    assert_eq!(
        config("U"),
        (
            "TeacherDistillationConfig".into(),
            ConfigClassSource::Default,
            false
        )
    );
}

#[test]
fn ancestry_is_reported() {
    let dir = tree(&[(
        "a.py",
        b"from atroposlib.envs.base import BaseEnv as B\nclass A(B): pass\nclass C(A): pass\n",
    )]);
    let scan = scan(dir.path(), &ScanOptions::default()).unwrap();
    let c = scan.find("C").unwrap();
    assert_eq!(c.bases, ["A (a.py:2)", "atroposlib.envs.base.BaseEnv"]);
}

#[test]
fn config_class_and_config_init_are_located_across_files() {
    use rl_discovery::{ClassLocation, ClassTarget};
    let dir = tree(&[
        (
            "cfg.py",
            b"from atroposlib.envs.base import BaseEnvConfig\nfrom enum import Enum\nclass Mode(str, Enum):\n    A = 'a'\nclass PConfig(BaseEnvConfig):\n    mode: Mode = Mode.A\n",
        ),
        (
            "p.py",
            b"from atroposlib.envs.base import BaseEnv\nfrom cfg import PConfig\nclass P(BaseEnv):\n    env_config_cls = PConfig\n    @classmethod\n    def config_init(cls): ...\n",
        ),
        ("q.py", b"from p import P\nclass Q(P): pass\n"),
        ("s.py", b"from atroposlib.envs.base import BaseEnv\nclass S(BaseEnv): pass\n"),
    ]);
    let scan = scan(dir.path(), &ScanOptions::default()).unwrap();
    let q = scan.find("Q").unwrap();
    let config = ClassLocation {
        file: "cfg.py".into(),
        class_name: "PConfig".into(),
        line: 5,
    };
    assert_eq!(
        scan.config_class_target(q),
        Some(ClassTarget::Scanned(config.clone()))
    );
    assert_eq!(
        scan.config_init_location(q),
        Some(ClassLocation {
            file: "p.py".into(),
            class_name: "P".into(),
            line: 3
        })
    );
    assert_eq!(
        scan.class_bases(&config),
        [ClassTarget::External(
            "atroposlib.envs.base.BaseEnvConfig".into()
        )]
    );
    assert_eq!(
        scan.resolve_reference("cfg.py", "Mode"),
        Some(ClassTarget::Scanned(ClassLocation {
            file: "cfg.py".into(),
            class_name: "Mode".into(),
            line: 3
        }))
    );
    let mode = ClassLocation {
        file: "cfg.py".into(),
        class_name: "Mode".into(),
        line: 3,
    };
    assert_eq!(
        scan.class_bases(&mode),
        [
            ClassTarget::External("str".into()),
            ClassTarget::External("enum.Enum".into())
        ]
    );
    let s = scan.find("S").unwrap();
    assert_eq!(scan.config_class_target(s), None);
    assert_eq!(scan.config_init_location(s), None);
}
