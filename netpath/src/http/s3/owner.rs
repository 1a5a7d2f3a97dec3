//! Bucket owners: a bucket made by a key that may create buckets keeps
//! that key's id in its directory (`pktfs_fs::S3_OWNER_XATTR`, written in
//! the mkdir's own commit), and the owner reaches the bucket as if it had
//! a read-write grant on it (pktfs-s3's keys module: "Owners and grants").
//!
//! The owner is read only when the key's grants do not already allow the
//! request, so a key with grants pays nothing for owners on its requests.

use pktfs_fs::FileType;
use pktfs_s3::keys::{Access, AccessKey};

use super::Ctx;

impl Ctx<'_, '_> {
    /// The system attribute `name` of the bucket `bucket` (its owner, its
    /// CORS rules): None when there is no such bucket (a directory at the
    /// image's root), Some(None) when it has none.
    pub(super) fn s3_bucket_attr(&self, bucket: &str, name: &[u8]) -> Option<Option<Vec<u8>>> {
        let root = self.vol.root();
        match self.vol.lookup_kind(root, bucket.as_bytes()) {
            Ok((ino, FileType::Directory)) => Some(self.vol.system_xattr(ino, name).ok().flatten()),
            _ => None,
        }
    }

    /// The id of the key that owns `bucket`, when it exists and has one.
    pub(super) fn s3_bucket_owner(&self, bucket: &str) -> Option<String> {
        let v = self.s3_bucket_attr(bucket, pktfs_fs::S3_OWNER_XATTR)??;
        String::from_utf8(v).ok()
    }

    /// May `key` do `a` to `bucket`: by a grant, or as the bucket's owner.
    pub(super) fn s3_may(&self, key: &AccessKey, bucket: &str, a: Access) -> bool {
        key.may(bucket, a) || key.owns(self.s3_bucket_owner(bucket).as_deref())
    }

    /// Does ListBuckets show `bucket` to `key`: a grant names it, or the key
    /// owns it.
    pub(super) fn s3_sees(&self, key: &AccessKey, bucket: &str) -> bool {
        key.sees(bucket) || key.owns(self.s3_bucket_owner(bucket).as_deref())
    }
}

/// The owner a listing shows, as owned strings (id, name).
pub(super) struct Shown {
    pub id: String,
    pub name: String,
}

impl Shown {
    pub fn owner(&self) -> pktfs_s3::xml::Owner<'_> {
        pktfs_s3::xml::Owner {
            id: &self.id,
            display_name: &self.name,
        }
    }
}

impl Ctx<'_, '_> {
    /// Whom an object listing of `bucket` names as its objects' owner.
    /// pktfs does not record who uploaded each object, so it names the
    /// bucket's owner, and for a bucket without one the key that lists
    /// (the account a request acts as; docs/S3.md, "Owners").
    pub(super) fn s3_listing_owner(&self, key: &AccessKey, bucket: &str) -> Shown {
        let mine = || Shown {
            id: key.id.clone(),
            name: key.name.clone(),
        };
        match self.s3_bucket_owner(bucket) {
            Some(o) if o != key.id => match self.st.key(self.vol, &o) {
                Ok(Some(k)) => Shown {
                    id: k.id,
                    name: k.name,
                },
                _ => Shown {
                    name: o.clone(),
                    id: o,
                },
            },
            _ => mine(),
        }
    }
}
