//! The file-descriptor limit: on the loops a connection costs one fd and
//! no thread, so RLIMIT_NOFILE is what bounds the connections.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Fds kept for everything but connections (the image, listeners, rings,
/// logs, the control socket, a mount).
pub const RESERVED_FDS: u64 = 64;

/// Raise the soft RLIMIT_NOFILE to the hard limit (as far as allowed).
/// Returns the soft limit in force afterwards.
pub fn raise_nofile() -> u64 {
    let lim = getrlimit(Resource::Nofile);
    let cur = lim.current.unwrap_or(u64::MAX);
    let max = lim.maximum;
    if lim.current.is_some() && max.is_none_or(|m| m > cur) {
        let want = Rlimit {
            current: max,
            maximum: max,
        };
        match setrlimit(Resource::Nofile, want) {
            Ok(()) => {}
            Err(e) => tracing::warn!("cannot raise RLIMIT_NOFILE from {cur}: {e}"),
        }
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Connections the loops take with `nofile` fds: one fd each.
pub fn connection_limit(nofile: u64) -> usize {
    nofile
        .saturating_sub(RESERVED_FDS)
        .clamp(1, usize::MAX as u64) as usize
}
