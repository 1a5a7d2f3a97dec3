//! Access keys and their per-bucket grants, as stored in the image.
//!
//! An image keeps one key store: a small versioned JSON blob (the fs
//! stores it where no client reaches it: FORMAT.md, "Access keys").
//! `pktfs keys add|list|show|grant|revoke|rm` manage it; the S3 endpoint reads it to find a
//! request's secret by its access key id and to decide what the key may do.
//!
//! # Keys
//!
//! An access key id is `PK` followed by 18 of `[A-Z0-9]` (20 characters,
//! the shape of AWS's `AKIA...`, so tools that check the length accept
//! it); its secret is 40 of `[A-Za-z0-9+/]` (240 random bits). Both come
//! from 64 bytes the caller reads from the OS RNG ([`KeyStore::add`]): this
//! crate does no I/O. A key also has a name (a label for people: who or
//! what uses it) and the time it was made.
//!
//! # Owners and grants
//!
//! A key reaches the buckets it owns and those its grants name. A key that
//! may create buckets (`pktfs keys add --create-buckets`, the field
//! [`AccessKey::create_buckets`]) owns each bucket it makes: the bucket's
//! directory keeps the owner's id from its first commit (pktfs-fs,
//! `S3_OWNER_XATTR`), and the owner may read and write it, as an S3
//! account does its buckets. Buckets made otherwise (a mount, HTTP, a key
//! with a grant on the name) have no owner; grants alone reach them.
//!
//! A grant names one bucket, or `*` for every bucket (those that exist and
//! those made later), and gives read, write, or both (`logs=rw`, `logs=r`,
//! `*=w`). A key's rights on a bucket are the union of its grants that
//! name the bucket or `*` ([`AccessKey::may`]), and read and write when
//! it owns the bucket. The S3 endpoint enforces them per operation:
//!
//! - **Read** on the bucket: HeadBucket, ListObjects(V2),
//!   ListObjectVersions, GetObject, HeadObject, ListParts,
//!   ListMultipartUploads, the bucket's CORS configuration read.
//! - **Write** on the bucket: DeleteBucket, PutObject, DeleteObject,
//!   DeleteObjects, the multipart set (CreateMultipartUpload, UploadPart,
//!   UploadPartCopy, CompleteMultipartUpload, AbortMultipartUpload), the
//!   CORS configuration set or deleted.
//! - **CreateBucket**: a key that may create buckets, or one with Write on
//!   that name.
//! - **CopyObject** needs Write on the destination bucket and Read on the
//!   source bucket (UploadPartCopy likewise).
//! - **ListBuckets** lists the buckets the key owns or has any grant on
//!   ([`AccessKey::sees`]); with a `*` grant, all of them.
//!
//! A request with a key that has no right to an operation gets
//! AccessDenied, the same answer whether the bucket exists or not (a key
//! must not learn the names of buckets it cannot reach); CreateBucket of a
//! name another key owns is BucketAlreadyExists, as on S3, where bucket
//! names are one namespace.
//!
//! # Bounds
//!
//! At most [`MAX_KEYS`] keys, each with at most [`MAX_GRANTS`] grants and a
//! name of at most [`MAX_NAME_BYTES`] bytes: the largest store then encodes
//! in fewer than [`MAX_BLOB_BYTES`] bytes, the most the image keeps for it
//! (an xattr value's limit).

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use serde::{Deserialize, Serialize};

/// Most access keys one image keeps. With every key at its bounds
/// ([`MAX_GRANTS`] grants on 63-character bucket names, a name of
/// [`MAX_NAME_BYTES`] bytes all needing escapes) the store still encodes
/// in under [`MAX_BLOB_BYTES`] (a test checks it).
pub const MAX_KEYS: usize = 40;
/// Most grants one key has (a `*` grant covers any number of buckets).
pub const MAX_GRANTS: usize = 16;
/// Longest key name, in bytes of UTF-8.
pub const MAX_NAME_BYTES: usize = 64;
/// The most bytes an encoded store may have: the image keeps it as an
/// extended attribute value, at most 64 KiB (XATTR_SIZE_MAX).
pub const MAX_BLOB_BYTES: usize = 65536;
/// The newest encoding [`KeyStore::encode`] writes and
/// [`KeyStore::decode`] reads: 2 has keys that may create buckets
/// (`create_buckets`). A store with no such key is still written as
/// version 1, which a pktfs from before version 2 reads; one that has
/// such a key is refused by it as a newer version, not misread (its
/// reader refuses unknown fields, and would otherwise call it damaged).
pub const BLOB_VERSION: u64 = 2;
/// What every access key id starts with.
pub const ID_PREFIX: &str = "PK";
/// Characters in an access key id, its prefix included.
pub const ID_LEN: usize = 20;
/// Characters in a secret access key.
pub const SECRET_LEN: usize = 40;
/// The bucket name of a grant on every bucket.
pub const ALL_BUCKETS: &str = "*";

/// What an access key may do to a bucket (the module docs list which S3
/// operations need which).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    Write,
}

/// Read and/or write on one bucket, or on every bucket (`*`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Grant {
    /// A bucket name, or [`ALL_BUCKETS`] (`*`).
    pub bucket: String,
    pub read: bool,
    pub write: bool,
}

impl Grant {
    /// Does this grant name `bucket` (itself, or `*`)?
    pub fn covers(&self, bucket: &str) -> bool {
        self.bucket == ALL_BUCKETS || self.bucket == bucket
    }

    fn allows(&self, a: Access) -> bool {
        match a {
            Access::Read => self.read,
            Access::Write => self.write,
        }
    }

    fn check(&self) -> Result<(), KeysError> {
        let bad = |why: &str| KeysError::BadGrant {
            grant: self.to_string(),
            why: why.to_string(),
        };
        if !self.read && !self.write {
            return Err(bad("it gives neither read nor write"));
        }
        if self.bucket != ALL_BUCKETS {
            check_bucket(&self.bucket).map_err(bad)?;
        }
        Ok(())
    }
}

/// S3's rule for bucket names (3 to 63 of lowercase letters, digits, `.`
/// and `-`, starting and ending with a letter or digit): a grant on a name
/// no bucket can have is a typo, better refused when the key is made.
fn check_bucket(b: &str) -> Result<(), &'static str> {
    if b.len() < 3 || b.len() > 63 {
        return Err("a bucket name has 3 to 63 characters (or is * for every bucket)");
    }
    if !b
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
    {
        return Err("a bucket name has only lowercase letters, digits, '.' and '-'");
    }
    let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !edge(b.as_bytes()[0]) || !edge(b.as_bytes()[b.len() - 1]) {
        return Err("a bucket name starts and ends with a letter or digit");
    }
    Ok(())
}

/// `BUCKET=rw`, `BUCKET=r`, `BUCKET=w`; `*` for every bucket.
impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rights = match (self.read, self.write) {
            (true, true) => "rw",
            (true, false) => "r",
            (false, true) => "w",
            (false, false) => "",
        };
        write!(f, "{}={rights}", self.bucket)
    }
}

/// Parses `BUCKET=rw`, `BUCKET=r`, `BUCKET=w`, and `*=...` for every
/// bucket (the form `pktfs keys add --grant` takes).
impl FromStr for Grant {
    type Err = KeysError;

    fn from_str(s: &str) -> Result<Grant, KeysError> {
        let bad = |why: &str| KeysError::BadGrant {
            grant: s.to_string(),
            why: why.to_string(),
        };
        let (bucket, rights) = s
            .rsplit_once('=')
            .ok_or_else(|| bad("expected BUCKET=rw, BUCKET=r or BUCKET=w (* for every bucket)"))?;
        let (read, write) = match rights {
            "rw" => (true, true),
            "r" => (true, false),
            "w" => (false, true),
            _ => return Err(bad("the rights after '=' are rw, r or w")),
        };
        let g = Grant {
            bucket: bucket.to_string(),
            read,
            write,
        };
        g.check()?;
        Ok(g)
    }
}

/// One access key. `Debug` leaves the secret out, so a key logged by
/// mistake does not leak it.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessKey {
    /// `PK` followed by 18 of `[A-Z0-9]`.
    pub id: String,
    /// 40 of `[A-Za-z0-9+/]`: what SigV4 signs with.
    pub secret: String,
    /// A label for people.
    pub name: String,
    pub grants: Vec<Grant>,
    /// May make buckets, which it then owns (reaching them without a
    /// grant), as an S3 account or a Garage key with `--create-bucket`.
    pub create_buckets: bool,
    pub created_unix_s: i64,
}

impl fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessKey")
            .field("id", &self.id)
            .field("secret", &"<redacted>")
            .field("name", &self.name)
            .field("grants", &self.grants)
            .field("create_buckets", &self.create_buckets)
            .field("created_unix_s", &self.created_unix_s)
            .finish()
    }
}

impl AccessKey {
    /// May this key do `a` on `bucket`? True when any of its grants names
    /// the bucket or `*` and gives `a`.
    pub fn may(&self, bucket: &str, a: Access) -> bool {
        self.grants.iter().any(|g| g.covers(bucket) && g.allows(a))
    }

    /// Does ListBuckets show this key `bucket`? True when any grant names
    /// it or `*`, whatever the grant gives.
    pub fn sees(&self, bucket: &str) -> bool {
        self.grants.iter().any(|g| g.covers(bucket))
    }

    /// Does this key own a bucket whose owner is `owner` (`None`: it has
    /// none)? Its rights on a bucket are its grants ([`Self::may`]) or
    /// owning it; the endpoint reads a bucket's owner only when the grants
    /// do not already allow the request.
    pub fn owns(&self, owner: Option<&str>) -> bool {
        owner == Some(self.id.as_str())
    }

    /// May this key make a bucket named `bucket`? When it may create
    /// buckets, or has Write on that name.
    pub fn may_create(&self, bucket: &str) -> bool {
        self.create_buckets || self.may(bucket, Access::Write)
    }
}

/// Why a key store did not decode, or a change to it was refused.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error(
        "the access key store is {bytes} bytes, more than the {max} an image keeps: it is \
         damaged or was not written by pktfs; remove it (pktfs keys rm IMAGE --all) and add the \
         keys again"
    )]
    TooBig { bytes: usize, max: usize },
    #[error(
        "the access key store is not what pktfs writes ({0}): it is damaged; remove it \
         (pktfs keys rm IMAGE --all) and add the keys again"
    )]
    Malformed(String),
    #[error(
        "the access key store is version {0}, this pktfs reads version {BLOB_VERSION} only: \
         manage the keys with the pktfs that wrote them, or a newer one"
    )]
    UnknownVersion(u64),
    #[error("the access key store holds {count} keys, more than {max}: it is damaged")]
    TooManyKeys { count: usize, max: usize },
    #[error(
        "the image has {max} access keys already, the most it keeps: remove one first \
         (pktfs keys rm)"
    )]
    Full { max: usize },
    #[error("{0:?} is not an access key id (PK followed by 18 of A-Z and 0-9)")]
    BadId(String),
    #[error(
        "the secret of access key {id} is not 40 of A-Z, a-z, 0-9, + and /: the store is damaged"
    )]
    BadSecret { id: String },
    #[error("bad key name {name:?}: {why}")]
    BadName { name: String, why: String },
    #[error("bad grant {grant:?}: {why}")]
    BadGrant { grant: String, why: String },
    #[error("{count} grants for one key, more than {max}; a grant on * covers every bucket")]
    TooManyGrants { count: usize, max: usize },
    #[error("bucket {0:?} is granted twice to one key: give it once, e.g. {0}=rw")]
    DuplicateGrant(String),
    #[error("access key {0} appears twice in the store: it is damaged")]
    DuplicateId(String),
    #[error("no access key {0} in this image (pktfs keys list shows them)")]
    NoSuchKey(String),
    #[error("the new access key id {0} is taken already; try again")]
    IdTaken(String),
}

/// The keys of one image, in the order they were added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyStore {
    keys: Vec<AccessKey>,
}

/// The blob's shape. Unknown fields are refused, not ignored: a field a
/// later version adds may restrict a key (an expiry, a source address),
/// and a reader that dropped it would grant more than was meant.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Blob {
    version: u64,
    keys: Vec<StoredKey>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredKey {
    id: String,
    secret: String,
    name: String,
    /// In their `BUCKET=rw` form: a third of the size of objects.
    grants: Vec<String>,
    /// Version 2 only, and written only when true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    create_buckets: bool,
    created_unix_s: i64,
}

/// Only the version, read first so that a store of another version is
/// named as such rather than as malformed.
#[derive(Deserialize)]
struct VersionOnly {
    version: u64,
}

fn check_id(id: &str) -> Result<(), KeysError> {
    let ok = id.len() == ID_LEN
        && id.starts_with(ID_PREFIX)
        && id[ID_PREFIX.len()..]
            .bytes()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(KeysError::BadId(id.to_string()))
    }
}

fn check_secret(id: &str, secret: &str) -> Result<(), KeysError> {
    let ok = secret.len() == SECRET_LEN
        && secret
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/');
    if ok {
        Ok(())
    } else {
        Err(KeysError::BadSecret { id: id.to_string() })
    }
}

fn check_name(name: &str) -> Result<(), KeysError> {
    let bad = |why: &str| KeysError::BadName {
        name: name.to_string(),
        why: why.to_string(),
    };
    if name.trim().is_empty() {
        return Err(bad("a key needs a name (who or what uses it)"));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(bad(&format!("longer than {MAX_NAME_BYTES} bytes")));
    }
    if name.chars().any(char::is_control) {
        return Err(bad("it has control characters"));
    }
    Ok(())
}

fn check_grants(grants: &[Grant]) -> Result<(), KeysError> {
    if grants.len() > MAX_GRANTS {
        return Err(KeysError::TooManyGrants {
            count: grants.len(),
            max: MAX_GRANTS,
        });
    }
    for (k, g) in grants.iter().enumerate() {
        g.check()?;
        if grants[..k].iter().any(|h| h.bucket == g.bucket) {
            return Err(KeysError::DuplicateGrant(g.bucket.clone()));
        }
    }
    Ok(())
}

/// The alphabet of access key ids after their prefix.
const ID_ALPHABET: &[u8; 36] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

impl KeyStore {
    /// An empty store.
    pub fn new() -> KeyStore {
        KeyStore::default()
    }

    /// Read a store as [`Self::encode`] wrote it. Refuses (never panics
    /// on) a blob over [`MAX_BLOB_BYTES`], one of another version, more
    /// than [`MAX_KEYS`] keys, and any id, secret, name or grant
    /// [`Self::add`] would not have made.
    pub fn decode(blob: &[u8]) -> Result<KeyStore, KeysError> {
        if blob.len() > MAX_BLOB_BYTES {
            return Err(KeysError::TooBig {
                bytes: blob.len(),
                max: MAX_BLOB_BYTES,
            });
        }
        let v: VersionOnly =
            serde_json::from_slice(blob).map_err(|e| KeysError::Malformed(e.to_string()))?;
        if !(1..=BLOB_VERSION).contains(&v.version) {
            return Err(KeysError::UnknownVersion(v.version));
        }
        let b: Blob =
            serde_json::from_slice(blob).map_err(|e| KeysError::Malformed(e.to_string()))?;
        if b.keys.len() > MAX_KEYS {
            return Err(KeysError::TooManyKeys {
                count: b.keys.len(),
                max: MAX_KEYS,
            });
        }
        let mut keys: Vec<AccessKey> = Vec::with_capacity(b.keys.len());
        for k in b.keys {
            check_id(&k.id)?;
            if keys.iter().any(|o| o.id == k.id) {
                return Err(KeysError::DuplicateId(k.id));
            }
            check_secret(&k.id, &k.secret)?;
            check_name(&k.name)?;
            let grants = k
                .grants
                .iter()
                .map(|g| g.parse::<Grant>())
                .collect::<Result<Vec<_>, _>>()?;
            check_grants(&grants)?;
            if k.create_buckets && b.version < 2 {
                return Err(KeysError::Malformed(format!(
                    "key {} may create buckets in a version {} store",
                    k.id, b.version
                )));
            }
            keys.push(AccessKey {
                id: k.id,
                secret: k.secret,
                name: k.name,
                grants,
                create_buckets: k.create_buckets,
                created_unix_s: k.created_unix_s,
            });
        }
        Ok(KeyStore { keys })
    }

    /// The blob to store: JSON, `{"version":1,"keys":[...]}` (version 2
    /// when a key may create buckets).
    pub fn encode(&self) -> Vec<u8> {
        let b = Blob {
            version: if self.keys.iter().any(|k| k.create_buckets) {
                2
            } else {
                1
            },
            keys: self
                .keys
                .iter()
                .map(|k| StoredKey {
                    id: k.id.clone(),
                    secret: k.secret.clone(),
                    name: k.name.clone(),
                    grants: k.grants.iter().map(Grant::to_string).collect(),
                    create_buckets: k.create_buckets,
                    created_unix_s: k.created_unix_s,
                })
                .collect(),
        };
        // Plain strings, integers and vectors: serializing cannot fail.
        serde_json::to_vec(&b).unwrap_or_default()
    }

    /// The key with this id.
    pub fn get(&self, access_key_id: &str) -> Option<&AccessKey> {
        self.keys.iter().find(|k| k.id == access_key_id)
    }

    /// Every key, oldest first.
    pub fn keys(&self) -> &[AccessKey] {
        &self.keys
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// A new key: id `PK` + 18 of `[A-Z0-9]`, secret 40 of
    /// `[A-Za-z0-9+/]`, both from `random` (the caller reads the OS RNG:
    /// bytes 0..30 make the secret, 30..48 the id). [`KeysError::IdTaken`]
    /// in the (1 in 10^28) case the id exists already: call again with new
    /// random bytes.
    pub fn add(
        &mut self,
        name: &str,
        grants: Vec<Grant>,
        random: &[u8; 64],
        now_unix_s: i64,
    ) -> Result<&AccessKey, KeysError> {
        check_name(name)?;
        check_grants(&grants)?;
        if self.keys.len() >= MAX_KEYS {
            return Err(KeysError::Full { max: MAX_KEYS });
        }
        // 30 bytes are exactly 40 base64 characters, no padding.
        let secret = base64::engine::general_purpose::STANDARD.encode(&random[..30]);
        // Ids are not secret: the small bias of `% 36` does not matter.
        let mut id = String::with_capacity(ID_LEN);
        id.push_str(ID_PREFIX);
        id.extend(
            random[30..30 + ID_LEN - ID_PREFIX.len()]
                .iter()
                .map(|b| ID_ALPHABET[*b as usize % ID_ALPHABET.len()] as char),
        );
        if self.get(&id).is_some() {
            return Err(KeysError::IdTaken(id));
        }
        self.keys.push(AccessKey {
            id,
            secret,
            name: name.to_string(),
            grants,
            create_buckets: false,
            created_unix_s: now_unix_s,
        });
        Ok(self.keys.last().expect("just pushed"))
    }

    /// Add a key made elsewhere, with its id and secret as they are: one
    /// person's credential on several images (`pktfs up` keeps one key per
    /// user and brings it to every image it serves). Checked as a stored
    /// key is; [`KeysError::IdTaken`] when the id is here already.
    pub fn import(&mut self, key: AccessKey) -> Result<&AccessKey, KeysError> {
        check_id(&key.id)?;
        check_secret(&key.id, &key.secret)?;
        check_name(&key.name)?;
        check_grants(&key.grants)?;
        if self.get(&key.id).is_some() {
            return Err(KeysError::IdTaken(key.id));
        }
        if self.keys.len() >= MAX_KEYS {
            return Err(KeysError::Full { max: MAX_KEYS });
        }
        self.keys.push(key);
        Ok(self.keys.last().expect("just pushed"))
    }

    /// Give the key `access_key_id` the grant `g` on its bucket (or `*`),
    /// replacing the grant it had there; `g` giving neither read nor write
    /// takes the grant away. Answers the key as it now is.
    pub fn set_grant(&mut self, access_key_id: &str, g: Grant) -> Result<&AccessKey, KeysError> {
        let k = self.get_mut(access_key_id)?;
        let mut grants: Vec<Grant> = k
            .grants
            .iter()
            .filter(|o| o.bucket != g.bucket)
            .cloned()
            .collect();
        if g.read || g.write {
            g.check()?;
            grants.push(g);
        }
        check_grants(&grants)?;
        k.grants = grants;
        Ok(k)
    }

    /// Let the key `access_key_id` make buckets (which it then owns), or
    /// not. Answers the key as it now is.
    pub fn set_create_buckets(
        &mut self,
        access_key_id: &str,
        allowed: bool,
    ) -> Result<&AccessKey, KeysError> {
        let k = self.get_mut(access_key_id)?;
        k.create_buckets = allowed;
        Ok(k)
    }

    fn get_mut(&mut self, access_key_id: &str) -> Result<&mut AccessKey, KeysError> {
        self.keys
            .iter_mut()
            .find(|k| k.id == access_key_id)
            .ok_or_else(|| KeysError::NoSuchKey(access_key_id.to_string()))
    }

    /// Remove the key with this id and return it.
    pub fn remove(&mut self, access_key_id: &str) -> Result<AccessKey, KeysError> {
        let at = self
            .keys
            .iter()
            .position(|k| k.id == access_key_id)
            .ok_or_else(|| KeysError::NoSuchKey(access_key_id.to_string()))?;
        Ok(self.keys.remove(at))
    }
}

#[cfg(test)]
mod tests;
