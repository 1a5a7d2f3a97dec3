//! Shared helpers for the integration tests.

pub mod direct_words;
pub mod model;
