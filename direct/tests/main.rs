//! The direct reader's tests: one binary, a module per file.

mod common;
mod race;
mod reads;
