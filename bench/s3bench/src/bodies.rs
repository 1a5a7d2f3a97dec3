//! Request bodies made once before a run, with every digest a request
//! needs about them (SHA-256 for a signed payload, MD5 for the ETag the
//! answer must carry, CRC32 or CRC32C for the checksum header): the client
//! hashes nothing while it measures.

use md5::Digest as _;

/// Which `x-amz-checksum-*` header a PUT carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Checksum {
    /// `x-amz-checksum-crc32`: what boto3, aws-cli and aws-sdk-s3 send by
    /// default with a body they hold in memory.
    Crc32,
    /// `x-amz-checksum-crc32c`.
    Crc32c,
    /// No checksum header.
    None,
}

impl Checksum {
    /// The header's name and the algorithm's name for
    /// `x-amz-sdk-checksum-algorithm` (which the SDKs send beside it).
    pub fn header(self) -> Option<(&'static str, &'static str)> {
        match self {
            Checksum::Crc32 => Some(("x-amz-checksum-crc32", "CRC32")),
            Checksum::Crc32c => Some(("x-amz-checksum-crc32c", "CRC32C")),
            Checksum::None => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Checksum::Crc32 => "crc32",
            Checksum::Crc32c => "crc32c",
            Checksum::None => "none",
        }
    }
}

/// One body and its digests.
#[derive(Debug)]
pub struct Body {
    pub data: Vec<u8>,
    pub sha256: [u8; 32],
    /// The ETag S3 answers for it as a single-part object or a part:
    /// the quoted hex MD5.
    pub etag: String,
    pub md5: [u8; 16],
    /// The checksum header's value (base64 of the big-endian CRC), if any.
    pub checksum: Option<String>,
}

impl Body {
    pub fn new(data: Vec<u8>, checksum: Checksum) -> Body {
        use pktfs_s3::checksum::{etag, Value};
        let md5: [u8; 16] = md5::Md5::digest(&data).into();
        let value = match checksum {
            Checksum::Crc32 => Some(Value::Crc32(crc_fast::checksum(
                crc_fast::CrcAlgorithm::Crc32IsoHdlc,
                &data,
            ) as u32)),
            Checksum::Crc32c => Some(Value::Crc32c(crc32c::crc32c(&data))),
            Checksum::None => None,
        };
        Body {
            sha256: pktfs_s3::sigv4::sha256(&data),
            etag: etag(&md5),
            md5,
            checksum: value.map(|v| v.to_base64()),
            data,
        }
    }
}

/// `n` bytes that differ with `seed` (xorshift), so that no two bodies of
/// a run are alike and nothing compresses them.
pub fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// The ETag of a completed multipart upload: the MD5 of the parts' MD5s,
/// then `-` and the number of parts.
pub use pktfs_s3::checksum::multipart_etag;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_match_published_values() {
        // RFC 1321's MD5 of "abc"; SHA-256 of "abc" (FIPS 180-2); the
        // CRC-32 and CRC-32C check values of "123456789".
        let b = Body::new(b"abc".to_vec(), Checksum::None);
        assert_eq!(b.etag, "\"900150983cd24fb0d6963f7d28e17f72\"");
        assert_eq!(
            hex::encode(b.sha256),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(b.checksum, None);
        let c = Body::new(b"123456789".to_vec(), Checksum::Crc32);
        assert_eq!(c.checksum.as_deref(), Some("y/Q5Jg==")); // 0xCBF43926
        let c = Body::new(b"123456789".to_vec(), Checksum::Crc32c);
        assert_eq!(c.checksum.as_deref(), Some("4waSgw==")); // 0xE3069283
    }

    #[test]
    fn the_multipart_etag_is_the_md5_of_the_md5s() {
        // Two parts whose MD5s are those of "a" and "b": the MD5 of their
        // 32 bytes, computed independently here.
        let a: [u8; 16] = md5::Md5::digest(b"a").into();
        let b: [u8; 16] = md5::Md5::digest(b"b").into();
        let mut both = a.to_vec();
        both.extend_from_slice(&b);
        let want = format!("\"{}-2\"", hex::encode(md5::Md5::digest(&both)));
        assert_eq!(multipart_etag(&[a, b]), want);
        assert_ne!(multipart_etag(&[b, a]), want);
    }

    #[test]
    fn patterns_differ_by_seed_and_have_the_length_asked() {
        assert_eq!(pattern(4097, 1).len(), 4097);
        assert_ne!(pattern(64, 1), pattern(64, 2));
        assert_eq!(pattern(64, 3), pattern(64, 3));
    }
}
