//! Reading and replaying the redo journal: the one implementation that
//! recovery (open), fsck and `Commit::apply` share. Parsing and validating a
//! slot is `pktfs_layout::journal::parse_slot` (no I/O); this reads the slots
//! from a `Pm` and applies what they hold through it.

use pktfs_layout::journal::{is_link_word, parse_slot, Committed};
use pktfs_layout::{Corrupt, Geometry, PmOffset};

use crate::media::{ExclusivePm, Pm};

/// What one journal slot holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotView {
    pub slot: u32,
    pub at: PmOffset,
    /// `Ok(None)`: nothing committed. `Ok(Some(..))`: a committed operation
    /// to replay. `Err`: committed, but naming words that are not link
    /// words (only corruption does that; recovery refuses it, fsck
    /// discards it).
    pub state: Result<Option<Committed>, Corrupt>,
}

/// Every slot of the journal, parsed. `g` is a validated geometry, so every
/// slot lies inside `pm` when `pm` is at least the image length.
pub(crate) fn read_slots(pm: &Pm, g: &Geometry) -> Vec<SlotView> {
    (0..g.journal_slots)
        .map(|slot| {
            let at = g.journal_slot_pos(slot);
            let len = g.journal_slot_bytes as u64;
            let state = if at.0.checked_add(len).is_some_and(|e| e <= pm.len()) {
                parse_slot(pm.slice(at.0, len as usize), at, g)
            } else {
                Err(Corrupt::at(
                    "journal slot",
                    at,
                    "lies past the end of the image",
                ))
            };
            SlotView { slot, at, state }
        })
        .collect()
}

/// View `bytes`, read at image offset `off`, as if the committed stores
/// `stored(addr)` had been replayed (read-only opens and fsck -n leave the
/// journal alone and overlay it instead). `off` is 8-byte aligned, as every
/// structure holding link words is.
pub fn overlay(bytes: &mut [u8], off: u64, stored: impl Fn(u64) -> Option<u64>) {
    for (w, word) in bytes.chunks_exact_mut(8).enumerate() {
        if let Some(v) = stored(off + w as u64 * 8) {
            word.copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// Store each `(address, value)` and make the stores durable.
pub(crate) fn apply_stores(pm: &Pm, stores: &[(u64, u64)]) {
    for &(addr, value) in stores {
        pm.store_u64(addr, value);
        pm.flush(addr, 8);
    }
    pm.fence();
}

/// Replay a committed slot: apply its stores, persist them, then publish
/// `commit = 0`. Idempotent (absolute values), so a crash anywhere in it
/// only means it is replayed again. The stores are checked again against
/// the geometry and the mapping; `Err` (nothing written) if one is not a
/// link word inside the image.
pub(crate) fn replay_slot(
    pm: &Pm,
    g: &Geometry,
    slot: u32,
    stores: &[(u64, u64)],
) -> Result<(), Corrupt> {
    let at = g.journal_slot_pos(slot);
    let inside = |a: u64| a.checked_add(8).is_some_and(|e| e <= pm.len());
    if let Some(&(a, _)) = stores
        .iter()
        .find(|&&(a, _)| !is_link_word(a, g) || !inside(a))
    {
        return Err(Corrupt::at(
            "journal entry",
            at,
            format!("address {a:#x} is not a link word of this image"),
        ));
    }
    if slot >= g.journal_slots || !inside(at.0) {
        return Err(Corrupt::at("journal slot", at, "outside the journal"));
    }
    apply_stores(pm, stores);
    pm.publish_u64(at.0, 0);
    Ok(())
}

/// Discard a slot: publish `commit = 0` without applying anything (fsck,
/// for a committed slot that names words that are not link words).
pub(crate) fn clear_slot(pm: &Pm, g: &Geometry, slot: u32) -> Result<(), Corrupt> {
    replay_slot(pm, g, slot, &[])
}

/// Every slot of the journal, parsed (see `read_slots`), for a holder of
/// the whole image (fsck).
pub fn read_slots_excl(pm: &ExclusivePm<'_>, g: &Geometry) -> Vec<SlotView> {
    assert!(pm.is_whole(), "the journal needs the whole image");
    read_slots(pm.pm(), g)
}

/// Replay a committed slot (see `replay_slot`: apply, persist, clear), for
/// a holder of the whole image (fsck).
pub fn replay_slot_excl(
    pm: &mut ExclusivePm<'_>,
    g: &Geometry,
    slot: u32,
    stores: &[(u64, u64)],
) -> Result<(), Corrupt> {
    assert!(pm.is_whole(), "the journal needs the whole image");
    replay_slot(pm.pm(), g, slot, stores)
}

/// Discard a slot without applying it (see `clear_slot`), for a holder of
/// the whole image (fsck).
pub fn clear_slot_excl(pm: &mut ExclusivePm<'_>, g: &Geometry, slot: u32) -> Result<(), Corrupt> {
    assert!(pm.is_whole(), "the journal needs the whole image");
    clear_slot(pm.pm(), g, slot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pktfs_layout::GeometryParams;

    #[test]
    fn replay_applies_clears_and_refuses_words_that_are_not_links() {
        let g = Geometry::compute(&GeometryParams::for_size(2 << 20)).unwrap();
        let mut pm = Pm::from_bytes(vec![0u8; g.image_len_bytes as usize]);
        let before = pm.snapshot();
        assert!(replay_slot(&pm, &g, 0, &[(g.buffer_offset, 1)]).is_err());
        assert!(pm.snapshot() == before, "a refused replay wrote");
        let link = g.record_offset + 64;
        pm.publish_u64(g.journal_slot_pos(2).0, pktfs_layout::journal::COMMIT_MAGIC);
        replay_slot(&pm, &g, 2, &[(link, 5)]).unwrap();
        assert_eq!(pm.slice(link, 8), &5u64.to_le_bytes());
        assert_eq!(pm.slice(g.journal_slot_pos(2).0, 8), &[0u8; 8], "cleared");
        assert!(read_slots(&pm, &g).iter().all(|v| v.state == Ok(None)));
    }
}
