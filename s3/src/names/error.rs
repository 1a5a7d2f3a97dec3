//! Why a bucket name, key, path or query was refused.

use crate::error::Code;

/// A name refused; [`NameError::code`] is the S3 code to answer with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// A bucket name breaks S3's naming rules.
    #[error("the bucket name {name:?} is not valid: {why}")]
    Bucket {
        /// The name (its first 80 characters).
        name: String,
        /// The rule it breaks.
        why: String,
    },
    /// An empty key.
    #[error("an object key cannot be empty")]
    KeyEmpty,
    /// A key over 1,024 bytes.
    #[error("the key is {len_bytes} bytes; S3 keys are at most 1024 bytes of UTF-8")]
    KeyTooLong {
        /// The key's length.
        len_bytes: usize,
    },
    /// A key with NUL, which no path can hold.
    #[error("the key contains a NUL character, which pktfs cannot store in a path")]
    KeyNul,
    /// A key with an empty path segment.
    #[error("the key {key:?} has an empty path segment (a leading '/' or '//'); pktfs stores keys as paths")]
    KeyEmptySegment {
        /// The key.
        key: String,
    },
    /// A key with a `.` or `..` segment.
    #[error("the key {key:?} has a {segment:?} path segment; pktfs stores keys as paths")]
    KeyDotSegment {
        /// The key.
        key: String,
        /// `.` or `..`.
        segment: String,
    },
    /// A key segment over 255 bytes.
    #[error("a segment of the key is {len_bytes} bytes; pktfs stores keys as paths, whose segments are at most 255 bytes")]
    KeySegmentTooLong {
        /// The segment's length.
        len_bytes: usize,
    },
    /// A `%` not followed by two hex digits.
    #[error("malformed percent-escape {escape:?} at byte {at} of the URL")]
    BadEscape {
        /// Where it starts.
        at: usize,
        /// What was there.
        escape: String,
    },
    /// Percent-decoding gave bytes that are not UTF-8.
    #[error("the URL decodes to bytes that are not UTF-8")]
    NotUtf8,
    /// More query pairs than read.
    #[error("the query string has more than {max} parameters")]
    TooManyQueryPairs {
        /// The limit.
        max: usize,
    },
}

impl NameError {
    /// The S3 code to answer with: InvalidBucketName, KeyTooLongError,
    /// InvalidURI for URLs, InvalidArgument for the rest.
    pub fn code(&self) -> Code {
        match self {
            NameError::Bucket { .. } => Code::InvalidBucketName,
            NameError::KeyTooLong { .. } => Code::KeyTooLongError,
            NameError::BadEscape { .. } | NameError::NotUtf8 => Code::InvalidURI,
            _ => Code::InvalidArgument,
        }
    }
}
