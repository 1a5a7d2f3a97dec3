//! What the connection core asks a protocol, and what it hears back.
//!
//! The core (`conn`, and its two drivers: `session` on the event loops,
//! `blocking` on a thread per connection) reads heads, walks bodies and
//! sends answers; a protocol (plain HTTP, `plain`; S3, `s3`) decides what
//! a request does. It answers through [`Conn`] and returns what is to
//! become of the request's body ([`Next`]): nothing more (the next request
//! or the close), skipped, or received into an unnamed file and handed
//! back once it is in ([`Protocol::body_done`]). Nothing is left on the
//! connection for the driver to find.

use pktfs_fs::{RxPiece, TmpFile};

use super::conn::Conn;
use super::head::Head;
use crate::receive::body::{BodyError, Framing, Hooks};

/// What becomes of a request once its protocol acted on its head.
#[derive(Debug)]
pub(super) enum Next<'a, B> {
    /// Answered: go on with the next request (true) or close.
    Done(bool),
    /// Answered ahead of its body: read and drop the body, then go on.
    Skip(Framing),
    /// Receive the body into an unnamed file, then
    /// [`Protocol::body_done`].
    Receive(Receive<'a, B>),
}

impl<B> Next<'_, B> {
    /// A request answered from its head with `keep`: a body it still has
    /// coming is read and dropped before the next request (a refusal goes
    /// ahead of a small body the client sends anyway; a large one, or one
    /// that waits for `100 Continue`, closed the connection: `keep` false).
    pub(super) fn answered(h: &Head, keep: bool) -> Self {
        match h.framing() {
            Some(f) if keep && h.has_body() => Next::Skip(f),
            _ => Next::Done(keep),
        }
    }
}

/// A body to receive into an unnamed file.
#[derive(Debug)]
pub(super) struct Receive<'a, B> {
    pub file: TmpFile<'a>,
    pub framing: Framing,
    /// What the protocol checks of the body as it passes and needs once
    /// it is in (S3: its digests and signatures, what the body is for).
    pub body: B,
}

/// A body received: its file, the pieces still to commit (with the link,
/// so a small upload is one commit), its data bytes and records.
#[derive(Debug)]
pub(super) struct Received<'a> {
    pub file: TmpFile<'a>,
    pub tail: Vec<RxPiece<'a>>,
    pub bytes: u64,
    pub records: u64,
}

/// A protocol over the connection core (module docs).
pub(super) trait Protocol<'a> {
    /// What travels with a body being received ([`Receive::body`]).
    type Body: Hooks;
    /// A complete head as httparse read it (S3 keeps the fields SigV4
    /// signs); called before [`Protocol::request`].
    #[inline]
    fn head_fields(&mut self, _req: &httparse::Request<'_, '_>) {}
    /// Whether the core may read a body this request does not store
    /// before acting on it (GET, HEAD, DELETE, OPTIONS with a body: a
    /// request takes effect only once it is whole); false answers the
    /// request from its head (a token refused).
    fn admits(&self, c: &Conn<'a>, h: &Head) -> bool;
    /// Act on a request whose head is in.
    fn request(&mut self, c: &mut Conn<'a>, h: &Head) -> Next<'a, Self::Body>;
    /// The body of `h` is in: name it, keep it or act on it, and answer.
    /// Whether the connection goes on.
    fn body_done(&mut self, c: &mut Conn<'a>, h: &Head, r: Received<'a>, body: Self::Body) -> bool;
    /// A body failed (the upload was given up): answer it when there is
    /// anyone to answer.
    fn body_failed(&mut self, c: &mut Conn<'a>, e: BodyError<<Self::Body as Hooks>::Error>);
}

/// Act on a parsed request: a head the core found broken is refused here
/// (the connection closes), every other goes to its protocol.
pub(super) fn serve<'a, P: Protocol<'a>>(
    c: &mut Conn<'a>,
    p: &mut P,
    h: &Head,
) -> Next<'a, P::Body> {
    if let Some((code, msg)) = h.error {
        c.error(code, msg, false);
        c.linger();
        return Next::Done(false);
    }
    p.request(c, h)
}
