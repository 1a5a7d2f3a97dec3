//! The two superblocks, rewritten so that one valid copy exists at every
//! instant: below opening, recovery and the remote tier, which all write
//! them.

use pktfs_layout::superblock::{self, STATE_MOUNTED};
use pktfs_layout::Superblock;

use super::now_ns;
use crate::media::Pm;

/// Rewrite both superblocks. At any instant at least one copy must be valid,
/// so the copy that is *not* valid now (a crash tore it earlier) is written
/// first; when both are valid, the primary goes first and the backup keeps
/// the old state until the primary is durable.
pub(crate) fn write_superblocks(pm: &Pm, sb: &Superblock) {
    let b = sb.to_bytes();
    let backup_ok = Superblock::from_bytes(
        pm.slice(superblock::BACKUP_OFFSET, 256),
        superblock::BACKUP_OFFSET,
        pm.len(),
    )
    .is_ok();
    let order = if backup_ok {
        [superblock::PRIMARY_OFFSET, superblock::BACKUP_OFFSET]
    } else {
        [superblock::BACKUP_OFFSET, superblock::PRIMARY_OFFSET]
    };
    for off in order {
        pm.write(off, &b);
        pm.persist(off, 256);
    }
}

pub(crate) fn mark_mounted(pm: &Pm, sb: &mut Superblock) {
    sb.state = STATE_MOUNTED;
    sb.mount_count = sb.mount_count.saturating_add(1); // a hostile count must not overflow
    sb.last_mount_ns = now_ns() as u64;
    write_superblocks(pm, sb);
}
