//! `cargo xtask vendor`: the front-end library the run pages ship inside the binary (uPlot,
//! MIT), fetched from the npm registry, checked against the digest the registry publishes
//! for that version, and unpacked into `crates/rl-cli/assets/vendor/uplot/`; `--check` (also
//! part of `cargo xtask test --check`) verifies that the committed files are those.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256, Sha512};

use crate::run_command;

/// The version the pages are written against.
const TARBALL: &str = "https://registry.npmjs.org/uplot/-/uplot-1.6.32.tgz";
/// The registry's `dist.integrity` of that tarball (`sha512-KIMV…`), in hex.
const TARBALL_SHA512: &str = "2883159c6ebccefbb95d751b0b82d010f9e1c0ec41b8bc96d401eda66e882935c89a46cb824332fa369b8cb8122cc6ac36e186cd09bf7a9ded3a4c93c6989023";
/// Where the files go, from the workspace root.
const FOLDER: &str = "crates/rl-cli/assets/vendor/uplot";
/// Each file taken from the tarball (`package/…`), and its SHA-256.
const FILES: [(&str, &str, &str); 3] = [
    (
        "package/dist/uPlot.iife.min.js",
        "uPlot.iife.min.js",
        "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f",
    ),
    (
        "package/dist/uPlot.min.css",
        "uPlot.min.css",
        "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04",
    ),
    (
        "package/LICENSE",
        "LICENSE",
        "8f989229699b4fe2f1a0432d0e9edc338a8a911e250e2d1b01ecd770a5f5b1bd",
    ),
];

#[derive(clap::Args)]
pub(crate) struct VendorArgs {
    /// Only verify the committed files.
    #[arg(long)]
    check: bool,
}

pub(crate) fn run(root: &Path, args: &VendorArgs) -> anyhow::Result<()> {
    if args.check {
        return check(root);
    }
    let work = tempfile::tempdir()?;
    let tarball = work.path().join("uplot.tgz");
    // curl and tar are on every machine this builds on; the digest below is what is trusted.
    run_command(
        Command::new("curl")
            .args([
                "--fail",
                "--silent",
                "--show-error",
                "--location",
                "--output",
            ])
            .arg(&tarball)
            .arg(TARBALL),
    )?;
    let bytes = std::fs::read(&tarball)?;
    let digest = hex(&Sha512::digest(&bytes));
    if digest != TARBALL_SHA512 {
        bail!("{TARBALL} has SHA-512 {digest}, not the registry's {TARBALL_SHA512}");
    }
    run_command(
        Command::new("tar")
            .arg("-xzf")
            .arg(&tarball)
            .arg("-C")
            .arg(work.path()),
    )?;
    let folder = root.join(FOLDER);
    std::fs::create_dir_all(&folder)?;
    for (from, to, _) in FILES {
        std::fs::copy(work.path().join(from), folder.join(to))
            .with_context(|| format!("{from} is not in the tarball"))?;
    }
    check(root)?;
    eprintln!("vendored {TARBALL} into {FOLDER}");
    Ok(())
}

/// The committed files are the pinned ones.
pub(crate) fn check(root: &Path) -> anyhow::Result<()> {
    for (_, file, expected) in FILES {
        let path = root.join(FOLDER).join(file);
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let digest = hex(&Sha256::digest(&bytes));
        if digest != expected {
            bail!(
                "{} is not the vendored file (SHA-256 {digest}, expected {expected}); run `cargo xtask vendor`",
                path.display()
            );
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}
