//! An HTTP session's request bodies: the body walker
//! (`crate::receive::body`) fed the landed bytes, an upload's data made
//! pieces of its unnamed file where they landed, the link and answer at
//! the end, and what a failed or abandoned body undoes.

use pktfs_fs::RxTime;

use super::super::conn::{Protocol, Received};
use super::HttpSession;
use crate::receive::body::{BodyError, Hooks, Landed, Step};

/// A body's failure as the protocol `P` hears of it.
type Failure<'v, P> = BodyError<<<P as Protocol<'v>>::Body as Hooks>::Error>;

/// The image has no buffer space for an upload's body (answered 507).
pub(super) fn no_body_space<E>() -> BodyError<E> {
    BodyError::Fs(pktfs_fs::FsError::NoSpace(
        "no free buffer space to receive the body into",
    ))
}

impl<'v, P: Protocol<'v>> HttpSession<'v, P> {
    /// A Content-Length: 0 body is complete at once.
    pub(super) fn body_done_if_empty(&mut self) {
        if self.body.as_ref().is_some_and(|b| b.walk.done()) {
            self.body_complete();
        }
    }

    /// Landed bytes of a body (data and framing), as far as one frame;
    /// returns what is left of them (more of the body, or what follows
    /// it).
    pub(super) fn body_bytes<D: Landed<'v>>(&mut self, d: D, ts: RxTime) -> Option<D> {
        let now = self.c.now();
        let io = self.sh.cfg.io_timeout;
        let vol = self.c.vol;
        let b = self.body.as_mut().expect("a body");
        // A body that broke the pace or a line's deadline gets no more
        // time (module docs, "Timeouts").
        if !b.frozen {
            b.deadline = now + io;
        }
        // In a window's last quarter the mark stays down, so what arrived
        // is taken (and counted) before the window is judged.
        b.lowat_lapsed = now + io / 4 >= b.window_end;
        let before = self.seq;
        let step = match b.upload.as_mut() {
            Some(u) => b
                .walk
                .step(d, ts, &mut self.seq, Some(&mut u.pieces), &mut u.body, vol),
            None => b
                .walk
                .step(d, ts, &mut self.seq, None, &mut (), vol)
                .map_err(|e| e.widen()),
        };
        b.window_bytes += self.seq - before;
        if b.walk.in_line() {
            // A line under way: its deadline runs from its first byte.
            b.line_since.get_or_insert(now);
        } else {
            b.line_since = None;
        }
        match step {
            Ok(Step::More(rest)) => rest,
            Ok(Step::Done(rest)) => {
                self.body_complete();
                rest
            }
            Err(e) => self.fail_body(e),
        }
    }

    /// The body is in: a skipped one is done; an upload is named (one
    /// commit with its last pieces) and answered.
    pub(super) fn body_complete(&mut self) {
        let Some(b) = self.body.take() else { return };
        if let Some(h) = b.then {
            self.act(h);
            return;
        }
        let Some(mut u) = b.upload else { return };
        let tail = u.pieces.tail(&mut u.body);
        let r = Received {
            file: u.tmp,
            bytes: b.walk.data_bytes(),
            records: u.pieces.records() + tail.len() as u64,
            tail,
        };
        let keep = self.p.body_done(&mut self.c, &u.head, r, u.body);
        self.end_request();
        if !keep {
            self.finishing = true;
        }
    }

    /// The body failed: an upload is given up (never visible), the
    /// failure answered when there is anyone to answer, the connection
    /// closed.
    pub(super) fn body_error(&mut self, e: Failure<'v, P>) {
        let upload = self.abort_upload();
        self.p.body_failed(&mut self.c, e);
        if upload {
            self.end_request();
        }
        self.finishing = true;
    }

    /// [`Self::body_error`] where the body walk stops: nothing follows.
    pub(super) fn fail_body<D>(&mut self, e: Failure<'v, P>) -> Option<D> {
        self.body_error(e);
        None
    }

    /// Drop an upload in progress (its uncommitted pieces and its unnamed
    /// file), or a request waiting for its body. Whether there was one (a
    /// request begun and not yet ended).
    pub(super) fn abort_upload(&mut self) -> bool {
        let Some(b) = self.body.take() else {
            return false;
        };
        let upload = b.upload.is_some();
        if let Some(mut u) = b.upload {
            u.pieces.abort(self.c.vol);
        }
        upload || b.then.is_some()
    }
}
