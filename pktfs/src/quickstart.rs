//! Helpers for `pktfs up`.

use std::path::Path;

/// Bytes available to an unprivileged user on the file system holding
/// `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let s = nix::sys::statvfs::statvfs(dir).map_err(std::io::Error::from)?;
    Ok((s.blocks_available() as u64).saturating_mul(s.fragment_size() as u64))
}
