//! Lists the environments of a folder: `cargo run -p rl-discovery --example scan -- DIR`.
//! The crate's documentation shows this file; `cargo test` and clippy build it, so the
//! example cannot drift from the API (it replaced a doc test and the doc build it cost).

#![allow(clippy::print_stdout)]

fn main() -> Result<(), rl_discovery::DiscoveryError> {
    let folder = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "tinker_atropos/environments".into());
    let scan = rl_discovery::scan(folder.as_ref(), &rl_discovery::ScanOptions::default())?;
    for env in &scan.environments {
        println!("{} ({}:{})", env.name, env.file, env.line);
    }
    if let Ok(gsm8k) = scan.find("gsm8k") {
        println!("gsm8k is {}", gsm8k.name);
    }
    Ok(())
}
