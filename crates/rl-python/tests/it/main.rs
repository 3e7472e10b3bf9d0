//! The installed programs as a run's Python sees them, and their own unit tests.

mod adapter;
mod install;
mod unittests;
