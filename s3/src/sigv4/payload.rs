//! What x-amz-content-sha256 says about the body: its hash, or how it is
//! sent (unsigned, aws-chunked signed chunk by chunk, with trailers).

use std::borrow::Cow;

use super::encode::{hex_lower, parse_hex32};
use super::AuthError;

const UNSIGNED: &str = "UNSIGNED-PAYLOAD";
const STREAMING: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
const STREAMING_TRAILER: &str = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
const STREAMING_UNSIGNED_TRAILER: &str = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";

/// How the body is covered by the signature (x-amz-content-sha256).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadMode {
    /// `UNSIGNED-PAYLOAD`: the body is not signed (presigned URLs always).
    Unsigned,
    /// The body's SHA-256: the endpoint checks the body against it
    /// ([`AuthError::ContentSha256Mismatch`] if it differs).
    Sha256([u8; 32]),
    /// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]`: aws-chunked, each
    /// chunk signed (see [`super::ChunkVerifier`]); with `trailer`, signed
    /// trailer fields follow the final chunk.
    StreamingSigned { trailer: bool },
    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`: aws-chunked, chunks unsigned,
    /// trailer fields (a checksum) unsigned too.
    StreamingUnsignedTrailer,
}

impl PayloadMode {
    /// The x-amz-content-sha256 value naming this mode, which is also the
    /// canonical request's last line.
    pub fn header_value(&self) -> Cow<'static, str> {
        match self {
            PayloadMode::Unsigned => Cow::Borrowed(UNSIGNED),
            PayloadMode::Sha256(h) => Cow::Owned(hex_lower(h)),
            PayloadMode::StreamingSigned { trailer: false } => Cow::Borrowed(STREAMING),
            PayloadMode::StreamingSigned { trailer: true } => Cow::Borrowed(STREAMING_TRAILER),
            PayloadMode::StreamingUnsignedTrailer => Cow::Borrowed(STREAMING_UNSIGNED_TRAILER),
        }
    }

    /// The body is aws-chunked (Content-Encoding: aws-chunked framing).
    pub fn is_streaming(&self) -> bool {
        matches!(
            self,
            PayloadMode::StreamingSigned { .. } | PayloadMode::StreamingUnsignedTrailer
        )
    }

    /// Trailer fields follow the final chunk.
    pub fn has_trailer(&self) -> bool {
        matches!(
            self,
            PayloadMode::StreamingSigned { trailer: true } | PayloadMode::StreamingUnsignedTrailer
        )
    }
}

/// Parse the x-amz-content-sha256 header value (surrounding blanks
/// ignored; hex in either case).
pub fn payload_mode(v: &[u8]) -> Result<PayloadMode, AuthError> {
    let t = v.trim_ascii();
    match t {
        b"UNSIGNED-PAYLOAD" => Ok(PayloadMode::Unsigned),
        b"STREAMING-AWS4-HMAC-SHA256-PAYLOAD" => {
            Ok(PayloadMode::StreamingSigned { trailer: false })
        }
        b"STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER" => {
            Ok(PayloadMode::StreamingSigned { trailer: true })
        }
        b"STREAMING-UNSIGNED-PAYLOAD-TRAILER" => Ok(PayloadMode::StreamingUnsignedTrailer),
        _ if t.starts_with(b"STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD") => Err(
            AuthError::Unsupported("SigV4a (STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD)".into()),
        ),
        _ => parse_hex32(t)
            .map(PayloadMode::Sha256)
            .ok_or_else(|| AuthError::BadContentSha256(String::from_utf8_lossy(t).into_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_round_trips_through_its_header_value() {
        for mode in [
            PayloadMode::Unsigned,
            PayloadMode::Sha256(crate::sigv4::sha256(b"x")),
            PayloadMode::StreamingSigned { trailer: false },
            PayloadMode::StreamingSigned { trailer: true },
            PayloadMode::StreamingUnsignedTrailer,
        ] {
            assert_eq!(payload_mode(mode.header_value().as_bytes()), Ok(mode));
        }
    }

    #[test]
    fn bad_values_are_errors() {
        for bad in [
            &b""[..],
            b"unsigned-payload",
            b"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85",
            b"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85g",
            b"STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILERX",
            b"\xff\xfe",
        ] {
            let err = payload_mode(bad).unwrap_err();
            assert_eq!(err.code(), "InvalidArgument", "{bad:?}");
        }
        assert_eq!(
            payload_mode(b"STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD")
                .unwrap_err()
                .code(),
            "InvalidRequest"
        );
    }
}
