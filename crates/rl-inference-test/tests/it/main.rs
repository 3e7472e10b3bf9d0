//! Integration tests of rl-inference-test.
