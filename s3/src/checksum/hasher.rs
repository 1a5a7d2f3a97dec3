//! One pass over a body for every digest a request wants.

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest as _, Sha256};

use super::{Algorithm, Value};

/// What the endpoint computes while a body lands, each only if wanted.
/// CRC32C is never computed here: the endpoint combines it from the
/// records' CRCs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Wanted {
    /// MD5, for the ETag and `Content-MD5`.
    pub md5: bool,
    /// SHA-256, for `x-amz-checksum-sha256` or a signed payload hash.
    pub sha256: bool,
    /// CRC32, for `x-amz-checksum-crc32`.
    pub crc32: bool,
    /// CRC64NVME, for `x-amz-checksum-crc64nvme`.
    pub crc64nvme: bool,
    /// SHA-1, for `x-amz-checksum-sha1`.
    pub sha1: bool,
}

impl Wanted {
    /// Also wants what `alg` needs. CRC32C needs nothing here.
    pub fn with(mut self, alg: Algorithm) -> Wanted {
        match alg {
            Algorithm::Crc32 => self.crc32 = true,
            Algorithm::Crc32c => {}
            Algorithm::Crc64Nvme => self.crc64nvme = true,
            Algorithm::Sha1 => self.sha1 = true,
            Algorithm::Sha256 => self.sha256 = true,
        }
        self
    }
}

/// The digests of one body; `None` for those not wanted.
#[derive(Default, Clone, Debug, PartialEq, Eq)]
pub struct Digests {
    /// MD5 of the body.
    pub md5: Option<[u8; 16]>,
    /// SHA-256 of the body.
    pub sha256: Option<[u8; 32]>,
    /// CRC32 of the body.
    pub crc32: Option<u32>,
    /// CRC64NVME of the body.
    pub crc64nvme: Option<u64>,
    /// SHA-1 of the body.
    pub sha1: Option<[u8; 20]>,
}

impl Digests {
    /// The body's value for `alg`, if it was computed. Always `None` for
    /// CRC32C (the endpoint has that from the records).
    pub fn value(&self, alg: Algorithm) -> Option<Value> {
        match alg {
            Algorithm::Crc32 => self.crc32.map(Value::Crc32),
            Algorithm::Crc32c => None,
            Algorithm::Crc64Nvme => self.crc64nvme.map(Value::Crc64Nvme),
            Algorithm::Sha1 => self.sha1.map(Value::Sha1),
            Algorithm::Sha256 => self.sha256.map(Value::Sha256),
        }
    }
}

/// Hashes a body in pieces as it arrives, each wanted digest in the same
/// pass.
#[derive(Clone)]
pub struct BodyHasher {
    md5: Option<Md5>,
    sha256: Option<Sha256>,
    crc32: Option<crc_fast::Digest>,
    crc64nvme: Option<crc_fast::Digest>,
    sha1: Option<Sha1>,
    len_bytes: u64,
}

impl std::fmt::Debug for BodyHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyHasher")
            .field("md5", &self.md5.is_some())
            .field("sha256", &self.sha256.is_some())
            .field("crc32", &self.crc32.is_some())
            .field("crc64nvme", &self.crc64nvme.is_some())
            .field("sha1", &self.sha1.is_some())
            .field("len_bytes", &self.len_bytes)
            .finish()
    }
}

impl BodyHasher {
    /// A hasher for the digests `w` asks for.
    pub fn new(w: Wanted) -> Self {
        BodyHasher {
            md5: w.md5.then(Md5::new),
            sha256: w.sha256.then(Sha256::new),
            crc32: w
                .crc32
                .then(|| crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32IsoHdlc)),
            crc64nvme: w
                .crc64nvme
                .then(|| crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc64Nvme)),
            sha1: w.sha1.then(Sha1::new),
            len_bytes: 0,
        }
    }

    /// Feeds the next piece of the body.
    pub fn update(&mut self, data: &[u8]) {
        if let Some(h) = &mut self.md5 {
            h.update(data);
        }
        if let Some(h) = &mut self.sha256 {
            h.update(data);
        }
        if let Some(h) = &mut self.crc32 {
            h.update(data);
        }
        if let Some(h) = &mut self.crc64nvme {
            h.update(data);
        }
        if let Some(h) = &mut self.sha1 {
            h.update(data);
        }
        self.len_bytes += data.len() as u64;
    }

    /// Bytes fed so far.
    pub fn len_bytes(&self) -> u64 {
        self.len_bytes
    }

    /// Whether nothing is wanted (the endpoint can skip feeding it).
    pub fn is_idle(&self) -> bool {
        self.md5.is_none()
            && self.sha256.is_none()
            && self.crc32.is_none()
            && self.crc64nvme.is_none()
            && self.sha1.is_none()
    }

    /// The digests of everything fed.
    pub fn finish(self) -> Digests {
        Digests {
            md5: self.md5.map(|h| h.finalize().into()),
            sha256: self.sha256.map(|h| h.finalize().into()),
            crc32: self.crc32.map(|h| h.finalize() as u32),
            crc64nvme: self.crc64nvme.map(|h| h.finalize()),
            sha1: self.sha1.map(|h| h.finalize().into()),
        }
    }
}
