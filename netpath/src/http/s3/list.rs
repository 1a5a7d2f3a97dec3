//! ListObjects (V1 and V2) and ListObjectVersions: the bucket's tree walked in S3's key order.
//!
//! A key is its path under the bucket, so the walk visits each
//! directory's entries sorted by name, a directory's name taken with its
//! `/` (the keys under `a` all start `a/`, which sorts after `a-b`):
//! depth-first in that order is the keys' byte order. Subtrees wholly
//! before the `start-after`/continuation key, or outside the prefix, are
//! not entered; with a delimiter a subtree that rolls up into one common
//! prefix is not entered either. The walk stops at `max-keys` (at most
//! 1,000) entries, plus one to know the list is truncated. An empty
//! directory is the key `dir/` (a directory marker).

use pktfs_fs::{FileType, FsError, Volume};
use pktfs_s3::error::{Code, S3Error};
use pktfs_s3::xml::{ListV1, ListV2, Object};

use super::super::head::Head;
use super::meta::etag_of;
use super::Ctx;
use super::{fs_error, S3Req};

/// The most keys one listing answers, as S3.
const MAX_KEYS: u32 = 1000;
/// Deeper trees are not walked (no key is that deep: 1,024 bytes).
const MAX_DEPTH: u32 = 512;
/// The ETag S3 gives an empty object (MD5 of nothing).
pub(super) const EMPTY_ETAG: &str = "\"d41d8cd98f00b204e9800998ecf8427e\"";

/// What a listing asks and what it found.
struct Walk<'p> {
    prefix: &'p str,
    delimiter: Option<&'p str>,
    /// Only keys (and prefixes) after this one.
    after: &'p str,
    max: usize,
    objects: Vec<Object>,
    prefixes: Vec<String>,
    truncated: bool,
    /// The last key or prefix listed (the next continuation).
    last: String,
}

impl Walk<'_> {
    fn full(&mut self) -> bool {
        if self.objects.len() + self.prefixes.len() >= self.max {
            self.truncated = true;
            return true;
        }
        false
    }

    /// A common prefix, once (they come in order). Returns false when the
    /// list is full.
    fn prefix(&mut self, cp: &str) -> bool {
        if cp <= self.after || self.prefixes.last().is_some_and(|p| p == cp) {
            return true;
        }
        if self.full() {
            return false;
        }
        self.prefixes.push(cp.to_string());
        self.last = cp.to_string();
        true
    }

    fn object(&mut self, o: Object) -> bool {
        if self.full() {
            return false;
        }
        self.last = o.key.clone();
        self.objects.push(o);
        true
    }

    /// The common prefix `key` rolls up into, if any.
    fn rolls_up(&self, key: &str) -> Option<String> {
        let d = self.delimiter?;
        let rest = key.strip_prefix(self.prefix)?;
        let i = rest.find(d)?;
        Some(key[..self.prefix.len() + i + d.len()].to_string())
    }

    /// Walk `dir`, whose keys start with `dir_key`. Returns false once
    /// the list is full.
    fn dir(&mut self, vol: &Volume, dir: u64, dir_key: &str, depth: u32) -> Result<bool, FsError> {
        if depth > MAX_DEPTH {
            return Ok(true);
        }
        let mut entries: Vec<(String, u64, FileType)> = Vec::new();
        for e in vol.list_dir(dir)? {
            // Names that are not UTF-8 cannot be S3 keys: not listed.
            let Ok(name) = String::from_utf8(e.name) else {
                continue;
            };
            let mut k = name;
            if e.kind == FileType::Directory {
                k.push('/');
            }
            entries.push((k, e.ino, e.kind));
        }
        if entries.is_empty() && !dir_key.is_empty() {
            // An empty directory: the marker object `dir/`.
            if dir_key.starts_with(self.prefix) && dir_key > self.after {
                if let Some(cp) = self.rolls_up(dir_key).filter(|cp| cp != dir_key) {
                    return Ok(self.prefix(&cp));
                }
                let mtime = vol.getattr(dir).map_or(0, |a| a.mtime_ns);
                return Ok(self.object(Object {
                    key: dir_key.to_string(),
                    last_modified_unix_ns: mtime,
                    etag: EMPTY_ETAG.to_string(),
                    size: 0,
                    storage_class: "STANDARD",
                }));
            }
            return Ok(true);
        }
        entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (name, ino, kind) in entries {
            let key = format!("{dir_key}{name}");
            if kind == FileType::Directory {
                let inside = key.starts_with(self.prefix) || self.prefix.starts_with(&key);
                // Every key of the subtree starts with `key`: all before
                // `after` unless `after` is inside it.
                let passed = self.after > key.as_str() && !self.after.starts_with(&key);
                if !inside || passed {
                    continue;
                }
                if key.starts_with(self.prefix) {
                    if let Some(cp) = self.rolls_up(&key) {
                        if cp.len() <= key.len() {
                            // The whole subtree rolls up into `cp`.
                            if !self.prefix(&cp) {
                                return Ok(false);
                            }
                            continue;
                        }
                    }
                }
                if !self.dir(vol, ino, &key, depth + 1)? {
                    return Ok(false);
                }
                continue;
            }
            if kind != FileType::Regular || !key.starts_with(self.prefix) {
                continue;
            }
            if key.as_str() <= self.after {
                continue;
            }
            if let Some(cp) = self.rolls_up(&key) {
                if !self.prefix(&cp) {
                    return Ok(false);
                }
                continue;
            }
            let d = match vol.content_digest(ino) {
                Ok(d) => d,
                // Removed meanwhile: not listed.
                Err(FsError::NotFound) => continue,
                Err(e) => return Err(e),
            };
            let (etag, _) = etag_of(vol, &d);
            if !self.object(Object {
                key,
                last_modified_unix_ns: d.mtime_ns,
                etag,
                size: d.size,
                storage_class: "STANDARD",
            }) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Ctx<'_, '_> {
    pub(super) fn s3_list_objects(&mut self, h: &Head, r: &S3Req, v2: bool) -> bool {
        let form = if v2 { Form::V2 } else { Form::V1 };
        match self.s3_list(r, form) {
            Ok(xml) => self.s3_xml(h, 200, "", &xml),
            Err(e) => self.s3_refuse(h, e),
        }
    }

    /// ListObjectVersions: the objects listed as ListObjects lists them,
    /// each its one version.
    pub(super) fn s3_list_versions(&mut self, h: &Head, r: &S3Req) -> bool {
        match self.s3_list(r, Form::Versions) {
            Ok(xml) => self.s3_xml(h, 200, "", &xml),
            Err(e) => self.s3_refuse(h, e),
        }
    }

    fn s3_list(&mut self, r: &S3Req, form: Form) -> Result<String, S3Error> {
        let v2 = form == Form::V2;
        let bucket = self.s3_bucket(&r.target.bucket)?;
        if self.who().is_some() && !self.permits(bucket, pktfs_fs::Access::READ) {
            return Err(S3Error::new(
                Code::AccessDenied,
                format!("no read permission on the bucket {}", r.target.bucket),
            ));
        }
        let prefix = r.q("prefix").unwrap_or("");
        let delimiter = r.q("delimiter").filter(|d| !d.is_empty());
        let max_keys = match r.q("max-keys") {
            None => MAX_KEYS,
            Some(v) => v
                .parse::<u32>()
                .map_err(|_| S3Error::new(Code::InvalidArgument, "max-keys must be a number"))?,
        }
        .min(MAX_KEYS);
        let encoding_url = match r.q("encoding-type") {
            None => false,
            Some("url") => true,
            Some(v) => {
                return Err(S3Error::new(
                    Code::InvalidArgument,
                    format!("encoding-type {v}: only url is known"),
                ))
            }
        };
        let token = r.q("continuation-token");
        let start_after = r.q("start-after");
        let marker = r.q("marker");
        let after = if v2 {
            match (token, start_after) {
                (Some(t), Some(s)) => t.max(s),
                (Some(t), None) => t,
                (None, Some(s)) => s,
                (None, None) => "",
            }
        } else if form == Form::Versions {
            // Every key has one version, so the key marker alone says
            // where the next page starts.
            r.q("key-marker").unwrap_or("")
        } else {
            marker.unwrap_or("")
        };
        let mut w = Walk {
            prefix,
            delimiter,
            after,
            max: max_keys as usize,
            objects: Vec::new(),
            prefixes: Vec::new(),
            truncated: false,
            last: String::new(),
        };
        if max_keys > 0 {
            w.dir(self.vol, bucket, "", 0)
                .map_err(|e| fs_error(&e, &r.target.bucket))?;
        }
        let next = w.truncated.then_some(w.last.as_str());
        let fetch_owner = match r.q("fetch-owner") {
            None | Some("false") => false,
            Some("true") => true,
            Some(v) => {
                return Err(S3Error::new(
                    Code::InvalidArgument,
                    format!("fetch-owner {v}: true or false"),
                ))
            }
        };
        // Version 1 always names the owner; version 2 when asked.
        let shown = self.s3_listing_owner(&r.key, &r.target.bucket);
        let shown = shown.owner();
        let v1 = ListV1 {
            bucket: &r.target.bucket,
            prefix,
            delimiter,
            marker: after,
            // S3 gives NextMarker only with a delimiter (without one the
            // last key serves); NextKeyMarker whenever more follow.
            next_marker: next.filter(|_| delimiter.is_some()),
            max_keys,
            is_truncated: w.truncated,
            encoding_url,
            contents: &w.objects,
            common_prefixes: &w.prefixes,
            owner: shown,
        };
        Ok(match form {
            Form::V1 => pktfs_s3::xml::list_objects_v1(&v1),
            Form::Versions => pktfs_s3::xml::list_object_versions(&ListV1 {
                next_marker: next,
                ..v1
            }),
            Form::V2 => pktfs_s3::xml::list_objects_v2(&ListV2 {
                bucket: &r.target.bucket,
                prefix,
                delimiter,
                max_keys,
                is_truncated: w.truncated,
                continuation_token: token,
                next_continuation_token: next,
                start_after,
                encoding_url,
                contents: &w.objects,
                common_prefixes: &w.prefixes,
                owner: fetch_owner.then_some(shown),
            }),
        })
    }
}

/// Which listing is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    V1,
    V2,
    Versions,
}
