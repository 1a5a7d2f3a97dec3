//! Request bodies on the thread-per-connection transport: the body walker
//! (`crate::receive::body`) fed from the connection's blocking stream,
//! with the threads' own pace rule (`super::pace`) and their habit of
//! taking a body in pieces of at least [`MIN_PIECE`] where it landed.

use std::time::Instant;

use pktfs_s3::error::S3Error;

use super::conn::Conn;
use super::head::Head;
use super::response::status_of;
use crate::receive::body::{Hooks, Pieces, Walk};
use crate::receive::stream::IDLE_RESERVATION;

/// Why a body could not be read or stored (an S3 body's hooks refuse it
/// with an S3 error).
pub(super) type BodyError = crate::receive::body::BodyError<S3Error>;

/// Coalesce body bytes into pieces of at least this size (unless the body
/// or the reservation ends first), so a trickle of small receives does not
/// become a record per receive.
const MIN_PIECE: u32 = 16 << 10;

impl<'a> Conn<'a> {
    /// Walk a body off the blocking socket: its data into `into` (None:
    /// read and dropped) after `hooks` saw it; once `rx_chunk` bytes
    /// gathered they are committed into `ino` (the rest stays in `into`
    /// for the commit that names the file).
    pub(super) fn walk_body<H: Hooks>(
        &mut self,
        walk: &mut Walk,
        mut into: Option<&mut Pieces<'a>>,
        ino: Option<u64>,
        hooks: &mut H,
    ) -> Result<(), crate::receive::body::BodyError<H::Error>> {
        self.pace.begin();
        let vol = self.vol;
        while !walk.done() {
            let Some(n) = self.ready(walk)? else {
                continue;
            };
            let (at, mut seq) = (self.rx.stamp_next(), self.rx.seq());
            let start = seq;
            // What the step leaves is walked from the stream again, with
            // the receive time of its own first byte.
            walk.step(
                self.rx.landed(n),
                at,
                &mut seq,
                into.as_deref_mut(),
                hooks,
                vol,
            )?;
            self.rx.consume((seq - start) as u32);
            if walk.in_line() {
                self.pace.line_open();
            } else {
                self.pace.line_done();
            }
            if let (Some(p), Some(ino)) = (into.as_deref_mut(), ino) {
                if p.batch() >= self.sh.cfg.rx_chunk as u64 && p.pending_small() == 0 {
                    p.commit(vol, ino, hooks)?;
                }
            }
        }
        Ok(())
    }

    /// How many received bytes to walk next, or None once more were
    /// received (look again). Data is taken in pieces of at least
    /// [`MIN_PIECE`] unless the frame or the reservation ends first.
    fn ready<E>(&mut self, walk: &Walk) -> Result<Option<u32>, crate::receive::body::BodyError<E>> {
        let avail = self.rx.available();
        let Some(left) = walk.data_left() else {
            if avail > 0 {
                return Ok(Some(avail));
            }
            self.more(IDLE_RESERVATION as u64)?;
            return Ok(None);
        };
        let after = left.saturating_sub(avail as u64).min(u32::MAX as u64) as u32;
        let now =
            avail as u64 >= left || (avail > 0 && (avail >= MIN_PIECE || self.rx.will_move(after)));
        if now {
            return Ok(Some((avail as u64).min(left) as u32));
        }
        self.more(left - avail as u64)?;
        Ok(None)
    }

    /// Wait for more of the body, keeping to its pace
    /// (`Config::min_recv_rate`, a line's `header_timeout`: [`super::pace`]);
    /// a receive that times out before the pace is judged waits again.
    fn more<E>(&mut self, want: u64) -> Result<(), crate::receive::body::BodyError<E>> {
        use crate::receive::body::BodyError as E;
        let want = want.clamp(1, u32::MAX as u64) as u32;
        loop {
            let timeout = self
                .pace
                .wait(Instant::now(), self.req.started, &self.sh.cfg)
                .map_err(|_| E::Timeout)?;
            match self.rx.fill(want, timeout) {
                Ok(0) => return Err(E::Gone("the client closed the connection".into())),
                Ok(n) => {
                    self.add_in(n as u64);
                    self.pace.got(n as u64);
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => continue,
                Err(e) => return Err(E::Gone(e.to_string())),
            }
        }
    }

    /// Read and drop a body nobody stores (GET with a body, ...). False:
    /// the connection is done.
    pub(super) fn discard_body(&mut self, h: &Head) -> bool {
        let Some(f) = h.framing() else {
            return true;
        };
        if let Some(ob) = self.outbox.as_mut() {
            // On an event loop the session skips it as it arrives.
            ob.skip_body = Some(f);
            return true;
        }
        let mut walk = Walk::new(f, self.sh.cfg.max_header_bytes);
        match self.walk_body(&mut walk, None, None, &mut ()) {
            Ok(()) => true,
            Err(e) => {
                self.body_failed(e.widen());
                false
            }
        }
    }

    /// Answer (when there is anyone to answer) and log a failed body.
    pub(super) fn body_failed(&mut self, e: BodyError) {
        match e {
            BodyError::Gone(why) => tracing::info!(
                peer = %self.peer,
                method = self.req.method,
                path = %self.path.display(),
                "request body incomplete: {why}; nothing was stored"
            ),
            BodyError::Timeout => self.error(408, "request body too slow", false),
            BodyError::Bad(m) => {
                self.error(400, m, false);
                self.linger();
            }
            BodyError::Fs(e) => {
                let code = status_of(&e);
                self.error(code, &e.to_string(), false);
                self.linger();
            }
            BodyError::Hook(e) => {
                self.s3_error(&e, false);
                self.linger();
            }
        }
    }
}
