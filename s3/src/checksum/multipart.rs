//! ETags and multipart object checksums, as S3 makes them.

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest as _, Sha256};

use super::{
    crc32_combine, crc32c_combine, crc64nvme_combine, decode_exact, to_b64, Algorithm,
    ChecksumError, Value,
};

/// Most parts one multipart upload may have (S3's limit; part numbers are
/// 1 to 10,000).
pub const MAX_PARTS: usize = 10_000;

/// The MD5 a `Content-MD5` header carries (base64 of 16 bytes). Errors
/// map to InvalidDigest.
pub fn content_md5(b64: &str) -> Result<[u8; 16], ChecksumError> {
    decode_exact("Content-MD5", b64)
}

/// A single-part object's ETag: its MD5 in lower-case hex, quoted as S3
/// sends it in headers and XML (`"d41d8cd98f00b204e9800998ecf8427e"`).
pub fn etag(md5: &[u8; 16]) -> String {
    format!("\"{}\"", hex::encode(md5))
}

/// A multipart object's ETag: the MD5 of the parts' MD5s concatenated (raw
/// bytes, in part order), hex, a dash and the part count, quoted.
pub fn multipart_etag(part_md5s: &[[u8; 16]]) -> String {
    let mut h = Md5::new();
    for m in part_md5s {
        h.update(m);
    }
    let d: [u8; 16] = h.finalize().into();
    format!("\"{}-{}\"", hex::encode(d), part_md5s.len())
}

/// The MD5 in a single-part ETag as clients echo it in
/// CompleteMultipartUpload or `If-Match`: quoted or not (clients differ),
/// hex of either case. `None` for anything else, a multipart ETag
/// included.
pub fn etag_md5(etag: &str) -> Option<[u8; 16]> {
    let t = etag.trim();
    let t = t
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(t);
    if t.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    hex::decode_to_slice(t, &mut out).ok()?;
    Some(out)
}

/// Checks that `parts` is a non-empty list of one algorithm within S3's
/// part limit, and returns that algorithm.
fn one_algorithm<T>(parts: &[T], value: impl Fn(&T) -> &Value) -> Result<Algorithm, ChecksumError> {
    let first = value(parts.first().ok_or(ChecksumError::NoParts)?).algorithm();
    if parts.len() > MAX_PARTS {
        return Err(ChecksumError::TooManyParts {
            parts: parts.len(),
            max: MAX_PARTS,
        });
    }
    if let Some(other) = parts
        .iter()
        .map(|p| value(p).algorithm())
        .find(|a| *a != first)
    {
        return Err(ChecksumError::MixedAlgorithms {
            first: first.name(),
            other: other.name(),
        });
    }
    Ok(first)
}

/// A multipart object's COMPOSITE checksum: the parts' values concatenated
/// as bytes (big-endian CRCs, raw digests) in part order, checksummed with
/// the same algorithm, base64, then `-N` for N parts. CRC64NVME has no
/// composite form.
pub fn composite(parts: &[Value]) -> Result<String, ChecksumError> {
    let alg = one_algorithm(parts, |v| v)?;
    let concat: Vec<u8> = parts.iter().flat_map(|v| v.to_bytes()).collect();
    let value = match alg {
        Algorithm::Crc32 => to_b64(&crc_fast::crc32_iso_hdlc(&concat).to_be_bytes()),
        Algorithm::Crc32c => to_b64(&crc32c::crc32c(&concat).to_be_bytes()),
        Algorithm::Sha1 => to_b64(&Sha1::digest(&concat)),
        Algorithm::Sha256 => to_b64(&Sha256::digest(&concat)),
        Algorithm::Crc64Nvme => return Err(ChecksumError::NotComposite(alg.name())),
    };
    Ok(format!("{value}-{}", parts.len()))
}

/// A multipart object's FULL_OBJECT checksum: the CRC of the whole object,
/// combined from each part's CRC and length in part order. Only the CRCs
/// combine; SHA-1 and SHA-256 are refused.
pub fn combine_full(parts: &[(Value, u64)]) -> Result<Value, ChecksumError> {
    let alg = one_algorithm(parts, |(v, _)| v)?;
    let mut acc = parts[0].0;
    for (v, len_bytes) in &parts[1..] {
        acc = match (acc, v) {
            (Value::Crc32(a), Value::Crc32(b)) => Value::Crc32(crc32_combine(a, *b, *len_bytes)),
            (Value::Crc32c(a), Value::Crc32c(b)) => {
                Value::Crc32c(crc32c_combine(a, *b, *len_bytes))
            }
            (Value::Crc64Nvme(a), Value::Crc64Nvme(b)) => {
                Value::Crc64Nvme(crc64nvme_combine(a, *b, *len_bytes))
            }
            _ => return Err(ChecksumError::NotCombinable(alg.name())),
        };
    }
    match acc {
        Value::Sha1(_) | Value::Sha256(_) => Err(ChecksumError::NotCombinable(alg.name())),
        v => Ok(v),
    }
}
