//! CRC32C of short inputs: the records, dirents, attribute slots and
//! headers pktfs builds and checks on every operation (under
//! [`crate::FAST_MIN`] bytes), eight bytes per `crc32` instruction.
//!
//! Why not the `crc32c` crate here: its cost per call depends on where the
//! input lies. It takes the bytes before the first 8-byte boundary and after
//! the last one a byte at a time, and sets up its three-way interleave even
//! when there is nothing to interleave. A record built in a stack array
//! lands wherever the compiler puts it, so an unrelated change could double
//! the instructions of a small PUT's metadata CRCs; here they cost the same
//! wherever they lie (`bench/instructions.sh` counts them).
//!
//! The only `unsafe` in pktfs-layout is the one call below, into a function
//! compiled for SSE 4.2, made only after the CPU was seen to have it.
#![allow(unsafe_code)]

/// Continue a CRC32C (`crc` of the bytes before) over `bytes`.
#[inline]
pub(crate) fn append(crc: u32, bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: `sse42` is compiled for SSE 4.2 and this CPU has it
        // (detected just above); it touches nothing but `bytes`.
        return unsafe { sse42(crc, bytes) };
    }
    crc32c::crc32c_append(crc, bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn sse42(crc: u32, bytes: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};
    let mut c = u64::from(!crc);
    let mut rest = bytes;
    while let Some((word, tail)) = rest.split_first_chunk::<8>() {
        c = _mm_crc32_u64(c, u64::from_le_bytes(*word));
        rest = tail;
    }
    // The crc32 instruction keeps the CRC in the low 32 bits.
    let mut c = c as u32;
    // Records and slots are 60 bytes under their CRC: seven words and this.
    if let Some((word, tail)) = rest.split_first_chunk::<4>() {
        c = _mm_crc32_u32(c, u32::from_le_bytes(*word));
        rest = tail;
    }
    for &b in rest {
        c = _mm_crc32_u8(c, b);
    }
    !c
}

#[cfg(test)]
mod tests {
    /// Every length up to past the short range, at every alignment, from
    /// zero and from a running CRC, against the `crc32c` crate.
    #[test]
    fn matches_the_crate_at_every_length_and_alignment() {
        let data: Vec<u8> = (0..400u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for start in 0..8 {
            for n in 0..300 {
                let b = &data[start..start + n];
                assert_eq!(
                    super::append(0, b),
                    crc32c::crc32c(b),
                    "start {start} len {n}"
                );
                assert_eq!(
                    super::append(0x1234_5678, b),
                    crc32c::crc32c_append(0x1234_5678, b),
                    "start {start} len {n} from a running CRC"
                );
            }
        }
        assert_eq!(super::append(0, b"123456789"), 0xe306_9283);
    }
}
