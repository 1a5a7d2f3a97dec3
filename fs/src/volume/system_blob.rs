//! Blobs pktfs keeps in the image for itself (the S3 access key store on
//! the root, the S3 owner of a bucket's directory), out of every client's
//! reach.
//!
//! A system blob is an extended attribute whose name starts with
//! [`SYSTEM_XATTR_PREFIX`] (`pktfs.`), a namespace the kernel
//! never passes through FUSE for setting and `setxattr` refuses anyway. So
//! it uses the xattr chain's crash-safe update as it is (one record written
//! and flushed, then one 8-byte publish of the link that names it:
//! `put_xattr`/`drop_xattr`), fsck and recovery treat it as any xattr, and
//! no format change was needed. What keeps it out of reach is the xattr
//! API itself (`xattr.rs`): `getxattr`, `listxattr`, `removexattr`,
//! `setxattr` and `restore_xattr` act as if a `pktfs.` name did not exist,
//! for every caller, root included; the FUSE adapter, the tier's
//! snapshots (`tier/src/snapshot.rs` captures xattrs through
//! `listxattr`/`getxattr`) and the offline commands only have that API.
//! Only the methods here reach it.
//!
//! Changing a system blob does not touch the root's ctime: clients cannot
//! see the blob, so they must not see it change either.

use std::sync::atomic::Ordering;

use pktfs_layout::ROOT_INO;

use super::commit::Commit;
use super::{Volume, MAX_XATTR_VALUE};
use crate::error::{FsError, Result};
use crate::VerifyMode;

/// The xattr namespace of system blobs: no client may get, list, set or
/// remove a name in it.
pub const SYSTEM_XATTR_PREFIX: &[u8] = b"pktfs.";

/// The S3 access key store (`pktfs_s3::keys::KeyStore`'s encoding).
pub const S3_KEYS_XATTR: &[u8] = b"pktfs.s3.keys";

/// The S3 owner of a bucket: on its directory, the access key id of the
/// key that made it (`pktfs_s3::keys`); set when the bucket is made
/// ([`Volume::mkdir_with_system_xattr`]), in the same commit.
pub const S3_OWNER_XATTR: &[u8] = b"pktfs.s3.owner";

/// A bucket's CORS configuration (`pktfs_s3::cors::Config`'s encoding),
/// on its directory.
pub const S3_CORS_XATTR: &[u8] = b"pktfs.s3.cors";

/// The longest system attribute a directory is born with or given here
/// (an owner is 20 bytes): system attributes on ordinary inodes are
/// small, and one that is not is refused rather than stored. A CORS
/// configuration may be longer ([`MAX_S3_CORS_BYTES`]).
pub const MAX_SYSTEM_XATTR_BYTES: usize = 256;

/// The longest CORS configuration kept on a bucket (pktfs-s3 keeps to it).
pub const MAX_S3_CORS_BYTES: usize = 16 << 10;

/// The longest value the system attribute `name` may have.
fn max_system_xattr_bytes(name: &[u8]) -> usize {
    if name == S3_CORS_XATTR {
        MAX_S3_CORS_BYTES
    } else {
        MAX_SYSTEM_XATTR_BYTES
    }
}

/// Is `name` a system blob's (hidden from every client)?
pub(crate) fn is_system_xattr(name: &[u8]) -> bool {
    name.starts_with(SYSTEM_XATTR_PREFIX)
}

impl Volume {
    /// The S3 access key store as stored, or `None` when the image has
    /// none. Its checksum is checked on every read, whatever the verify
    /// mode: it is small, and a flipped bit in a secret must not go unseen.
    pub fn s3_keys_blob(&self) -> Result<Option<Vec<u8>>> {
        self.system_blob(S3_KEYS_XATTR)
    }

    /// Store the S3 access key store (`None`: remove it), durable when this
    /// returns. At most 64 KiB ([`MAX_XATTR_VALUE`]). The stored one is
    /// not read first, so a damaged store can be replaced.
    pub fn set_s3_keys_blob(&self, blob: Option<&[u8]>) -> Result<()> {
        self.check_writable()?;
        let arc = self.inode(ROOT_INO as u64)?;
        let mut i = super::wlock(&arc)?;
        let same = match (self.xattr_of(&i, S3_KEYS_XATTR), blob) {
            (None, None) => true,
            (Some(a), Some(b)) => a == b,
            _ => false,
        };
        if same {
            return Ok(());
        }
        self.write_s3_keys_locked(&mut i, blob)
    }

    /// Read, change and store the S3 access key store as one step: `f`
    /// gets the blob as stored (`None`: there is none; its checksum is
    /// checked first) and returns the one to store (`None`: remove it), or
    /// an error, and then nothing changes. No other change to the store
    /// can come between the read and the write (two `pktfs keys add` at
    /// once both land). `f` runs with the root directory write-locked: it
    /// must not call into this Volume.
    pub fn update_s3_keys_blob<E: From<FsError>>(
        &self,
        f: impl FnOnce(Option<&[u8]>) -> std::result::Result<Option<Vec<u8>>, E>,
    ) -> std::result::Result<(), E> {
        self.check_writable()?;
        let arc = self.inode(ROOT_INO as u64)?;
        let mut i = super::wlock(&arc)?;
        let now = self.system_blob_locked(&i, S3_KEYS_XATTR)?;
        let next = f(now.as_deref())?;
        if next == now {
            return Ok(());
        }
        Ok(self.write_s3_keys_locked(&mut i, next.as_deref())?)
    }

    fn write_s3_keys_locked(&self, i: &mut super::Inode, blob: Option<&[u8]>) -> Result<()> {
        if blob.is_some_and(|v| v.len() > MAX_XATTR_VALUE) {
            return Err(FsError::TooBig);
        }
        let mut commit = Commit::new();
        match blob {
            Some(v) => self.put_xattr(&mut commit, i, S3_KEYS_XATTR, v)?,
            None => self.drop_xattr(&mut commit, i, S3_KEYS_XATTR)?,
        }
        commit.apply(self);
        self.s3_keys_version.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Bumps whenever this process changes the S3 access key store, so a
    /// server that caches it re-reads it when this moves; 0 when the
    /// Volume opens, whatever is stored. (No other process can change it
    /// meanwhile: an image is open read-write in one process at a time,
    /// and `pktfs keys` asks that process.)
    pub fn s3_keys_version(&self) -> u64 {
        self.s3_keys_version.load(Ordering::SeqCst)
    }

    fn system_blob(&self, name: &[u8]) -> Result<Option<Vec<u8>>> {
        self.system_xattr(ROOT_INO as u64, name)
    }

    /// The system attribute `name` of `ino` as stored (`None`: it has
    /// none), its checksum checked whatever the verify mode. `name` must
    /// be in [`SYSTEM_XATTR_PREFIX`].
    pub fn system_xattr(&self, ino: u64, name: &[u8]) -> Result<Option<Vec<u8>>> {
        if !is_system_xattr(name) {
            return Err(FsError::Invalid("not a system attribute name"));
        }
        let arc = self.inode(ino)?;
        let i = super::rlock(&arc)?;
        self.system_blob_locked(&i, name)
    }

    /// Give `ino` the system attribute `name` (`None`: remove it), durable
    /// when this returns; at most [`MAX_SYSTEM_XATTR_BYTES`] (a CORS
    /// configuration [`MAX_S3_CORS_BYTES`]). Not for the root's key store
    /// (`set_s3_keys_blob` keeps its version).
    pub fn set_system_xattr(&self, ino: u64, name: &[u8], value: Option<&[u8]>) -> Result<()> {
        if !is_system_xattr(name) || name == S3_KEYS_XATTR {
            return Err(FsError::Invalid("not a system attribute name"));
        }
        if value.is_some_and(|v| v.len() > max_system_xattr_bytes(name)) {
            return Err(FsError::TooBig);
        }
        self.check_writable()?;
        let arc = self.inode(ino)?;
        let mut i = super::wlock(&arc)?;
        if self.xattr_of(&i, name) == value {
            return Ok(());
        }
        let mut commit = Commit::new();
        match value {
            Some(v) => self.put_xattr(&mut commit, &mut i, name, v)?,
            None => self.drop_xattr(&mut commit, &mut i, name)?,
        }
        commit.apply(self);
        Ok(())
    }

    /// [`Self::mkdir`], the new directory born with the system attribute
    /// `name` = `value` in the same commit: no state, crash or not, has
    /// the directory without it (an S3 bucket and its owner).
    #[allow(clippy::too_many_arguments)]
    pub fn mkdir_with_system_xattr(
        &self,
        parent: u64,
        dir: &[u8],
        perm: u32,
        uid: u32,
        gid: u32,
        name: &[u8],
        value: &[u8],
    ) -> Result<super::Attr> {
        if !is_system_xattr(name) || name == S3_KEYS_XATTR {
            return Err(FsError::Invalid("not a system attribute name"));
        }
        if value.len() > MAX_SYSTEM_XATTR_BYTES {
            return Err(FsError::TooBig);
        }
        let extra = [super::xattr_chain::NewXattr::new(name, value.to_vec())];
        self.make_node_with(
            parent,
            dir,
            pktfs_layout::FileType::Directory,
            super::NewMode::plain(perm, uid, gid),
            0,
            None,
            0,
            &extra,
        )
    }

    fn system_blob_locked(&self, i: &super::Inode, name: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some(key) = i.xnames.get(name) else {
            return Ok(None);
        };
        let r = &i.xattrs[key];
        self.verify_rec_as(i, r, VerifyMode::Always)?;
        Ok(self.xattr_of(i, name).map(<[u8]>::to_vec))
    }
}
