//! A bucket's CORS configuration (pktfs-s3's `cors` module: the rules and
//! how they match): PutBucketCors, GetBucketCors and DeleteBucketCors; a
//! browser's preflight (`OPTIONS`, never signed), answered from the rules
//! alone; and the `Access-Control-*` headers an actual request from
//! another origin gets. The configuration is kept on the bucket's
//! directory as a system attribute (`pktfs_fs::S3_CORS_XATTR`), which no
//! client of the mount or of HTTP sees.
//!
//! Who may use it: setting, reading and deleting the configuration take a
//! key's write, read and write grant (or owning the bucket), as other
//! bucket calls do. The preflight needs no key, as on S3: it reveals only
//! whether a rule admits the origin, method and headers it names (and, as
//! every refusal does here, nothing about the bucket's objects).

use pktfs_s3::cors::Config;
use pktfs_s3::error::{Code, S3Error};

use super::super::head::{Head, Method};
use super::Ctx;
use super::{fs_error, S3Req};

fn err(code: Code, msg: impl Into<String>) -> S3Error {
    S3Error::new(code, msg)
}

impl Ctx<'_, '_> {
    /// The CORS configuration of `bucket`, if it exists and has one.
    fn s3_cors_of(&self, bucket: &str) -> Option<Config> {
        let v = self.s3_bucket_attr(bucket, pktfs_fs::S3_CORS_XATTR)??;
        Config::decode(&v)
    }

    /// PutBucketCors, its body in: the rules kept on the bucket, durable
    /// before the answer.
    pub(super) fn s3_put_cors_now(&mut self, h: &Head, r: &S3Req, xml: &[u8]) -> bool {
        let kept = pktfs_s3::cors::parse(xml).and_then(|c| c.encode());
        let kept = match kept {
            Ok(k) => k,
            Err(e) => return self.s3_refuse(h, err(Code::MalformedXML, e.to_string())),
        };
        let ino = match self.s3_bucket(&r.target.bucket) {
            Ok(i) => i,
            Err(e) => return self.s3_refuse(h, e),
        };
        match self
            .vol
            .set_system_xattr(ino, pktfs_fs::S3_CORS_XATTR, Some(&kept))
        {
            Ok(()) => self.s3_empty(h, 200, ""),
            Err(e) => self.s3_refuse(h, fs_error(&e, &r.target.bucket)),
        }
    }

    /// GetBucketCors: the rules as sent, or NoSuchCORSConfiguration.
    pub(super) fn s3_get_cors(&mut self, h: &Head, r: &S3Req) -> bool {
        if let Err(e) = self.s3_bucket(&r.target.bucket) {
            return self.s3_refuse(h, e);
        }
        match self.s3_cors_of(&r.target.bucket) {
            Some(c) => {
                let xml = c.to_xml();
                self.s3_xml(h, 200, "", &xml)
            }
            None => {
                let e = err(
                    Code::NoSuchCORSConfiguration,
                    format!("the bucket {} has no CORS configuration", r.target.bucket),
                );
                self.s3_refuse(h, e)
            }
        }
    }

    /// DeleteBucketCors: 204 whether or not there was one.
    pub(super) fn s3_delete_cors(&mut self, h: &Head, r: &S3Req) -> bool {
        let ino = match self.s3_bucket(&r.target.bucket) {
            Ok(i) => i,
            Err(e) => return self.s3_refuse(h, e),
        };
        match self
            .vol
            .set_system_xattr(ino, pktfs_fs::S3_CORS_XATTR, None)
        {
            Ok(()) => self.s3_empty(h, 204, ""),
            Err(e) => self.s3_refuse(h, fs_error(&e, &r.target.bucket)),
        }
    }

    /// A preflight: `Origin` and `Access-Control-Request-Method` (and
    /// `Access-Control-Request-Headers`) against the bucket's rules: 200
    /// with the headers the first admitting rule gives, else 403; 400 when
    /// it is not a preflight.
    pub(super) fn s3_preflight(&mut self, h: &Head) -> bool {
        let sh = self.head;
        let (Some(origin), Some(method)) = (
            sh.header("origin"),
            sh.header("access-control-request-method"),
        ) else {
            let e = err(
                Code::InvalidRequest,
                "a CORS preflight (OPTIONS) needs Origin and Access-Control-Request-Method",
            );
            return self.s3_refuse(h, e);
        };
        let headers: Vec<&str> = sh
            .header("access-control-request-headers")
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let bucket = super::target_of(&sh.target)
            .map(|t| t.bucket)
            .unwrap_or_default();
        let lines = self
            .s3_cors_of(&bucket)
            .and_then(|c| c.preflight(origin, method, &headers));
        match lines {
            Some(lines) => {
                self.req.cors = lines;
                self.s3_empty(h, 200, "")
            }
            None => {
                let e = err(
                    Code::AccessDenied,
                    "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.",
                );
                self.s3_refuse(h, e)
            }
        }
    }

    /// The CORS headers every answer to this request (from a page of
    /// another origin) carries, when a rule of its bucket admits it.
    pub(super) fn s3_cors_actual(&mut self, h: &Head, r: &S3Req) {
        let sh = self.head;
        let Some(origin) = sh.header("origin") else {
            return;
        };
        let method = match h.method {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Put => "PUT",
            Method::Post => "POST",
            Method::Delete => "DELETE",
            _ => return,
        };
        if r.target.bucket.is_empty() {
            return;
        }
        if let Some(lines) = self
            .s3_cors_of(&r.target.bucket)
            .and_then(|c| c.actual(origin, method))
        {
            self.req.cors = lines;
        }
    }
}
