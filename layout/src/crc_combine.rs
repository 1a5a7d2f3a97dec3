//! CRC combination: the CRC of `a || b` from the CRCs of `a` and `b` and
//! the length of `b`, with no pass over data. A file's CRC32C (its ETag,
//! S3's checksum) is its records' CRCs combined; S3's FULL_OBJECT
//! multipart checksums combine CRC32 and CRC64/NVME the same way.
//!
//! Why not `crc_fast::checksum_combine`: it builds GF(2) matrices on every
//! call, several microseconds each, and a file's ETag combines once per
//! record; profiling 1 KiB HTTP PUTs showed a third of the server's CPU
//! in it. This is the method of zlib's `crc32_combine` (Mark Adler):
//! multiply `crc(a)` by `x^(8·len(b))` modulo the polynomial, the power
//! taken from a table of `x^(2^k)` built at compile time, so a combine is
//! one multiplication per set bit of the length (one for 1 KiB).
//!
//! The CRCs here are reflected with all-ones initial value and final XOR;
//! that conditioning cancels out of the combination, which is why
//! `crc(a) · x^(8n) ⊕ crc(b)` is right as it stands.

/// One reflected CRC of width 32 or 64: its polynomial (bit-reflected,
/// x^0 in the top bit) and its table of `x^(2^k)`.
struct Crc {
    poly: u64,
    top: u64,
    x2n: [u64; 67],
}

/// `a · b mod P`, both reflected, for a CRC whose top bit is `top`.
const fn mult_mod_p(a: u64, mut b: u64, poly: u64, top: u64) -> u64 {
    if a == 0 {
        return 0;
    }
    let mut m = top;
    let mut p = 0u64;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                break;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ poly } else { b >> 1 };
    }
    p
}

impl Crc {
    /// `x2n[k] = x^(2^k) mod P`: 67 entries cover lengths up to 2^64 bytes
    /// (k up to 3 + 63), so no period of the polynomial is relied on.
    const fn new(poly: u64, width: u32) -> Crc {
        let top = 1u64 << (width - 1);
        let mut x2n = [0u64; 67];
        x2n[0] = top >> 1; // x^1
        let mut k = 1;
        while k < 67 {
            x2n[k] = mult_mod_p(x2n[k - 1], x2n[k - 1], poly, top);
            k += 1;
        }
        Crc { poly, top, x2n }
    }

    /// `x^(8·len) mod P`: the factor that shifts a CRC past `len` bytes,
    /// one multiplication per set bit of `len`.
    fn x8n(&self, mut len: u64) -> u64 {
        let mut p = self.top; // x^0
        let mut k = 3; // 2^3 bits per byte
        while len != 0 {
            if len & 1 != 0 {
                p = mult_mod_p(self.x2n[k], p, self.poly, self.top);
            }
            len >>= 1;
            k += 1;
        }
        p
    }

    fn combine(&self, a: u64, b: u64, len_b: u64) -> u64 {
        if a == 0 {
            // The product is 0 when the first CRC is: the usual case of a
            // digest's first record (it starts from the empty CRC, 0).
            return b;
        }
        mult_mod_p(self.x8n(len_b), a, self.poly, self.top) ^ b
    }
}

static CRC32: Crc = Crc::new(0xEDB8_8320, 32);
static CRC32C: Crc = Crc::new(0x82F6_3B78, 32);
static CRC64NVME: Crc = Crc::new(0x9A6C_9329_AC4B_C9B5, 64);

/// CRC32C of `a || b` from `crc32c(a)`, `crc32c(b)` and `len_b` (bytes of b).
pub fn crc32c_combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    CRC32C.combine(u64::from(crc_a), u64::from(crc_b), len_b) as u32
}

/// CRC32 (ISO-HDLC) of `a || b` from `crc32(a)`, `crc32(b)` and `len_b`.
pub fn crc32_combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    CRC32.combine(u64::from(crc_a), u64::from(crc_b), len_b) as u32
}

/// CRC64/NVME of `a || b` from `crc64nvme(a)`, `crc64nvme(b)` and `len_b`.
pub fn crc64nvme_combine(crc_a: u64, crc_b: u64, len_b: u64) -> u64 {
    CRC64NVME.combine(crc_a, crc_b, len_b)
}

/// The CRC32C of `len` zero bytes, with no data: the initial all-ones
/// register shifted past them, then conditioned out.
pub fn crc32c_zeros(len: u64) -> u32 {
    let ones = u64::from(u32::MAX);
    (mult_mod_p(CRC32C.x8n(len), ones, CRC32C.poly, CRC32C.top) ^ ones) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_one_pass_at_every_cut() {
        let data: Vec<u8> = (0..5000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for cut in [0usize, 1, 2, 3, 7, 8, 63, 64, 1000, 1024, 4095, 4999, 5000] {
            let (a, b) = data.split_at(cut);
            assert_eq!(
                crc32c_combine(crc32c::crc32c(a), crc32c::crc32c(b), b.len() as u64),
                crc32c::crc32c(&data),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn agrees_with_crc_fast_on_large_lengths() {
        for len in [1u64 << 20, (1 << 32) + 12345, u64::MAX >> 3, 3 << 40] {
            let (a, b) = (0x1234_5678u32, 0x9abc_def0u32);
            let theirs = crc_fast::checksum_combine(
                crc_fast::CrcAlgorithm::Crc32Iscsi,
                a as u64,
                b as u64,
                len,
            ) as u32;
            assert_eq!(crc32c_combine(a, b, len), theirs, "len {len}");
        }
    }

    #[test]
    fn zeros_match_data() {
        for n in [0usize, 1, 2, 31, 32, 33, 4096, 100_001] {
            assert_eq!(
                crc32c_zeros(n as u64),
                crc32c::crc32c(&vec![0u8; n]),
                "n {n}"
            );
        }
    }
}
