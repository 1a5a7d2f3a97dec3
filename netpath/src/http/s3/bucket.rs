//! Buckets: the image's top-level directories. ListBuckets,
//! CreateBucket, HeadBucket, DeleteBucket, GetBucketLocation,
//! GetBucketVersioning (never enabled).

use pktfs_fs::{FileType, FsError};
use pktfs_s3::error::{Code, S3Error};

use super::super::head::Head;
use super::Ctx;
use super::{fs_error, S3Req};

fn err(code: Code, msg: impl Into<String>) -> S3Error {
    S3Error::new(code, msg)
}

/// A directory tree holds no file (only directories, perhaps none).
fn holds_no_file(vol: &pktfs_fs::Volume, dir: u64, depth: u32) -> Result<bool, FsError> {
    if depth > 256 {
        return Ok(false);
    }
    for e in vol.list_dir(dir)? {
        if e.kind != FileType::Directory || !holds_no_file(vol, e.ino, depth + 1)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Remove the (file-less) tree under `dir`, deepest first.
fn remove_dirs(vol: &pktfs_fs::Volume, dir: u64) -> Result<(), FsError> {
    for e in vol.list_dir(dir)? {
        remove_dirs(vol, e.ino)?;
        vol.rmdir(dir, &e.name)?;
    }
    Ok(())
}

impl Ctx<'_, '_> {
    /// ListBuckets: the buckets the key owns or has a grant on, in name
    /// order, a page at a time (`max-buckets`, `continuation-token`: the
    /// last name of the page before), those starting with `prefix`.
    pub(super) fn s3_list_buckets(&mut self, h: &Head, r: &S3Req) -> bool {
        let page = match BucketQuery::read(r) {
            Ok(p) => p,
            Err(e) => return self.s3_refuse(h, e),
        };
        let root = self.vol.root();
        let entries = match self.vol.list_dir(root) {
            Ok(v) => v,
            Err(e) => return self.s3_refuse(h, fs_error(&e, "/")),
        };
        let mut buckets = Vec::new();
        for e in entries {
            let Ok(name) = std::str::from_utf8(&e.name) else {
                continue;
            };
            let shown = e.kind == FileType::Directory
                && page.wants(name)
                && pktfs_s3::names::valid_bucket(name).is_ok()
                && self.s3_sees(&r.key, name);
            if !shown {
                continue;
            }
            let created = self.vol.getattr(e.ino).map_or(0, |a| a.ctime_ns);
            buckets.push(pktfs_s3::xml::Bucket {
                name: name.to_string(),
                created_unix_ns: created,
            });
        }
        buckets.sort_by(|a, b| a.name.cmp(&b.name));
        let more = buckets.len() > page.max;
        buckets.truncate(page.max);
        let next = more
            .then(|| buckets.last().map(|b| b.name.clone()))
            .flatten();
        let me = pktfs_s3::xml::Owner {
            id: &r.key.id,
            display_name: &r.key.name,
        };
        let xml = pktfs_s3::xml::list_buckets(
            me,
            &pktfs_s3::xml::BucketsPage {
                buckets: &buckets,
                prefix: page.prefix,
                continuation_token: next.as_deref(),
            },
        );
        self.s3_xml(h, 200, "", &xml)
    }

    /// CreateBucket, its body (if any) read: a top-level directory.
    pub(super) fn s3_create_bucket_now(&mut self, h: &Head, r: &S3Req) -> bool {
        let name = r.target.bucket.as_str();
        let root = self.vol.root();
        if self.who().is_some() && !self.permits(root, pktfs_fs::Access::WRITE_SEARCH) {
            let e = err(
                Code::AccessDenied,
                "the server's user may not make directories at the image's root",
            );
            return self.s3_refuse(h, e);
        }
        // A key that may create buckets owns what it makes, from the
        // mkdir's own commit: no state has the bucket without its owner.
        let made = if r.key.create_buckets {
            self.vol.mkdir_with_system_xattr(
                root,
                name.as_bytes(),
                0o755,
                self.sh.uid,
                self.sh.gid,
                pktfs_fs::S3_OWNER_XATTR,
                r.key.id.as_bytes(),
            )
        } else {
            self.vol
                .mkdir(root, name.as_bytes(), 0o755, self.sh.uid, self.sh.gid)
        };
        match made {
            Ok(a) => {
                self.sh.notify(crate::config::Change::Entry {
                    parent: root,
                    name: name.as_bytes(),
                    ino: a.ino,
                });
                let extra = format!("Location: /{name}\r\n");
                self.s3_empty(h, 200, &extra)
            }
            Err(FsError::Exists) => {
                // Bucket names are one namespace: a bucket the key does not
                // reach is another's, as on S3.
                let mine = self.s3_may(&r.key, name, pktfs_s3::keys::Access::Write);
                let dir = matches!(
                    self.vol.lookup_kind(root, name.as_bytes()),
                    Ok((_, FileType::Directory))
                );
                let e = match (dir, mine) {
                    // us-east-1 answers a re-create of one's own bucket 200
                    // (changing nothing); every other region
                    // BucketAlreadyOwnedByYou.
                    (true, true) if self.sh.cfg.s3_region == "us-east-1" => {
                        let extra = format!("Location: /{name}\r\n");
                        return self.s3_empty(h, 200, &extra);
                    }
                    (true, true) => err(
                        Code::BucketAlreadyOwnedByYou,
                        format!("the bucket {name} exists"),
                    ),
                    (true, false) => err(
                        Code::BucketAlreadyExists,
                        format!("the bucket {name} exists and is not this key's"),
                    ),
                    (false, _) => err(
                        Code::BucketAlreadyExists,
                        format!("{name} is taken at the image's root by something else"),
                    ),
                };
                self.s3_refuse(h, e)
            }
            Err(e) => self.s3_refuse(h, fs_error(&e, name)),
        }
    }

    pub(super) fn s3_head_bucket(&mut self, h: &Head, r: &S3Req) -> bool {
        match self.s3_bucket(&r.target.bucket) {
            Ok(_) => {
                let extra = format!("x-amz-bucket-region: {}\r\n", self.sh.cfg.s3_region);
                self.s3_empty(h, 200, &extra)
            }
            Err(e) => {
                self.s3_error(&e, h.keep_alive);
                h.keep_alive
            }
        }
    }

    /// DeleteBucket: only a bucket with no objects (directories left by
    /// keys are removed with it); its multipart uploads are aborted.
    pub(super) fn s3_delete_bucket(&mut self, h: &Head, r: &S3Req) -> bool {
        let name = r.target.bucket.as_str();
        let ino = match self.s3_bucket(name) {
            Ok(i) => i,
            Err(e) => return self.s3_refuse(h, e),
        };
        if let Some(msg) = self.delete_denied() {
            return self.s3_refuse(h, err(Code::AccessDenied, msg));
        }
        match holds_no_file(self.vol, ino, 0) {
            Ok(true) => {}
            Ok(false) => {
                let e = err(
                    Code::BucketNotEmpty,
                    format!("the bucket {name} holds objects (or other files)"),
                );
                return self.s3_refuse(h, e);
            }
            Err(e) => return self.s3_refuse(h, fs_error(&e, name)),
        }
        let root = self.vol.root();
        let r2 = remove_dirs(self.vol, ino).and_then(|()| self.vol.rmdir(root, name.as_bytes()));
        match r2 {
            Ok(()) => {
                self.st.uploads.abort_bucket(name);
                self.sh.notify(crate::config::Change::Removed {
                    parent: root,
                    name: name.as_bytes(),
                    ino,
                });
                self.s3_empty(h, 204, "")
            }
            Err(FsError::NotEmpty) => self.s3_refuse(
                h,
                err(
                    Code::BucketNotEmpty,
                    format!("the bucket {name} was written to while it was being deleted"),
                ),
            ),
            Err(e) => self.s3_refuse(h, fs_error(&e, name)),
        }
    }

    pub(super) fn s3_location(&mut self, h: &Head, r: &S3Req) -> bool {
        if let Err(e) = self.s3_bucket(&r.target.bucket) {
            return self.s3_refuse(h, e);
        }
        let xml = pktfs_s3::xml::location(&self.sh.cfg.s3_region);
        self.s3_xml(h, 200, "", &xml)
    }

    pub(super) fn s3_versioning(&mut self, h: &Head, r: &S3Req) -> bool {
        if let Err(e) = self.s3_bucket(&r.target.bucket) {
            return self.s3_refuse(h, e);
        }
        // Versioning is never enabled: the empty configuration says so.
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<VersioningConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"/>";
        self.s3_xml(h, 200, "", xml)
    }
}

/// The most buckets one ListBuckets page holds, as on S3.
const MAX_BUCKETS: usize = 10_000;

/// What a ListBuckets asks for.
struct BucketQuery<'r> {
    prefix: Option<&'r str>,
    /// Names after this one (the continuation token).
    after: Option<&'r str>,
    max: usize,
}

impl<'r> BucketQuery<'r> {
    fn read(r: &'r S3Req) -> Result<BucketQuery<'r>, S3Error> {
        let max = match r.q("max-buckets") {
            None => MAX_BUCKETS,
            Some(v) => match v.parse::<usize>() {
                Ok(n) if (1..=MAX_BUCKETS).contains(&n) => n,
                _ => {
                    return Err(S3Error::new(
                        Code::InvalidArgument,
                        format!("max-buckets {v}: a number from 1 to {MAX_BUCKETS}"),
                    ))
                }
            },
        };
        // The token is the last bucket name of the page before; anything
        // else was not given out here.
        let after = r.q("continuation-token").filter(|t| !t.is_empty());
        if let Some(t) = after {
            if pktfs_s3::names::valid_bucket(t).is_err() {
                return Err(S3Error::new(
                    Code::InvalidArgument,
                    "the continuation-token was not one this endpoint gave",
                ));
            }
        }
        Ok(BucketQuery {
            prefix: r.q("prefix"),
            after,
            max,
        })
    }

    /// Is `name` on this page or a later one?
    fn wants(&self, name: &str) -> bool {
        self.prefix.is_none_or(|p| name.starts_with(p)) && self.after.is_none_or(|a| name > a)
    }
}
