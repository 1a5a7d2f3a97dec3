//! What the tests with thousands of connections against a `pktfs serve`
//! child need: the fd limit raised, and io_uring usable here.
#![allow(dead_code)]

/// Raise this process's soft RLIMIT_NOFILE to the hard limit; the soft
/// limit in force afterwards.
pub fn raise_nofile() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let l = getrlimit(Resource::Nofile);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: l.maximum,
            maximum: l.maximum,
        },
    );
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Whether io_uring's loops can run in this process (for `require!`).
pub fn uring_usable() -> Result<(), String> {
    netpath::uring::choose(netpath::IoMode::Uring, 1)
        .map(|_| ())
        .map_err(|e| format!("io_uring is not usable in this process: {e}"))
}
