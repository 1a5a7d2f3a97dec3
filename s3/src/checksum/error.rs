//! What can be wrong with a checksum a client sends or a multipart
//! combination asks for.

use super::Algorithm;
use crate::error::{Code, S3Error};

/// A checksum value or combination refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChecksumError {
    /// The value is not base64.
    #[error("the value of {what} is not valid base64 ({reason})")]
    BadBase64 {
        /// The header or field that held it.
        what: &'static str,
        /// What the decoder said.
        reason: String,
    },
    /// The value decodes to the wrong number of bytes for its algorithm.
    #[error("the value of {what} is {got_bytes} bytes; it must be {expected_bytes}")]
    WrongLength {
        /// The header or field that held it.
        what: &'static str,
        /// The algorithm's length.
        expected_bytes: usize,
        /// What was sent.
        got_bytes: usize,
    },
    /// A multipart combination over no parts.
    #[error("a multipart checksum needs at least one part")]
    NoParts,
    /// More parts than S3 allows in one upload.
    #[error("{parts} parts; a multipart upload has at most {max} parts")]
    TooManyParts {
        /// Parts given.
        parts: usize,
        /// The limit ([`super::MAX_PARTS`]).
        max: usize,
    },
    /// The parts' checksums are of different algorithms.
    #[error("the parts' checksums mix {first} and {other}; an upload uses one algorithm")]
    MixedAlgorithms {
        /// The first part's algorithm.
        first: &'static str,
        /// A later part's, different.
        other: &'static str,
    },
    /// The algorithm has no FULL_OBJECT form (a hash cannot be combined).
    #[error("{0} has no FULL_OBJECT checksum: only CRC32, CRC32C and CRC64NVME combine")]
    NotCombinable(&'static str),
    /// The algorithm has no COMPOSITE form.
    #[error("{0} has no COMPOSITE checksum: CRC64NVME uploads are FULL_OBJECT only")]
    NotComposite(&'static str),
}

impl ChecksumError {
    /// The S3 error code to answer with: InvalidDigest for Content-MD5
    /// (as S3 does), InvalidRequest for the rest.
    pub fn code(&self) -> Code {
        match self {
            ChecksumError::BadBase64 { what, .. } | ChecksumError::WrongLength { what, .. }
                if *what == "Content-MD5" =>
            {
                Code::InvalidDigest
            }
            ChecksumError::TooManyParts { .. } => Code::InvalidArgument,
            _ => Code::InvalidRequest,
        }
    }
}

/// The answer to a body whose `alg` checksum is not the one the client
/// sent: BadDigest, with S3's wording.
pub fn mismatch(alg: Algorithm) -> S3Error {
    S3Error::new(
        Code::BadDigest,
        format!(
            "The {} you specified did not match the calculated checksum.",
            alg.name()
        ),
    )
}

/// The answer to a body whose MD5 is not its `Content-MD5`: BadDigest,
/// with S3's wording.
pub fn md5_mismatch() -> S3Error {
    S3Error::new(
        Code::BadDigest,
        "The Content-MD5 you specified did not match what we received.",
    )
}
