//! Integration tests of rl-metrics: the WandB API against a local mock server, WandB run files
//! written by the real wandb SDK, and metrics files.

#![allow(clippy::unwrap_used)]

mod jsonl;
mod wandb_api;
mod wandb_file;
