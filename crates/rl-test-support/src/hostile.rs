//! Python sources built to break a parser: nesting deeper than any thread's stack. Every face
//! is tested against the same files, so they live here.

/// An environment that must still be listed beside the files below.
pub const GOOD_ENVIRONMENT: &str =
    "from atroposlib.envs.base import BaseEnv\n\n\nclass GoodEnv(BaseEnv):\n    name = \"good\"\n";

/// How many links each chain has: far past any limit, and enough to overflow an 8 MiB stack
/// when a syntax tree this deep is dropped.
const LINKS: usize = 150_000;

/// `(file name, source, what nests too deeply, line)`: one of each way a tree gets deep. The
/// third field is the `nesting` key of the skip reason.
pub fn deeply_nested_sources() -> Vec<(&'static str, String, &'static str, u32)> {
    let header = "import os\n\n";
    let chain = |body: String| format!("{header}x = {body}\n");
    let indented: String = (0..1_000)
        .map(|depth| format!("{}if x:\n", "\t".repeat(depth)))
        .chain(std::iter::once(format!("{}pass\n", "\t".repeat(1_000))))
        .collect();
    vec![
        (
            "sum.py",
            chain(format!("1{}", "+1".repeat(LINKS))),
            "expression",
            3,
        ),
        (
            "brackets.py",
            format!("{header}{}", "[".repeat(LINKS)),
            "brackets",
            3,
        ),
        (
            "unary.py",
            chain(format!("{}1", "-".repeat(LINKS))),
            "expression",
            3,
        ),
        (
            "attributes.py",
            chain(format!("a{}", ".b".repeat(LINKS))),
            "expression",
            3,
        ),
        (
            "calls.py",
            chain(format!("f{}", "()".repeat(LINKS))),
            "expression",
            3,
        ),
        (
            "negations.py",
            chain(format!("{}a", "not ".repeat(LINKS))),
            "expression",
            3,
        ),
        (
            "lambdas.py",
            chain(format!("{}1", "lambda: ".repeat(LINKS))),
            "expression",
            3,
        ),
        (
            "power.py",
            chain(format!("1{}", "**1".repeat(LINKS))),
            "expression",
            3,
        ),
        (
            "fstrings.py",
            chain(format!(
                "{}1{}",
                "f\"{".repeat(LINKS / 10),
                "}\"".repeat(LINKS / 10)
            )),
            "brackets",
            3,
        ),
        (
            "indented.py",
            format!("{header}{indented}"),
            "indentation",
            103,
        ),
    ]
}
