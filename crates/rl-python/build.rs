//! `include_dir!` embeds `python/`, but cargo learns of no file it adds: a new module would be
//! left out of an incremental build. Watching the folder (cargo scans it whole) rebuilds the
//! crate when any file under it is added, removed or changed.

fn main() {
    println!("cargo:rerun-if-changed=python");
}
