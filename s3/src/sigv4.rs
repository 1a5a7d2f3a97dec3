//! AWS Signature Version 4 as S3 speaks it: verifying requests (the
//! server) and signing them (test and benchmark clients). Pure, no I/O.
//!
//! The server's path for one request:
//! 1. [`claim`] reads what the request claims (the `Authorization` header or
//!    a presigned query), checks its form, its scope and its time, and
//!    says which access key signed it;
//! 2. the endpoint looks the key up, derives (or caches) a [`SigningKey`]
//!    for the claim's [`Claim::date`] and [`Claim::region`];
//! 3. [`Claim::verify`] recomputes the signature over the canonical request
//!    and compares it in constant time;
//! 4. for an aws-chunked body signed chunk by chunk,
//!    [`Verified::chunk_verifier`] checks each chunk's signature, chained
//!    from the request's (the seed), and the trailer's.
//!
//! The canonical request follows S3's flavour of SigV4: the path is
//! decoded and re-encoded segment by segment, once (S3 does not
//! double-encode), the query's names and values likewise and sorted; the
//! signed headers are lowercased, their values trimmed with inner runs of
//! blanks collapsed and repeated fields joined by `,`.
//!
//! The verify path allocates little: the canonical request is built in a
//! per-thread scratch buffer that is reused (and shrunk back when a huge
//! request grew it), no map is built per request.

mod canonical;
mod chunked;
mod claim;
mod encode;
mod error;
mod key;
mod payload;
mod signer;
mod time;
mod verify;

#[cfg(test)]
mod tests_aws;
#[cfg(test)]
mod tests_botocore;
#[cfg(test)]
mod tests_prop;

pub use canonical::canonical_request;
pub use chunked::{parse_chunk_header, ChunkHeader, ChunkVerifier};
pub use claim::{claim, Claim, MAX_EXPIRES_S, MAX_SKEW_S};
pub use encode::{hex_lower, parse_hex32, uri_encode};
pub use error::AuthError;
pub use key::SigningKey;
pub use payload::{payload_mode, PayloadMode};
pub use signer::{ChunkedBody, Signer};
pub use time::{format_amz_date, parse_amz_date};
pub use verify::Verified;

use sha2::Digest;

/// The only algorithm SigV4 (not SigV4a) names.
pub const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// The service every scope this endpoint accepts names.
pub const SERVICE: &str = "s3";

/// The last component of every credential scope.
pub const TERMINATOR: &str = "aws4_request";

/// SHA-256 of nothing, hex: the zero-length chunk's and the empty body's.
pub const EMPTY_SHA256_HEX: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// A request as it arrived: what SigV4 signs.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The path as sent (percent-encoded), without `?query`.
    pub path: &'a str,
    /// The raw query after `?` ("" if none).
    pub query: &'a str,
    /// Header fields as sent (names in any case; a name may repeat).
    pub headers: &'a [(&'a str, &'a [u8])],
}

impl<'a> Request<'a> {
    /// The first value of header `name` (case-insensitive), if any.
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    sha2::Sha256::digest(data).into()
}
