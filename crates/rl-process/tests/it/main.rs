//! Integration tests of rl-process: the store shared by several connections, and process
//! groups stopped as a whole.

#![allow(clippy::unwrap_used)]

mod groups;
mod launcher;
mod store;
