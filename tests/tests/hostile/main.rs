//! Hostile clients against the servers, in process (issue "safe to
//! expose"): each module tries one family of attacks and asserts the attack
//! gets nothing, stores nothing, and the server's memory, threads, records
//! and connections stay within their stated bounds (docs/SECURITY.md).
//! One test binary, a module per family.

#[path = "../net_common/mod.rs"]
mod net_common;
#[path = "../prereq/mod.rs"]
mod prereq;

mod access;
mod as_user;
mod bounds;
mod floods;
mod tiered_get;
mod trickle;
