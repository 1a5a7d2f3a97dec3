//! A connection's input, received straight into packet-buffer space.
//!
//! The stream owns one reservation ([`RxBuf`]) at a time and `recv()`s into
//! its free tail, so request heads, chunk framing and body bytes all land in
//! the image where they arrive. Body bytes become pieces in place
//! ([`RxStream::take_into`]); everything else is skipped
//! ([`RxStream::consume`]) and its space is returned when the reservation
//! is released, except where it shares a buffer with a piece (a piece keeps
//! whole buffers alive, like an sk_buff keeps its page).
//!
//! Space of a reservation is written once: the stream never recv()s into
//! bytes it has already filled, because pieces may reference them (the
//! [`RxBuf`] handle enforces it: it receives only past what it holds). When the
//! tail is too short the stream moves on to a new reservation; an unparsed
//! partial head (at most `max_header_bytes`) is copied over, never body
//! bytes (callers take those before asking for more).
//!
//! When no buffer space is left (or the volume is read-only) the stream
//! falls back to a 64 KiB DRAM buffer so GET, HEAD and DELETE still work on
//! a full volume; body bytes that arrive then are copied into fresh buffer
//! space when taken, or refused with "no space".
//!
//! Every receive, into the image or into DRAM, is a recvmsg(2) with the
//! kernel's receive time (SO_TIMESTAMPNS, turned on by [`RxStream::new`]
//! and best turned on before `accept`: [`crate::receive::stamped`]). A
//! piece is stamped with the time of the receive that brought its first
//! byte: [`RxTime::Kernel`] when the kernel gave one, else
//! [`RxTime::Clock`] (the clock when the bytes were taken, and the record
//! says so: no `FLAG_KERNEL_TIME`). A piece may span several receives
//! (a body's bytes are taken in pieces of at least 16 KiB where they
//! landed), so a record is the bytes of one or more receives, in order.

use std::net::TcpStream;
use std::time::Duration;

use pktfs_fs::{RxBuf, RxPiece, RxTime, Volume};

use crate::receive::body::{Dram, Window};
pub use crate::receive::persist::RxJob;
use crate::util::now_ns;

/// Reservation size between requests and for small requests.
pub const IDLE_RESERVATION: u32 = 64 << 10;
/// Don't recv into a tail shorter than this when more is expected.
const MIN_RECV: u32 = 4096;
/// DRAM fallback buffer.
const DRAM_FALLBACK: usize = 64 << 10;

#[derive(Debug)]
pub struct RxStream<'a> {
    vol: &'a Volume,
    /// None: detached (an event loop's session receives for itself; the
    /// stream is never filled).
    sock: Option<&'a TcpStream>,
    /// The current reservation. Jobs handed to a persister thread share
    /// its reference on its buffers ([`RxJob`]); the last of them and the
    /// reservation to be dropped gives it back.
    res: Option<RxBuf<'a>>,
    dram: Vec<u8>,
    in_dram: bool,
    pos: u32,
    end: u32,
    /// Stream position of byte 0 of the current storage.
    base_seq: u64,
    /// (first byte, kernel receive time) of each recv into the current
    /// storage, ascending.
    stamps: Vec<(u32, RxTime)>,
    /// The latest stamp handed out: stamps never go below it. The kernel
    /// stamps each packet as it is delivered, before TCP puts reordered
    /// segments back in order (a recv ending where a late segment ends can
    /// carry a later stamp than the next one), and the wall clock can step
    /// back; a stream's records still ascend in time.
    last_ts: RxTime,
    chunk: u32,
    timeout: Option<Duration>,
}

impl<'a> RxStream<'a> {
    /// `chunk`: largest reservation. Turns on SO_TIMESTAMPNS (already on
    /// for a socket accepted from a listener that had it, or made by
    /// [`crate::receive::stamped`]); bytes that arrived before it was on
    /// may have no kernel time, and their records say so.
    pub fn new(vol: &'a Volume, sock: &'a TcpStream, chunk: u32) -> RxStream<'a> {
        if let Err(e) = pktfs_fs::media::net::enable_rx_timestamps(sock) {
            tracing::debug!("receive timestamps refused ({e}): records carry the clock");
        }
        RxStream::with(vol, Some(sock), chunk)
    }

    /// A stream nothing is received into: [`RxStream::fill`] fails. For
    /// the io_uring loops' HTTP sessions, whose bytes land elsewhere.
    pub fn detached(vol: &'a Volume) -> RxStream<'a> {
        RxStream::with(vol, None, IDLE_RESERVATION)
    }

    fn with(vol: &'a Volume, sock: Option<&'a TcpStream>, chunk: u32) -> RxStream<'a> {
        RxStream {
            vol,
            sock,
            res: None,
            dram: Vec::new(),
            in_dram: false,
            pos: 0,
            end: 0,
            base_seq: 0,
            stamps: Vec::new(),
            last_ts: RxTime::Clock(0),
            chunk: chunk.max(IDLE_RESERVATION),
            timeout: None,
        }
    }

    /// Receive time of the next unconsumed byte (what a piece of it is
    /// stamped with).
    pub fn stamp_next(&self) -> RxTime {
        self.stamp_at(self.pos)
    }

    /// Received, not yet consumed bytes.
    pub fn window(&self) -> &[u8] {
        if self.in_dram {
            &self.dram[self.pos as usize..self.end as usize]
        } else {
            match &self.res {
                Some(b) => &b.received()[self.pos as usize..self.end as usize],
                None => &[],
            }
        }
    }

    pub fn available(&self) -> u32 {
        self.end - self.pos
    }

    /// The next `n` received bytes for the body walker (not consumed:
    /// [`RxStream::consume`] what it walked): held where they landed, or
    /// in the DRAM fallback.
    pub(crate) fn landed(&self, n: u32) -> Window<'_, 'a> {
        assert!(n > 0 && n <= self.available());
        let (p, e) = (self.pos as usize, (self.pos + n) as usize);
        match &self.res {
            Some(b) if !self.in_dram => Window::Held(b.hold(self.pos, n)),
            _ => Window::Dram(Dram(&self.dram[p..e])),
        }
    }

    /// Stream position of the next unconsumed byte.
    pub fn seq(&self) -> u64 {
        self.base_seq + self.pos as u64
    }

    /// Skip `n` received bytes (a request head, chunk framing, a discarded
    /// body): they stay where they landed and are never linked.
    pub fn consume(&mut self, n: u32) {
        assert!(n <= self.available());
        self.pos += n;
    }

    fn cap(&self) -> u32 {
        if self.in_dram {
            self.dram.len() as u32
        } else {
            self.res.as_ref().map(|b| b.cap()).unwrap_or(0)
        }
    }

    /// Would `fill(want)` move to new storage (so received body bytes must
    /// be taken first)?
    pub fn will_move(&self, want: u32) -> bool {
        self.cap() - self.end < want.clamp(1, MIN_RECV)
            || (self.in_dram && self.pos == self.end && !self.vol.is_read_only())
    }

    /// Receive more bytes, expecting about `want` (sizes a new reservation).
    /// Ok(0) is end of stream. A timeout is `ErrorKind::TimedOut`.
    pub fn fill(&mut self, want: u32, timeout: Duration) -> std::io::Result<usize> {
        let Some(sock) = self.sock else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "a detached stream receives nothing",
            ));
        };
        if self.timeout != Some(timeout) {
            sock.set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
            self.timeout = Some(timeout);
        }
        if self.will_move(want) {
            self.move_storage(want);
        }
        loop {
            let r = if self.in_dram {
                // With the cmsg too: bytes held in DRAM keep their arrival
                // time (they become records when space frees up).
                let end = self.end as usize;
                pktfs_fs::media::net::recv_timestamped_into(sock, &mut self.dram[end..], 0)
            } else {
                let b = self.res.as_mut().expect("storage after move");
                debug_assert_eq!(b.filled(), self.end);
                b.recv_timestamped(sock, 0)
            };
            match r {
                Ok((n, ts)) => {
                    if n > 0 {
                        self.stamp(ts);
                        self.end += n as u32;
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "timed out waiting for the client",
                    ))
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Note the receive time of the bytes about to land at `end` (the
    /// kernel's stamp, or now), never earlier than the last one.
    /// A stamp earlier than the last one is replaced by the last one, who
    /// gave it included (never a kernel claim on a clock reading).
    fn stamp(&mut self, kernel_ns: Option<u64>) {
        let ts = later(RxTime::kernel_or_now(kernel_ns), self.last_ts);
        self.last_ts = ts;
        self.stamps.push((self.end, ts));
    }

    fn stamp_at(&self, off: u32) -> RxTime {
        let i = self.stamps.partition_point(|&(s, _)| s <= off);
        if i == 0 {
            later(RxTime::Clock(now_ns()), self.last_ts)
        } else {
            self.stamps[i - 1].1
        }
    }

    /// Continue in new storage, carrying the unconsumed bytes over.
    fn move_storage(&mut self, want: u32) {
        let carry = self.end - self.pos;
        let size =
            (carry as u64 + want as u64).clamp(IDLE_RESERVATION as u64, self.chunk as u64) as u32;
        let carry_ts = self.stamp_at(self.pos);
        let new_base = self.base_seq + self.pos as u64;
        let (p, e) = (self.pos as usize, self.end as usize);
        if !self.vol.is_read_only() {
            if let Ok(mut b) = self.vol.rx_reserve(size) {
                if b.cap() > carry {
                    if carry > 0 {
                        if self.in_dram {
                            b.append(&self.dram[p..e]);
                        } else {
                            let old = self.res.as_ref().expect("storage");
                            b.append(&old.received()[p..e]);
                        }
                    }
                    // The old reservation goes back once jobs still
                    // sharing it are done (pieces hold their own).
                    self.res = Some(b);
                    self.in_dram = false;
                    self.reset(new_base, carry, carry_ts);
                    return;
                }
                drop(b);
            }
        }
        let need = DRAM_FALLBACK.max(carry as usize + MIN_RECV as usize);
        if self.dram.len() < need {
            self.dram.resize(need, 0);
        }
        if self.in_dram {
            self.dram.copy_within(p..e, 0);
        } else if let Some(old) = &self.res {
            self.dram[..carry as usize].copy_from_slice(&old.received()[p..e]);
        }
        self.res = None;
        self.in_dram = true;
        self.reset(new_base, carry, carry_ts);
    }

    fn reset(&mut self, base: u64, carry: u32, ts: RxTime) {
        self.base_seq = base;
        self.pos = 0;
        self.end = carry;
        self.stamps.clear();
        if carry > 0 {
            self.stamps.push((0, ts));
        }
    }

    /// The next `n` received bytes become a piece (or, in the DRAM
    /// fallback, are copied into fresh buffer space as pieces): CRC and
    /// flush now, timestamp of the recv that brought the first byte, seq =
    /// its stream position. On error the pieces already pushed are the
    /// caller's to abort.
    pub fn take_into(&mut self, n: u32, out: &mut Vec<RxPiece<'a>>) -> pktfs_fs::Result<()> {
        assert!(n <= self.available());
        if n == 0 {
            return Ok(());
        }
        let seq = self.seq();
        let ts = self.stamp_at(self.pos);
        if !self.in_dram {
            let b = self.res.as_ref().expect("storage");
            out.push(b.piece(self.pos, n, ts, seq));
        } else {
            let mut done = 0u32;
            while done < n {
                let mut b = self.vol.rx_reserve(n - done)?;
                let k = b.cap().min(n - done);
                let s = (self.pos + done) as usize;
                b.append(&self.dram[s..s + k as usize]);
                out.push(b.piece(0, k, ts, seq + done as u64));
                done += k;
            }
        }
        self.pos += n;
        Ok(())
    }

    /// Like [`take_into`](Self::take_into), but leave making the piece to
    /// another thread: the next `n` bytes are handed over as a job (the
    /// stream keeps receiving into the rest of the reservation meanwhile;
    /// the two never touch the same bytes). None in the DRAM fallback.
    pub fn take_job(&mut self, n: u32) -> Option<RxJob<'a>> {
        assert!(n <= self.available());
        if self.in_dram || n == 0 {
            return None;
        }
        let held = self.res.as_ref()?.hold(self.pos, n);
        let job = RxJob {
            held,
            at: self.stamp_at(self.pos),
            seq: self.seq(),
        };
        self.pos += n;
        Some(job)
    }

    /// Between requests: give back a large reservation once everything in
    /// it is consumed (a 1 MiB upload reservation is not kept by an idle
    /// connection).
    pub fn at_rest(&mut self) {
        if self.pos != self.end {
            return;
        }
        if self.in_dram {
            self.reset(self.base_seq + self.end as u64, 0, RxTime::Clock(0));
        } else if self
            .res
            .as_ref()
            .is_some_and(|b| b.cap() > IDLE_RESERVATION)
        {
            self.res = None;
            self.reset(self.base_seq + self.end as u64, 0, RxTime::Clock(0));
        }
    }
}

/// The later of two receive times; on a tie, `a`.
fn later(a: RxTime, b: RxTime) -> RxTime {
    if a.ns() >= b.ns() {
        a
    } else {
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_never_go_back_in_time() {
        let vol = Volume::in_memory(pktfs_layout::GeometryParams::for_size(8 << 20)).unwrap();
        let mut rx = RxStream::detached(&vol);
        // A recv whose last packet was delivered late, then one stamped
        // earlier (reordered segments), then one without a stamp.
        rx.stamp(Some(2_000));
        rx.end += 10;
        rx.stamp(Some(1_000));
        rx.end += 10;
        assert_eq!(rx.stamp_at(0), RxTime::Kernel(2_000));
        assert_eq!(
            rx.stamp_at(15),
            RxTime::Kernel(2_000),
            "clamped to the stamp before it"
        );
        rx.stamp(None);
        rx.end += 10;
        let now = rx.stamp_at(25);
        assert!(
            matches!(now, RxTime::Clock(ns) if ns > 2_000),
            "no stamp: the wall clock, and said so: {now:?}"
        );
        rx.stamp(Some(3_000));
        assert_eq!(rx.stamp_at(30), now, "the clock read stays the floor");
    }

    /// With no buffer space free the stream holds bytes in DRAM; they
    /// become records once space frees up, with their arrival time, not
    /// the time they were copied.
    #[test]
    fn bytes_held_in_dram_keep_their_kernel_time() {
        use std::io::Write;
        let vol = Volume::in_memory(pktfs_layout::GeometryParams::for_size(8 << 20)).unwrap();
        let mut hog = Vec::new();
        while let Ok(b) = vol.rx_reserve(1 << 20) {
            hog.push(b);
        }
        let l = crate::receive::stamped::listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let sent_ns = now_ns();
        c.write_all(&[7u8; 3000]).unwrap();
        let sent_end_ns = now_ns();
        std::thread::sleep(Duration::from_millis(300));
        let mut rx = RxStream::new(&vol, &s, 1 << 20);
        let n = rx.fill(3000, Duration::from_secs(5)).unwrap();
        assert!(n > 0);
        assert!(rx.in_dram, "no space: the bytes wait in DRAM");
        drop(hog);
        let taken_ns = now_ns();
        let mut out = Vec::new();
        rx.take_into(n as u32, &mut out).unwrap();
        let at = out[0].at();
        assert!(at.is_kernel(), "{at:?}");
        assert!(
            at.ns() + 1_000 >= sent_ns && at.ns() <= sent_end_ns + 25_000_000,
            "the arrival ({sent_ns}..{sent_end_ns}), not {at:?}"
        );
        assert!(at.ns() + 250_000_000 <= taken_ns);
        drop(rx);
        vol.rx_abort(out);
    }
}
