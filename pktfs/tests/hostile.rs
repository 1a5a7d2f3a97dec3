//! Hostile local users and clients against the pktfs binaries (issue "safe
//! to expose"): the control socket squatted, flooded and asked by another
//! user (runuser), images planted or opened by others, servers started in
//! unsafe ways. Each attack is asserted to get nothing. A submodule per
//! interface.

mod control;
mod image;
mod serve;
