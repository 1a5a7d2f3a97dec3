//! Where each region of an image lies.
//!
//! ```text
//! 0      primary superblock (256 B, in a 4 KiB block)
//! 4096   backup superblock
//! 8192   journal: `journal_slots` slots of `journal_slot_bytes`
//!        inode table: `inode_count` inodes of 192 B          (4 KiB aligned)
//!        packet-metadata table: `record_count` records of 64 B (4 KiB aligned)
//!        packet-buffer region: `buffer_count` buffers          (4 KiB aligned)
//! ```

use crate::inode::INODE_SIZE;
use crate::{PmOffset, RecordId, RECORD_SIZE};

/// Journal slots in every image (what a slot holds is the journal
/// module's).
pub const JOURNAL_SLOTS: u32 = 16;
/// Bytes of one journal slot.
pub const JOURNAL_SLOT_BYTES: u32 = 1024;
pub const MIN_IMAGE_BYTES: u64 = 1 << 20;
pub const MIN_BUFFER_SIZE: u32 = 512;
pub const MAX_BUFFER_SIZE: u32 = 1 << 20;
const ALIGN: u64 = 4096;

/// What mkfs asks for.
#[derive(Clone, Debug)]
pub struct GeometryParams {
    pub image_len_bytes: u64,
    pub buffer_size_bytes: u32,
    /// `None`: one inode per 16 KiB of image (at least 64).
    pub inode_count: Option<u32>,
    /// `None`: one record per buffer plus two per inode (a dirent and a small file).
    pub record_count: Option<u64>,
}

impl GeometryParams {
    pub fn for_size(image_len_bytes: u64) -> GeometryParams {
        GeometryParams {
            image_len_bytes,
            buffer_size_bytes: 2048,
            inode_count: None,
            record_count: None,
        }
    }
}

/// The validated layout of an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub image_len_bytes: u64,
    pub buffer_size_bytes: u32,
    pub inode_count: u32,
    pub record_count: u64,
    pub buffer_count: u64,
    pub journal_offset: u64,
    pub journal_slots: u32,
    pub journal_slot_bytes: u32,
    pub inode_offset: u64,
    pub record_offset: u64,
    pub buffer_offset: u64,
}

fn align_up(v: u64, a: u64) -> Option<u64> {
    v.checked_add(a - 1).map(|x| x / a * a)
}

impl Geometry {
    /// Lay out an image. Errors are messages for a person running mkfs.
    pub fn compute(p: &GeometryParams) -> Result<Geometry, String> {
        let bs = p.buffer_size_bytes;
        if !bs.is_power_of_two() || !(MIN_BUFFER_SIZE..=MAX_BUFFER_SIZE).contains(&bs) {
            return Err(format!(
                "buffer size {bs} must be a power of two between {MIN_BUFFER_SIZE} and {MAX_BUFFER_SIZE}"
            ));
        }
        if p.image_len_bytes < MIN_IMAGE_BYTES {
            return Err(format!(
                "image size {} is below the minimum of {MIN_IMAGE_BYTES} bytes",
                p.image_len_bytes
            ));
        }
        let len = p.image_len_bytes / ALIGN * ALIGN;
        let inode_count = match p.inode_count {
            Some(n) => n,
            None => (len / (16 << 10)).clamp(64, u32::MAX as u64 - 1) as u32,
        };
        if inode_count < 2 {
            return Err("need at least 2 inodes (the root and one more)".into());
        }
        let journal_offset = 8192u64;
        let journal_bytes = JOURNAL_SLOTS as u64 * JOURNAL_SLOT_BYTES as u64;
        let inode_offset = align_up(journal_offset + journal_bytes, ALIGN).ok_or("overflow")?;
        // Inode table holds inode_count + 1 entries: index 0 is never used.
        let inode_bytes = (inode_count as u64 + 1)
            .checked_mul(INODE_SIZE as u64)
            .ok_or("too many inodes")?;
        let record_offset = align_up(inode_offset + inode_bytes, ALIGN).ok_or("too many inodes")?;
        if record_offset >= len {
            return Err(format!("{inode_count} inodes do not fit in {len} bytes"));
        }
        let remaining = len - record_offset;
        // Solve for buffers and records together when records are defaulted:
        // records = buffers + 2*inodes (+1 for the null record 0).
        let (record_count, buffer_count) = match p.record_count {
            Some(r) => {
                let rec_bytes = align_up(
                    r.checked_add(1).ok_or("overflow")? * RECORD_SIZE as u64,
                    ALIGN,
                )
                .ok_or("too many records")?;
                if rec_bytes >= remaining {
                    return Err(format!("{r} records do not fit in the image"));
                }
                (r, (remaining - rec_bytes) / bs as u64)
            }
            None => {
                let fixed = (2 * inode_count as u64 + 1) * RECORD_SIZE as u64 + ALIGN;
                if fixed >= remaining {
                    return Err("image too small for its inodes".into());
                }
                let buffers = (remaining - fixed) / (bs as u64 + RECORD_SIZE as u64);
                (buffers + 2 * inode_count as u64, buffers)
            }
        };
        let record_bytes = (record_count + 1) * RECORD_SIZE as u64;
        let buffer_offset = align_up(record_offset + record_bytes, ALIGN).ok_or("overflow")?;
        let buffer_count = buffer_count.min((len.saturating_sub(buffer_offset)) / bs as u64);
        if buffer_count < 4 {
            return Err("image too small: fewer than 4 packet buffers left".into());
        }
        if buffer_count > u32::MAX as u64 {
            return Err("too many buffers: use a larger --buffer-size".into());
        }
        let g = Geometry {
            image_len_bytes: len,
            buffer_size_bytes: bs,
            inode_count,
            record_count,
            buffer_count,
            journal_offset,
            journal_slots: JOURNAL_SLOTS,
            journal_slot_bytes: JOURNAL_SLOT_BYTES,
            inode_offset,
            record_offset,
            buffer_offset,
        };
        g.validate()?;
        Ok(g)
    }

    /// Check that the regions are in order, aligned, non-overlapping and
    /// inside the image, with checked arithmetic throughout (the values may
    /// come from a damaged image).
    pub fn validate(&self) -> Result<(), String> {
        let bs = self.buffer_size_bytes;
        if !bs.is_power_of_two() || !(MIN_BUFFER_SIZE..=MAX_BUFFER_SIZE).contains(&bs) {
            return Err(format!("buffer size {bs} is not a power of two in range"));
        }
        if self.journal_slots != JOURNAL_SLOTS || self.journal_slot_bytes != JOURNAL_SLOT_BYTES {
            return Err(format!(
                "journal of {} x {} bytes differs from this build's {} x {}",
                self.journal_slots, self.journal_slot_bytes, JOURNAL_SLOTS, JOURNAL_SLOT_BYTES
            ));
        }
        if self.inode_count < 2
            || self.record_count < 1
            || self.buffer_count < 1
            || self.buffer_count > u32::MAX as u64
        {
            return Err("inode, record or buffer count out of range".into());
        }
        let regions = [
            (
                "journal",
                self.journal_offset,
                JOURNAL_SLOTS as u64 * JOURNAL_SLOT_BYTES as u64,
            ),
            (
                "inode table",
                self.inode_offset,
                (self.inode_count as u64 + 1)
                    .checked_mul(INODE_SIZE as u64)
                    .ok_or("inode table overflows")?,
            ),
            (
                "record table",
                self.record_offset,
                self.record_count
                    .checked_add(1)
                    .and_then(|r| r.checked_mul(RECORD_SIZE as u64))
                    .ok_or("record table overflows")?,
            ),
            (
                "buffer region",
                self.buffer_offset,
                self.buffer_count
                    .checked_mul(bs as u64)
                    .ok_or("buffer region overflows")?,
            ),
        ];
        let mut end = 8192u64;
        for (name, off, len) in regions {
            if off % 64 != 0 {
                return Err(format!("{name} at {off} is not cache-line aligned"));
            }
            if off < end {
                return Err(format!(
                    "{name} at {off} overlaps the region before it (ends at {end})"
                ));
            }
            end = off
                .checked_add(len)
                .ok_or_else(|| format!("{name} overflows"))?;
        }
        if end > self.image_len_bytes {
            return Err(format!(
                "regions end at {end}, past the image length {}",
                self.image_len_bytes
            ));
        }
        Ok(())
    }

    pub fn inode_pos(&self, ino: u32) -> PmOffset {
        debug_assert!(ino >= 1 && ino <= self.inode_count);
        PmOffset(self.inode_offset + ino as u64 * INODE_SIZE as u64)
    }

    pub fn record_pos(&self, id: RecordId) -> PmOffset {
        debug_assert!(id.0 >= 1 && id.0 <= self.record_count);
        PmOffset(self.record_offset + id.0 * RECORD_SIZE as u64)
    }

    pub fn journal_slot_pos(&self, slot: u32) -> PmOffset {
        PmOffset(self.journal_offset + slot as u64 * self.journal_slot_bytes as u64)
    }

    /// Image offset of byte `buf_off` of buffer `buffer`.
    pub fn buffer_pos(&self, buffer: u32, buf_off: u32) -> PmOffset {
        PmOffset(
            self.buffer_offset + buffer as u64 * self.buffer_size_bytes as u64 + buf_off as u64,
        )
    }

    pub fn buffer_region_bytes(&self) -> u64 {
        self.buffer_count * self.buffer_size_bytes as u64
    }

    /// Is `id` a usable record index (not the null record, inside the table)?
    pub fn record_in_range(&self, id: u64) -> bool {
        id >= 1 && id <= self.record_count
    }

    pub fn ino_in_range(&self, ino: u64) -> bool {
        ino >= 1 && ino <= self.inode_count as u64
    }

    /// Does the slice `<buffer, buf_off, len>` lie inside the buffer region?
    pub fn slice_in_range(&self, buffer: u32, buf_off: u32, len: u32) -> bool {
        let start = buffer as u64 * self.buffer_size_bytes as u64 + buf_off as u64;
        match start.checked_add(len as u64) {
            Some(end) => (buffer as u64) < self.buffer_count && end <= self.buffer_region_bytes(),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fit_and_validate() {
        for size in [1u64 << 20, 8 << 20, 64 << 20, 4 << 30, 1 << 40] {
            let g = Geometry::compute(&GeometryParams::for_size(size)).unwrap();
            g.validate().unwrap();
            assert!(g.buffer_offset + g.buffer_region_bytes() <= size);
            assert!(g.record_count >= g.buffer_count);
            // Little waste: buffers use most of the space.
            assert!(
                g.buffer_region_bytes() as f64 > 0.80 * size as f64 || size < 16 << 20,
                "{size}: {g:?}"
            );
        }
    }

    #[test]
    fn rejects_bad_params() {
        let mut p = GeometryParams::for_size(64 << 20);
        p.buffer_size_bytes = 3000;
        assert!(Geometry::compute(&p).is_err());
        assert!(Geometry::compute(&GeometryParams::for_size(1000)).is_err());
        let mut p = GeometryParams::for_size(2 << 20);
        p.inode_count = Some(u32::MAX - 5);
        assert!(Geometry::compute(&p).is_err());
        let mut p = GeometryParams::for_size(2 << 20);
        p.record_count = Some(u64::MAX / 128);
        assert!(Geometry::compute(&p).is_err());
    }

    #[test]
    fn slice_bounds() {
        let g = Geometry::compute(&GeometryParams::for_size(8 << 20)).unwrap();
        let last = (g.buffer_count - 1) as u32;
        assert!(g.slice_in_range(last, 0, g.buffer_size_bytes));
        assert!(!g.slice_in_range(last, 1, g.buffer_size_bytes));
        assert!(g.slice_in_range(0, 100, 3 * g.buffer_size_bytes));
        assert!(!g.slice_in_range(u32::MAX, u32::MAX, u32::MAX));
    }
}
