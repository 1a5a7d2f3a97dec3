//! Checking a claim: the signature recomputed over the canonical request
//! with the key the endpoint found, compared in constant time.

use hmac::Mac;
use subtle::ConstantTimeEq;

use super::canonical::{build, with_scratch};
use super::chunked::ChunkVerifier;
use super::encode::hex32;
use super::key::{finish, update_scope, SigningKey};
use super::time::AmzTime;
use super::{sha256, AuthError, Claim, PayloadMode, Request, ALGORITHM};

/// The signature of the string to sign over a canonical request's hash.
pub(crate) fn request_signature(
    key: &SigningKey,
    time: &AmzTime,
    canonical_sha256: &[u8; 32],
) -> [u8; 32] {
    let mut m = key.mac();
    m.update(ALGORITHM.as_bytes());
    m.update(b"\n");
    m.update(time.as_str().as_bytes());
    m.update(b"\n");
    update_scope(&mut m, key.date(), key.region());
    m.update(b"\n");
    m.update(&hex32(canonical_sha256));
    finish(m)
}

/// A request whose signature checked out.
#[derive(Clone)]
pub struct Verified {
    pub access_key_id: String,
    pub payload: PayloadMode,
    /// The request's signature: the seed aws-chunked signatures chain from.
    seed: [u8; 32],
    time: AmzTime,
    /// Kept only when chunks are to be verified with it.
    key: Option<SigningKey>,
}

impl std::fmt::Debug for Verified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verified")
            .field("access_key_id", &self.access_key_id)
            .field("payload", &self.payload)
            .field("time", &self.time.as_str())
            .finish_non_exhaustive()
    }
}

impl Verified {
    /// The verifier of an aws-chunked body's chunk (and trailer)
    /// signatures: `Some` for [`PayloadMode::StreamingSigned`].
    pub fn chunk_verifier(&self) -> Option<ChunkVerifier> {
        match (self.payload, &self.key) {
            (PayloadMode::StreamingSigned { trailer }, Some(key)) => {
                Some(ChunkVerifier::new(key, self.time, self.seed, trailer))
            }
            _ => None,
        }
    }

    /// The request's signature (the seed of a chunked body's chain).
    pub fn seed_signature(&self) -> [u8; 32] {
        self.seed
    }
}

impl Claim {
    /// Recompute the signature with `key` (constant-time compare,
    /// `subtle`). `key` must be derived for [`Claim::date`] and
    /// [`Claim::region`].
    pub fn verify(&self, req: &Request<'_>, key: &SigningKey) -> Result<Verified, AuthError> {
        if key.date() != self.date() || key.region() != self.region() {
            return Err(AuthError::KeyScope {
                key_scope: key.scope(),
                request_scope: self.scope(),
            });
        }
        let payload_line: &[u8] = if self.presigned {
            b"UNSIGNED-PAYLOAD"
        } else {
            req.header("x-amz-content-sha256")
                .ok_or(AuthError::MissingContentSha256)?
                .trim_ascii()
        };
        let canonical_sha256 = with_scratch(|s| {
            build(s, req, &self.signed_headers, payload_line, self.presigned)?;
            Ok::<_, AuthError>(sha256(&s.out))
        })?;
        let computed = request_signature(key, &self.time, &canonical_sha256);
        if !bool::from(computed.ct_eq(&self.signature)) {
            return Err(AuthError::SignatureMismatch(
                "check the secret access key and the signing method (the canonical request \
                 covers the method, path, query, signed headers and x-amz-content-sha256)"
                    .into(),
            ));
        }
        let streaming = matches!(self.payload, PayloadMode::StreamingSigned { .. });
        Ok(Verified {
            access_key_id: self.access_key_id.clone(),
            payload: self.payload,
            seed: computed,
            time: self.time,
            key: streaming.then(|| key.clone()),
        })
    }
}
