//! Integration tests of rl-settings: the layering of the operator's settings, and secrets.

#![allow(clippy::unwrap_used)]

mod settings_and_secrets;
