//! Names the commit `rl --version` reports (`RL_COMMIT`): the checkout's `HEAD`, or `unknown`
//! outside a git checkout (a source archive).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=RL_COMMIT={commit}");
    // Built again when HEAD moves: HEAD itself and the branches, wherever this checkout (or
    // worktree) keeps them.
    // `refs/heads` as a folder: Cargo looks at every file in it, a branch's new loose ref too.
    let watched = ["HEAD", "packed-refs", "refs/heads"];
    // Only files that exist: Cargo reruns a build script on every build for a missing one
    // (a fresh clone keeps its branch in `packed-refs`, with no loose ref file).
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", name])
            && std::path::Path::new(&path).exists()
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
