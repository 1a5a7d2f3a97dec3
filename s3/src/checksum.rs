//! S3's object checksums and ETags, as S3 defines and carries them.
//!
//! S3 sends a checksum as the base64 of its big-endian value: a CRC32 of
//! `0xCBF43926` is `y/Q5Jg==` in `x-amz-checksum-crc32`. A [`Value`] is one
//! such value decoded and checked for its algorithm's length.
//!
//! The endpoint hashes a body once as it lands ([`BodyHasher`]), with only
//! the algorithms a request asks for. CRC32C is never computed there: the
//! endpoint combines the records' own CRC32Cs ([`crc32c_combine`]), so a
//! client's `x-amz-checksum-crc32c` costs no second pass over the bytes.
//!
//! Multipart objects have two kinds of object checksum
//! ([`ChecksumType`]): COMPOSITE, the checksum of the parts' checksums with
//! `-N` appended ([`composite`]), and FULL_OBJECT, the CRC of the whole
//! object, combined from the parts' CRCs and lengths ([`combine_full`]).
//! ETags are the MD5 of the body, or for multipart objects the MD5 of the
//! parts' MD5s with `-N` ([`etag`], [`multipart_etag`]).

mod combine;
mod error;
mod hasher;
mod multipart;

use base64::Engine;

pub use combine::{crc32_combine, crc32c_combine, crc64nvme_combine};
pub use error::{md5_mismatch, mismatch, ChecksumError};
pub use hasher::{BodyHasher, Digests, Wanted};
pub use multipart::{
    combine_full, composite, content_md5, etag, etag_md5, multipart_etag, MAX_PARTS,
};

/// The additional checksum algorithms of S3 (`x-amz-checksum-*`). MD5 is
/// not one of them: it travels as `Content-MD5` and makes the ETag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// CRC-32/ISO-HDLC, the zlib and Ethernet CRC.
    Crc32,
    /// CRC-32C (Castagnoli), the CRC pktfs's records carry.
    Crc32c,
    /// CRC-64/NVME.
    Crc64Nvme,
    /// SHA-1.
    Sha1,
    /// SHA-256.
    Sha256,
}

impl Algorithm {
    /// Every algorithm, in the order S3's documents list them.
    pub const ALL: [Algorithm; 5] = [
        Algorithm::Crc32,
        Algorithm::Crc32c,
        Algorithm::Crc64Nvme,
        Algorithm::Sha1,
        Algorithm::Sha256,
    ];

    /// The algorithm a checksum header names: `x-amz-checksum-crc32c` is
    /// [`Algorithm::Crc32c`]. ASCII case is ignored (HTTP header names are
    /// case-insensitive); any other header is `None`.
    pub fn from_header_name(name: &str) -> Option<Algorithm> {
        Self::ALL
            .into_iter()
            .find(|a| a.header_name().eq_ignore_ascii_case(name))
    }

    /// The algorithm as `x-amz-checksum-algorithm`,
    /// `x-amz-sdk-checksum-algorithm` and the `ChecksumAlgorithm` XML
    /// element name it: `CRC32C`. ASCII case is ignored, as S3 does (the
    /// SDKs send upper case, some tools lower).
    pub fn from_name(v: &str) -> Option<Algorithm> {
        Self::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(v.trim()))
    }

    /// The name as S3 writes it in headers' values and XML: `CRC32C`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Crc32 => "CRC32",
            Algorithm::Crc32c => "CRC32C",
            Algorithm::Crc64Nvme => "CRC64NVME",
            Algorithm::Sha1 => "SHA1",
            Algorithm::Sha256 => "SHA256",
        }
    }

    /// The header that carries a value of this algorithm, lower case:
    /// `x-amz-checksum-crc32c`.
    pub fn header_name(self) -> &'static str {
        match self {
            Algorithm::Crc32 => "x-amz-checksum-crc32",
            Algorithm::Crc32c => "x-amz-checksum-crc32c",
            Algorithm::Crc64Nvme => "x-amz-checksum-crc64nvme",
            Algorithm::Sha1 => "x-amz-checksum-sha1",
            Algorithm::Sha256 => "x-amz-checksum-sha256",
        }
    }

    /// The XML element that carries a value of this algorithm:
    /// `ChecksumCRC32C`.
    pub fn xml_name(self) -> &'static str {
        match self {
            Algorithm::Crc32 => "ChecksumCRC32",
            Algorithm::Crc32c => "ChecksumCRC32C",
            Algorithm::Crc64Nvme => "ChecksumCRC64NVME",
            Algorithm::Sha1 => "ChecksumSHA1",
            Algorithm::Sha256 => "ChecksumSHA256",
        }
    }

    /// The algorithm an XML element names (`ChecksumCRC32C`), exact case
    /// as XML is case-sensitive.
    pub fn from_xml_name(name: &str) -> Option<Algorithm> {
        Self::ALL.into_iter().find(|a| a.xml_name() == name)
    }

    /// Length of a value in bytes, before base64.
    pub fn len_bytes(self) -> usize {
        match self {
            Algorithm::Crc32 | Algorithm::Crc32c => 4,
            Algorithm::Crc64Nvme => 8,
            Algorithm::Sha1 => 20,
            Algorithm::Sha256 => 32,
        }
    }

    /// Whether a multipart upload may use this algorithm with this
    /// checksum type. S3: CRC32 and CRC32C allow both, CRC64NVME only
    /// FULL_OBJECT (it has no composite form), SHA-1 and SHA-256 only
    /// COMPOSITE (a hash cannot be combined from its parts).
    pub fn supports(self, t: ChecksumType) -> bool {
        matches!(
            (self, t),
            (Algorithm::Crc32 | Algorithm::Crc32c, _)
                | (Algorithm::Crc64Nvme, ChecksumType::FullObject)
                | (Algorithm::Sha1 | Algorithm::Sha256, ChecksumType::Composite)
        )
    }

    /// The checksum type a multipart upload gets when
    /// `x-amz-checksum-type` is absent: FULL_OBJECT for CRC64NVME (its only
    /// type), COMPOSITE for the others.
    pub fn default_type(self) -> ChecksumType {
        match self {
            Algorithm::Crc64Nvme => ChecksumType::FullObject,
            _ => ChecksumType::Composite,
        }
    }
}

/// How a multipart object's checksum is made (`x-amz-checksum-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChecksumType {
    /// The checksum of the parts' checksums, written `value-N`.
    Composite,
    /// The checksum of the whole object's bytes (CRCs only).
    FullObject,
}

impl ChecksumType {
    /// `COMPOSITE` or `FULL_OBJECT`, as S3 writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ChecksumType::Composite => "COMPOSITE",
            ChecksumType::FullObject => "FULL_OBJECT",
        }
    }

    /// The type `x-amz-checksum-type` names; ASCII case ignored.
    pub fn from_name(v: &str) -> Option<ChecksumType> {
        [ChecksumType::Composite, ChecksumType::FullObject]
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(v.trim()))
    }
}

/// A checksum value as S3 carries it, decoded from base64 and checked for
/// its algorithm's length. CRCs hold their numeric value (S3's base64 is of
/// the big-endian bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Value {
    /// A CRC32 value.
    Crc32(u32),
    /// A CRC32C value.
    Crc32c(u32),
    /// A CRC64NVME value.
    Crc64Nvme(u64),
    /// A SHA-1 digest.
    Sha1([u8; 20]),
    /// A SHA-256 digest.
    Sha256([u8; 32]),
}

/// Base64 as S3 sends it: the standard alphabet; padding is accepted with
/// or without (some tools strip it), but trailing bits must be zero so that
/// one value has one spelling.
pub(crate) const B64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// Base64 with padding, as S3 writes it.
pub(crate) fn to_b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes `b64` into exactly `N` bytes, or says what was wrong.
pub(crate) fn decode_exact<const N: usize>(
    what: &'static str,
    b64: &str,
) -> Result<[u8; N], ChecksumError> {
    let b64 = b64.trim();
    // A value of N bytes is at most 4 * ceil(N / 3) characters; refusing
    // longer input first bounds the work and the allocation.
    if b64.len() > N.div_ceil(3) * 4 {
        return Err(ChecksumError::WrongLength {
            what,
            expected_bytes: N,
            got_bytes: b64.len() / 4 * 3,
        });
    }
    let bytes = B64.decode(b64).map_err(|e| ChecksumError::BadBase64 {
        what,
        reason: e.to_string(),
    })?;
    <[u8; N]>::try_from(bytes.as_slice()).map_err(|_| ChecksumError::WrongLength {
        what,
        expected_bytes: N,
        got_bytes: bytes.len(),
    })
}

impl Value {
    /// Decodes a header's or XML element's value for `alg`. Surrounding
    /// whitespace is ignored; bad base64 or the wrong number of bytes is an
    /// error (S3 answers InvalidRequest).
    pub fn parse(alg: Algorithm, b64: &str) -> Result<Value, ChecksumError> {
        let what = alg.header_name();
        Ok(match alg {
            Algorithm::Crc32 => Value::Crc32(u32::from_be_bytes(decode_exact(what, b64)?)),
            Algorithm::Crc32c => Value::Crc32c(u32::from_be_bytes(decode_exact(what, b64)?)),
            Algorithm::Crc64Nvme => Value::Crc64Nvme(u64::from_be_bytes(decode_exact(what, b64)?)),
            Algorithm::Sha1 => Value::Sha1(decode_exact(what, b64)?),
            Algorithm::Sha256 => Value::Sha256(decode_exact(what, b64)?),
        })
    }

    /// The value as S3 sends it: base64 (padded) of the big-endian bytes.
    pub fn to_base64(&self) -> String {
        match self {
            Value::Crc32(v) | Value::Crc32c(v) => to_b64(&v.to_be_bytes()),
            Value::Crc64Nvme(v) => to_b64(&v.to_be_bytes()),
            Value::Sha1(d) => to_b64(d),
            Value::Sha256(d) => to_b64(d),
        }
    }

    /// The value's bytes as S3 concatenates them for a composite checksum:
    /// big-endian for CRCs, the digest for hashes.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Value::Crc32(v) | Value::Crc32c(v) => v.to_be_bytes().to_vec(),
            Value::Crc64Nvme(v) => v.to_be_bytes().to_vec(),
            Value::Sha1(d) => d.to_vec(),
            Value::Sha256(d) => d.to_vec(),
        }
    }

    /// The algorithm the value belongs to.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            Value::Crc32(_) => Algorithm::Crc32,
            Value::Crc32c(_) => Algorithm::Crc32c,
            Value::Crc64Nvme(_) => Algorithm::Crc64Nvme,
            Value::Sha1(_) => Algorithm::Sha1,
            Value::Sha256(_) => Algorithm::Sha256,
        }
    }
}

#[cfg(test)]
mod tests;
