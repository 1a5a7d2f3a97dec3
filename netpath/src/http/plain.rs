//! Plain HTTP/1.1, one of the two protocols over the connection core:
//! PUT/POST store, GET/HEAD send (with Range and conditional
//! requests), DELETE removes, a directory lists itself (text, or JSON for
//! `Accept: application/json`), and the metrics path serves Prometheus
//! metrics. docs/NETPATH.md describes the surface for clients.
//!
//! Keep-alive and pipelining: requests on a connection are handled in
//! order; bytes after a request (the next pipelined request) stay in the
//! packet buffer for the next parse. Request heads are parsed by `httparse`
//! straight from the packet buffer they landed in, and skipped.
//!
//! # Storing
//! `PUT`/`POST /path` receives the body into an unnamed file
//! ([`pktfs_fs::Volume::tmpfile`], freed when dropped unnamed): body bytes
//! become pieces where they landed (after the head, between chunk framing)
//! and are committed in batches of at most one reservation; the last batch
//! is committed together with the file's name ([`pktfs_fs::Volume::rx_link`],
//! one commit, replacing an existing file atomically unless the request
//! says `If-None-Match: *`), so a small upload costs one commit. Only then
//! is `201 Created` (or `204` for a replacement) sent. An upload that does
//! not complete (client gone, timeout, bad framing, no space) is freed and
//! never visible; after a crash an unnamed file is gone by construction.
//! Missing parent directories are created at that point, after the body
//! is stored.
//!
//! # Status codes
//! 304 not modified (If-None-Match / If-Modified-Since on GET/HEAD); 400
//! malformed request or unsafe path; 401 missing/wrong bearer token (any
//! method, unless a public flag opens reads: `auth`); 403 the identity
//! requests act as (`--as-user`) lacks a mode or ACL permission
//! (`super::files`);
//! 404 no such file;
//! 405 change on a read-only server, PUT on `/`, or a change to the
//! metrics path; 408 head or body too slow; 409 PUT
//! onto a directory, through a non-directory, or DELETE of a non-empty
//! directory; 411 PUT without a length; 412 a precondition failed
//! (If-Match, If-None-Match on a change, If-Unmodified-Since); 413 file
//! too large; 416 unsatisfiable range; 417 unknown expectation; 431 head
//! too large; 500 damaged data; 501 unknown method or transfer coding;
//! 503 over the connection cap; 507 body larger than the free space (and
//! nothing is left behind).
//!
//! # Layout
//! `auth` (the token rules), `get` (files, listings, metrics), `change`
//! (PUT/POST and DELETE). What a file's GET, an upload's link and the
//! identity's permissions share with S3 is `super::files`.

use std::net::SocketAddr;
use std::sync::Arc;

use pktfs_fs::Volume;

use super::conn::{Conn, Next, Protocol, Received};
use super::head::{Head, Method};
use crate::loops::Session;
use crate::receive::body::BodyError;
use crate::shared::Shared;

mod auth;
mod change;
mod get;

/// Plain HTTP served by the loops (one listener).
#[derive(Debug)]
pub(crate) struct HttpListener {
    pub sh: Arc<Shared>,
}

impl crate::loops::Protocol for HttpListener {
    fn name(&self) -> &'static str {
        "http"
    }

    fn open<'v>(&'v self, vol: &'v Volume, peer: SocketAddr) -> Option<Box<dyn Session<'v> + 'v>> {
        super::session::open(&self.sh, vol, peer, Plain, None)
    }
}

/// Plain HTTP on one connection: nothing of its own to keep between
/// requests (the connection's state is the core's).
#[derive(Debug)]
pub(super) struct Plain;

impl<'a> Protocol<'a> for Plain {
    type Body = ();

    #[inline]
    fn admits(&self, c: &Conn<'a>, h: &Head) -> bool {
        auth::refusal(&c.sh.cfg, h).is_none()
    }

    fn request(&mut self, c: &mut Conn<'a>, h: &Head) -> Next<'a, ()> {
        // From the head, before any body is read or any name looked up.
        if let Some(why) = auth::refusal(&c.sh.cfg, h) {
            return Next::answered(h, c.refuse(h, 401, why));
        }
        if h.metrics {
            return Next::answered(h, c.metrics(h));
        }
        if let Some(msg) = h.path_error {
            return Next::answered(h, c.refuse(h, 400, msg));
        }
        let keep = match h.method {
            Method::Get | Method::Head => c.get(h),
            Method::Put | Method::Post => return c.put(h),
            Method::Delete => c.delete(h),
            Method::Options => {
                c.head_only(
                    204,
                    h.keep_alive,
                    "Allow: GET, HEAD, PUT, POST, DELETE, OPTIONS\r\n",
                );
                h.keep_alive
            }
            Method::Other => c.refuse(h, 501, "method not implemented"),
        };
        Next::answered(h, keep)
    }

    fn body_done(&mut self, c: &mut Conn<'a>, h: &Head, r: Received<'a>, (): ()) -> bool {
        c.put_finish(h, r)
    }

    fn body_failed(&mut self, c: &mut Conn<'a>, e: BodyError<std::convert::Infallible>) {
        if let Some(never) = c.body_failed(e) {
            match never {}
        }
    }
}
