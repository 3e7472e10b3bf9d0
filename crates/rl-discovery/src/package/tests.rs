use std::path::{Path, PathBuf};

use super::{PackageModule, package_module};

/// A tree of files (`path`, `source`) in a fresh folder, canonical (as the answers are).
fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    for (path, source) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, source).unwrap();
    }
    (dir, root)
}

/// The answer for a file that runs as `name` from `root`.
fn module(root: &Path, name: &str) -> PackageModule {
    PackageModule {
        root: root.to_path_buf(),
        name: name.to_owned(),
    }
}

const ATROPOS: &str = "from atroposlib.envs.base import BaseEnv\nimport os\n";

#[test]
fn a_single_file_environment_runs_as_a_script() {
    let (_dir, root) = tree(&[
        ("environments/plain_env.py", ATROPOS),
        ("environments/helpers.py", ""),
        (
            "environments/beside_env.py",
            "from helpers import h\nimport helpers\n",
        ),
        // Inside a package, but nothing in it needs the package.
        ("environments/pkg/__init__.py", ""),
        ("environments/pkg/env.py", ATROPOS),
    ]);
    for file in ["plain_env.py", "beside_env.py", "pkg/env.py"] {
        assert_eq!(
            package_module(&root.join("environments").join(file)),
            None,
            "{file}"
        );
    }
}

#[test]
fn a_relative_import_runs_the_file_in_its_package() {
    // Atropos's shape: `environments/` is no package, the environment's folder is one.
    let (_dir, root) = tree(&[
        ("atropos/environments/letters/__init__.py", ""),
        (
            "atropos/environments/letters/letters_env.py",
            "from .curriculum import levels\n",
        ),
        ("atropos/environments/letters/curriculum.py", ""),
        // The same without `__init__.py`: a namespace package.
        (
            "atropos/environments/words/words_env.py",
            "from . import data\n",
        ),
        ("atropos/environments/words/data.py", ""),
    ]);
    let environments = root.join("atropos/environments");
    assert_eq!(
        package_module(&environments.join("letters/letters_env.py")),
        Some(module(&environments, "letters.letters_env"))
    );
    assert_eq!(
        package_module(&environments.join("words/words_env.py")),
        Some(module(&environments, "words.words_env"))
    );
}

#[test]
fn the_root_holds_the_top_package_of_a_chain_of_packages() {
    let (_dir, root) = tree(&[
        ("tree/top/__init__.py", ""),
        ("tree/top/envs/__init__.py", ""),
        ("tree/top/envs/pkg/__init__.py", ""),
        (
            "tree/top/envs/pkg/env.py",
            "def f():\n    from .x import y\n",
        ),
        ("tree/top/envs/pkg/x.py", ""),
        // Two dots need the package above.
        ("tree/top/envs/common.py", ""),
        ("tree/loose/deep/env.py", "from ..common import c\n"),
        ("tree/loose/common.py", ""),
    ]);
    assert_eq!(
        package_module(&root.join("tree/top/envs/pkg/env.py")),
        Some(module(&root.join("tree"), "top.envs.pkg.env"))
    );
    assert_eq!(
        package_module(&root.join("tree/loose/deep/env.py")),
        Some(module(&root.join("tree"), "loose.deep.env"))
    );
}

#[test]
fn an_import_through_the_top_package_fixes_the_root() {
    let (_dir, root) = tree(&[
        (
            "checkout/environments/community/counting/counting_env.py",
            "from environments.community.counting.rewards import reward\n",
        ),
        ("checkout/environments/community/counting/rewards.py", ""),
        // `from top import name`, the name a module of it.
        (
            "checkout/environments/scoring_env.py",
            "from environments import shared\n",
        ),
        ("checkout/environments/shared.py", ""),
        // Only a sibling's import says so.
        (
            "checkout/environments/mixed/mixed_env.py",
            "from .parts import p\n",
        ),
        (
            "checkout/environments/mixed/parts.py",
            "from environments.shared import s\n",
        ),
    ]);
    let checkout = root.join("checkout");
    for (file, name) in [
        (
            "community/counting/counting_env.py",
            "environments.community.counting.counting_env",
        ),
        ("scoring_env.py", "environments.scoring_env"),
        ("mixed/mixed_env.py", "environments.mixed.mixed_env"),
    ] {
        assert_eq!(
            package_module(&checkout.join("environments").join(file)),
            Some(module(&checkout, name)),
            "{file}"
        );
    }
}

#[test]
fn a_folder_sharing_a_name_is_no_top_package_unless_the_module_is_in_it() {
    let (_dir, root) = tree(&[
        // `utils` is installed, not this folder; `environments.missing` is nowhere.
        (
            "utils/envs/env.py",
            "import utils\nfrom utils import nothing_here\n",
        ),
        (
            "environments/env.py",
            "from environments.missing import m\nimport environments\n",
        ),
    ]);
    assert_eq!(package_module(&root.join("utils/envs/env.py")), None);
    assert_eq!(package_module(&root.join("environments/env.py")), None);
}

#[test]
fn a_package_python_cannot_name_runs_as_a_script() {
    let (_dir, root) = tree(&[
        ("envs/my-pkg/env.py", "from .x import y\n"),
        ("envs/my-pkg/x.py", ""),
        ("envs/pkg/__init__.py", "from .env import E\n"),
        ("envs/pkg/broken.py", "from .x import (\n"),
    ]);
    assert_eq!(package_module(&root.join("envs/my-pkg/env.py")), None);
    // A package's `__init__.py` is no script; an unparsable file needs nothing.
    assert_eq!(package_module(&root.join("envs/pkg/__init__.py")), None);
    assert_eq!(package_module(&root.join("envs/pkg/broken.py")), None);
    assert_eq!(package_module(&root.join("envs/missing.py")), None);
}

#[test]
fn imports_that_go_round_in_circles_end() {
    let (_dir, root) = tree(&[
        ("envs/pkg/a.py", "from .b import x\n"),
        ("envs/pkg/b.py", "from .a import y\nfrom . import b\n"),
    ]);
    assert_eq!(
        package_module(&root.join("envs/pkg/a.py")),
        Some(module(&root.join("envs"), "pkg.a"))
    );
}

/// The fixtures the end-to-end tests train (`fixtures/tinker-atropos/atropos-checkout`).
#[test]
fn the_fixture_checkout_s_environments_run_as_modules() {
    let checkout = std::fs::canonicalize(
        rl_test_support::workspace_root().join("fixtures/tinker-atropos/atropos-checkout"),
    )
    .unwrap();
    let environments = checkout.join("environments");
    assert_eq!(
        package_module(&environments.join("vowels/vowels_env.py")),
        Some(module(&environments, "vowels.vowels_env"))
    );
    assert_eq!(
        package_module(&environments.join("community/letter_share/letter_share_env.py")),
        Some(module(
            &checkout,
            "environments.community.letter_share.letter_share_env"
        ))
    );
    // The older fixtures: a plain environment, and one importing through `tinker_atropos`.
    let tree =
        std::fs::canonicalize(rl_test_support::workspace_root().join("fixtures/tinker-atropos"))
            .unwrap();
    assert_eq!(
        package_module(&tree.join("tinker_atropos/environments/digits_env.py")),
        None
    );
    assert_eq!(
        package_module(&tree.join("tinker_atropos/environments/module_import.py")),
        Some(module(&tree, "tinker_atropos.environments.module_import"))
    );
}
