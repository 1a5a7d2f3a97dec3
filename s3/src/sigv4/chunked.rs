//! aws-chunked bodies signed chunk by chunk
//! (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]): each chunk's signature
//! chains from the previous one, the first from the request's (the seed);
//! the trailer's from the final, zero-length chunk's.
//!
//! ```text
//! AWS4-HMAC-SHA256-PAYLOAD \n timestamp \n scope \n previous \n sha256("") \n sha256(chunk)
//! AWS4-HMAC-SHA256-TRAILER \n timestamp \n scope \n previous \n sha256(trailers)
//! ```
//! where the trailers are `name:value\n` for each field.

use hmac::Mac;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::encode::{hex32, parse_hex32};
use super::key::{finish, update_scope, HmacSha256, SigningKey};
use super::time::AmzTime;
use super::{AuthError, EMPTY_SHA256_HEX};

const SHA256_EMPTY: [u8; 32] = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

/// The state of a chunk signature chain, shared by the verifier and the
/// signer.
#[derive(Clone)]
pub(crate) struct Chain {
    mac: HmacSha256,
    time: AmzTime,
    date: String,
    region: String,
    prev: [u8; 32],
}

impl Chain {
    pub(crate) fn new(key: &SigningKey, time: AmzTime, seed: [u8; 32]) -> Chain {
        Chain {
            mac: key.mac(),
            time,
            date: key.date().to_owned(),
            region: key.region().to_owned(),
            prev: seed,
        }
    }

    fn head(&self, algorithm: &[u8]) -> HmacSha256 {
        let mut m = self.mac.clone();
        m.update(algorithm);
        m.update(b"\n");
        m.update(self.time.as_str().as_bytes());
        m.update(b"\n");
        update_scope(&mut m, &self.date, &self.region);
        m.update(b"\n");
        m.update(&hex32(&self.prev));
        m.update(b"\n");
        m
    }

    /// The signature of the chunk whose data hashes to `data_sha256`.
    pub(crate) fn chunk_signature(&self, data_sha256: &[u8; 32]) -> [u8; 32] {
        let mut m = self.head(b"AWS4-HMAC-SHA256-PAYLOAD");
        m.update(EMPTY_SHA256_HEX.as_bytes());
        m.update(b"\n");
        m.update(&hex32(data_sha256));
        finish(m)
    }

    /// The signature of the trailer fields.
    pub(crate) fn trailer_signature(&self, trailers: &[(&str, &str)]) -> [u8; 32] {
        let mut h = Sha256::new();
        for (name, value) in trailers {
            for b in name.bytes() {
                h.update([b.to_ascii_lowercase()]);
            }
            h.update(b":");
            h.update(value.trim().as_bytes());
            h.update(b"\n");
        }
        let hash: [u8; 32] = h.finalize().into();
        let mut m = self.head(b"AWS4-HMAC-SHA256-TRAILER");
        m.update(&hex32(&hash));
        finish(m)
    }

    pub(crate) fn advance(&mut self, signature: [u8; 32]) {
        self.prev = signature;
    }
}

/// aws-chunked: each chunk's signature chains from the previous (the
/// seed is the request's). Feed it every chunk in order, the final
/// zero-length one included, then the trailer if the mode has one, then
/// call [`ChunkVerifier::finish`] at the end of the body.
#[derive(Clone)]
pub struct ChunkVerifier {
    chain: Chain,
    trailer_due: bool,
    final_seen: bool,
    trailer_seen: bool,
    failed: bool,
}

impl std::fmt::Debug for ChunkVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkVerifier")
            .field("trailer_due", &self.trailer_due)
            .field("final_seen", &self.final_seen)
            .field("trailer_seen", &self.trailer_seen)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

fn parse_signature(hex: &[u8], what: &str) -> Result<[u8; 32], AuthError> {
    parse_hex32(hex.trim_ascii()).ok_or_else(|| {
        AuthError::ChunkedMalformed(format!(
            "the {what} signature {:?} is not 64 hex digits",
            String::from_utf8_lossy(hex)
        ))
    })
}

impl ChunkVerifier {
    pub(crate) fn new(key: &SigningKey, time: AmzTime, seed: [u8; 32], trailer: bool) -> Self {
        ChunkVerifier {
            chain: Chain::new(key, time, seed),
            trailer_due: trailer,
            final_seen: false,
            trailer_seen: false,
            failed: false,
        }
    }

    fn usable(&self) -> Result<(), AuthError> {
        if self.failed {
            return Err(AuthError::ChunkSignatureMismatch(
                "a chunk after one that failed (the chain is broken)".into(),
            ));
        }
        Ok(())
    }

    /// One chunk (the last one is the zero-length chunk, sha256 of
    /// nothing).
    pub fn chunk(&mut self, data_sha256: &[u8; 32], signature_hex: &[u8]) -> Result<(), AuthError> {
        self.usable()?;
        if self.final_seen {
            return Err(AuthError::ChunkedMalformed(
                "a chunk after the final, zero-length one".into(),
            ));
        }
        let claimed = parse_signature(signature_hex, "chunk")?;
        let computed = self.chain.chunk_signature(data_sha256);
        if !bool::from(computed.ct_eq(&claimed)) {
            self.failed = true;
            return Err(AuthError::ChunkSignatureMismatch(
                if *data_sha256 == SHA256_EMPTY {
                    "the final chunk"
                } else {
                    "a chunk"
                }
                .into(),
            ));
        }
        self.chain.advance(computed);
        self.final_seen = *data_sha256 == SHA256_EMPTY;
        Ok(())
    }

    /// The trailer signature (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER):
    /// `trailers` are the trailer fields as (name, value) in the order
    /// received, excluding x-amz-trailer-signature.
    pub fn trailer(
        &mut self,
        trailers: &[(&str, &str)],
        signature_hex: &[u8],
    ) -> Result<(), AuthError> {
        self.usable()?;
        if !self.trailer_due {
            return Err(AuthError::ChunkedMalformed(
                "trailer fields, but x-amz-content-sha256 announced none".into(),
            ));
        }
        if !self.final_seen || self.trailer_seen {
            return Err(AuthError::ChunkedMalformed(
                "the trailer must come once, after the final zero-length chunk".into(),
            ));
        }
        let claimed = parse_signature(signature_hex, "trailer")?;
        let computed = self.chain.trailer_signature(trailers);
        if !bool::from(computed.ct_eq(&claimed)) {
            self.failed = true;
            return Err(AuthError::ChunkSignatureMismatch("the trailer".into()));
        }
        self.chain.advance(computed);
        self.trailer_seen = true;
        Ok(())
    }

    /// Whether everything due was seen and verified: the final chunk, and
    /// the trailer when the mode has one.
    pub fn is_complete(&self) -> bool {
        !self.failed && self.final_seen && (self.trailer_seen || !self.trailer_due)
    }

    /// At the end of the body: an error unless [`Self::is_complete`] (a
    /// body cut short must not be stored).
    pub fn finish(&self) -> Result<(), AuthError> {
        self.usable()?;
        if !self.final_seen {
            return Err(AuthError::ChunkedMalformed(
                "the body ended before its final zero-length chunk".into(),
            ));
        }
        if self.trailer_due && !self.trailer_seen {
            return Err(AuthError::ChunkedMalformed(
                "the body ended before its signed trailer".into(),
            ));
        }
        Ok(())
    }
}

/// A chunk header line of an aws-chunked body: `hex-size[;ext...]`, with
/// the `chunk-signature` extension when the chunks are signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader<'a> {
    pub size_bytes: u64,
    pub signature: Option<&'a [u8]>,
}

/// Parses a chunk header `line` (without its CRLF).
pub fn parse_chunk_header(line: &[u8]) -> Result<ChunkHeader<'_>, AuthError> {
    let bad = |why: &str| {
        AuthError::ChunkedMalformed(format!(
            "chunk header {:?}: {why}",
            String::from_utf8_lossy(&line[..line.len().min(120)])
        ))
    };
    let mut parts = line.split(|&b| b == b';');
    let size = parts.next().unwrap_or_default().trim_ascii();
    if size.is_empty() || size.len() > 16 {
        return Err(bad("the size is not 1 to 16 hex digits"));
    }
    let mut size_bytes = 0u64;
    for &b in size {
        let d = (b as char)
            .to_digit(16)
            .ok_or_else(|| bad("the size is not hex"))?;
        size_bytes = size_bytes << 4 | u64::from(d);
    }
    let mut signature = None;
    for ext in parts {
        let ext = ext.trim_ascii();
        if let Some(sig) = ext.strip_prefix(b"chunk-signature=") {
            if signature.replace(sig).is_some() {
                return Err(bad("chunk-signature is repeated"));
            }
        }
    }
    Ok(ChunkHeader {
        size_bytes,
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_hash_constant_is_sha256_of_nothing() {
        assert_eq!(SHA256_EMPTY, crate::sigv4::sha256(b""));
        assert_eq!(crate::sigv4::hex_lower(&SHA256_EMPTY), EMPTY_SHA256_HEX);
    }

    #[test]
    fn chunk_headers() {
        let sig = "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648";
        let line = format!("10000;chunk-signature={sig}");
        assert_eq!(
            parse_chunk_header(line.as_bytes()),
            Ok(ChunkHeader {
                size_bytes: 0x10000,
                signature: Some(sig.as_bytes())
            })
        );
        assert_eq!(
            parse_chunk_header(b"0"),
            Ok(ChunkHeader {
                size_bytes: 0,
                signature: None
            })
        );
        assert_eq!(
            parse_chunk_header(b"ffffffffffffffff").unwrap().size_bytes,
            u64::MAX
        );
        for bad in [
            &b""[..],
            b";chunk-signature=00",
            b"10000000000000000",
            b"1g",
            b"-1",
            b"1;chunk-signature=a;chunk-signature=b",
        ] {
            assert_eq!(
                parse_chunk_header(bad).unwrap_err().code(),
                "IncompleteBody"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn chunk_header_never_panics(line in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            // Never a panic; and what parses is what the size says.
            if let Ok(h) = parse_chunk_header(&line) {
                let size = line.split(|&b| b == b';').next().unwrap_or_default().trim_ascii();
                let size = std::str::from_utf8(size).unwrap();
                proptest::prop_assert_eq!(Ok(h.size_bytes), u64::from_str_radix(size, 16));
            }
        }
    }
}
