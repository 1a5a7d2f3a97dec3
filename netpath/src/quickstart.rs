//! Helpers for `pktfs up`.

use std::path::Path;

/// Bytes available to an unprivileged user on the file system holding
/// `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let s = rustix::fs::statvfs(dir)?;
    Ok(s.f_bavail.saturating_mul(s.f_frsize))
}
