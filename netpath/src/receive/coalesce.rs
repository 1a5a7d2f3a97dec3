//! Small pieces of a stream copied together into one record.
//!
//! Bytes become a record where they landed (one copy, kernel to image),
//! which costs a record per receive. A sender that trickles (a chunked
//! body in 1-byte chunks, a raw stream of 1-byte segments with pauses)
//! would then take a record per byte and exhaust the record table while
//! buffer space is free. Pieces below [`COALESCE_BELOW`] are therefore
//! copied into a reservation of their own ([`COALESCE_RESERVATION`]) and
//! made one piece (one record) when it is full, when a large piece comes
//! (which keeps the one-copy path), or when the stream or body ends: a
//! body in 1-byte chunks takes about as many records as it has 2 KiB.
//! A copy of under 2 KiB costs less than the record it saves.
//!
//! Such a record carries the receive time of its first byte as that
//! receive had it (the kernel's, flagged `FLAG_KERNEL_TIME`, or the clock,
//! not flagged): copying bytes does not make their time a clock reading.

use pktfs_fs::{RxBuf, RxPiece, RxTime, Volume};

/// Pieces shorter than this are copied together.
pub(crate) const COALESCE_BELOW: u32 = 2 << 10;
/// The reservation small pieces are copied into (less when free space is
/// fragmented; at least a buffer).
pub(crate) const COALESCE_RESERVATION: u32 = 32 << 10;

/// One stream's (or body's) coalescing reservation.
#[derive(Debug, Default)]
pub(crate) struct Coalescer<'v> {
    buf: Option<RxBuf<'v>>,
    /// First byte of the reservation not yet made a piece.
    from: u32,
    /// Receive time and stream position of that byte.
    ts: RxTime,
    seq: u64,
}

impl<'v> Coalescer<'v> {
    /// Bytes copied in and not yet made a piece.
    #[inline]
    pub(crate) fn pending(&self) -> u32 {
        self.buf.as_ref().map_or(0, |b| b.filled() - self.from)
    }

    /// Whether a piece of `k` bytes is better copied in than taken where
    /// it landed: a small one, or one that fits after a short run of
    /// small ones (which would otherwise be a short record of its own).
    #[inline]
    pub(crate) fn wants(&self, k: u32) -> bool {
        if k < COALESCE_BELOW {
            return true;
        }
        let p = self.pending();
        p > 0 && p < COALESCE_BELOW && self.buf.as_ref().is_some_and(|b| k <= b.spare())
    }

    /// Copy `bytes` (received at `ts`, stream position `seq`) in. Pieces
    /// made because the reservation filled are pushed to `out`; returns
    /// how many. Fails when no buffer space can be reserved.
    pub(crate) fn copy_in(
        &mut self,
        vol: &'v Volume,
        bytes: &[u8],
        ts: RxTime,
        seq: u64,
        out: &mut Vec<RxPiece<'v>>,
    ) -> pktfs_fs::Result<u32> {
        let mut made = 0;
        let mut at = 0usize;
        while at < bytes.len() {
            let spare = self.buf.as_ref().map_or(0, |b| b.spare());
            if spare == 0 {
                made += self.flush(out);
                self.buf = None;
                self.buf = Some(vol.rx_reserve(COALESCE_RESERVATION)?);
                self.from = 0;
                continue;
            }
            if self.pending() == 0 {
                self.ts = ts;
                self.seq = seq + at as u64;
            }
            let k = (spare as usize).min(bytes.len() - at);
            let b = self.buf.as_mut().expect("a reservation");
            b.append(&bytes[at..at + k]);
            at += k;
        }
        Ok(made)
    }

    /// Make what was copied in a piece (CRC, write-back), pushed to `out`.
    /// Returns the pieces made (0 or 1).
    pub(crate) fn flush(&mut self, out: &mut Vec<RxPiece<'v>>) -> u32 {
        let n = self.pending();
        let Some(b) = self.buf.as_ref() else { return 0 };
        if n == 0 {
            return 0;
        }
        out.push(b.piece(self.from, n, self.ts, self.seq));
        self.from = b.filled();
        if b.spare() == 0 {
            self.buf = None;
            self.from = 0;
        }
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vol() -> Volume {
        Volume::in_memory(pktfs_layout::GeometryParams::for_size(16 << 20)).unwrap()
    }

    #[test]
    fn one_byte_pieces_become_few_records() {
        let v = vol();
        let mut c = Coalescer::default();
        let mut out = Vec::new();
        for i in 0..20_000u64 {
            assert!(c.wants(1));
            c.copy_in(&v, &[i as u8], RxTime::Kernel(i), i, &mut out)
                .unwrap();
        }
        c.flush(&mut out);
        let bytes: u64 = out.iter().map(|p| p.len() as u64).sum();
        assert_eq!(bytes, 20_000);
        assert!(
            out.len() as u64 <= 20_000 / COALESCE_RESERVATION as u64 + 2,
            "{} pieces",
            out.len()
        );
        assert_eq!(
            out[0].at(),
            RxTime::Kernel(0),
            "the first byte's receive time"
        );
        v.rx_abort(out);
    }

    #[test]
    fn large_pieces_keep_their_place_and_order() {
        let v = vol();
        let mut c = Coalescer::default();
        let mut out = Vec::new();
        assert!(!c.wants(COALESCE_BELOW));
        c.copy_in(&v, b"abc", RxTime::Clock(1), 0, &mut out)
            .unwrap();
        // After a short run of small ones, a large piece that fits joins.
        assert!(c.wants(COALESCE_BELOW));
        c.copy_in(&v, &[7u8; 2048], RxTime::Clock(2), 3, &mut out)
            .unwrap();
        assert!(!c.wants(COALESCE_BELOW), "a run of 2 KiB is a record");
        assert_eq!(c.flush(&mut out), 1);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), 2051);
        assert_eq!(c.flush(&mut out), 0, "nothing pending");
        v.rx_abort(out);
    }
}
