//! Integration tests of rl-process: the store shared by several connections, process groups
//! stopped as a whole, components' output redacted on its way to their logs, and the processes
//! a run leaves outside its groups.

#![allow(clippy::unwrap_used)]

mod groups;
mod launcher;
mod probe;
mod store;
mod strays;
mod sweeps;
