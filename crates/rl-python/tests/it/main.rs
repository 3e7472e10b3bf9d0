//! The installed programs as a run's Python sees them, and their own unit tests.

mod adapter;
mod engine_busy;
mod install;
mod unittests;
