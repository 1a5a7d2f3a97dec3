//! The direct reader's tests: one binary, a module per file.

mod c_example;
mod common;
mod race;
mod reads;
