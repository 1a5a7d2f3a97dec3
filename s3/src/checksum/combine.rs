//! CRC combination: the CRC of `a || b` from the CRCs of `a` and `b` and
//! the length of `b`, with no pass over the data. This is what makes a
//! FULL_OBJECT multipart checksum, and a CRC32C answered from pktfs's
//! records, cost nothing per byte.
//!
//! The method is zlib's `crc32_combine` (Mark Adler): multiply `crc(a)` by
//! `x^(8·len(b))` modulo the polynomial, the power taken from a table of
//! `x^(2^k)` built at compile time, so a combine is one multiplication per
//! set bit of the length. `crc_fast::checksum_combine` would do too, but
//! builds GF(2) matrices on every call (microseconds each; pktfs-layout's
//! `crc_combine` measured it).
//!
//! All three CRCs here are reflected with all-ones initial value and final
//! XOR; that conditioning cancels out of the combination, which is why
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

    fn combine(&self, a: u64, b: u64, len_b: u64) -> u64 {
        // x^(8·len_b): one multiplication per set bit of len_b.
        let mut p = self.top; // x^0
        let mut len = len_b;
        let mut k = 3; // 2^3 bits per byte
        while len != 0 {
            if len & 1 != 0 {
                p = mult_mod_p(self.x2n[k], p, self.poly, self.top);
            }
            len >>= 1;
            k += 1;
        }
        mult_mod_p(p, a, self.poly, self.top) ^ b
    }
}

static CRC32: Crc = Crc::new(0xEDB8_8320, 32);
static CRC32C: Crc = Crc::new(0x82F6_3B78, 32);
static CRC64NVME: Crc = Crc::new(0x9A6C_9329_AC4B_C9B5, 64);

/// CRC32 (ISO-HDLC) of `a || b` from `crc32(a)`, `crc32(b)` and `len(b)`.
pub fn crc32_combine(a: u32, b: u32, len_b: u64) -> u32 {
    CRC32.combine(u64::from(a), u64::from(b), len_b) as u32
}

/// CRC32C of `a || b` from `crc32c(a)`, `crc32c(b)` and `len(b)`.
pub fn crc32c_combine(a: u32, b: u32, len_b: u64) -> u32 {
    CRC32C.combine(u64::from(a), u64::from(b), len_b) as u32
}

/// CRC64/NVME of `a || b` from `crc64nvme(a)`, `crc64nvme(b)` and `len(b)`.
pub fn crc64nvme_combine(a: u64, b: u64, len_b: u64) -> u64 {
    CRC64NVME.combine(a, b, len_b)
}
