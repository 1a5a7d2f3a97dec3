//! Hostile local users and clients against the pktfs binaries (issue "safe
//! to expose"): the control socket squatted, flooded and asked by another
//! user (runuser), images planted or opened by others, servers started in
//! unsafe ways. Each attack is asserted to get nothing. One test binary, a
//! module per interface.

#[path = "../cli_common/mod.rs"]
mod cli_common;
#[path = "../../../tests/tests/prereq/mod.rs"]
mod prereq;

mod control;
mod image;
mod serve;
