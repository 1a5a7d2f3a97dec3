//! GET of a range with tiered records: fetched from the store and sent a
//! window at a time (`Config::tier_window_bytes` of fetched records), so
//! a connection holds at most two windows in DRAM (one being sent, the
//! next fetched meanwhile), never the whole range.
//!
//! On an event loop the fetches run on the server's fetch threads
//! (`crate::transmit::fetch`), never on the loop: the answer waits in the
//! connection's [`super::Outbox`] ([`Tiered`]) and its windows are queued as
//! messages once their bytes are in (the loop is woken, the session calls
//! [`Conn::pump_tiered`]). Requests pipelined behind it wait (parsing is
//! paused), so answers stay in order. On the threads transport the
//! connection's own thread fetches, one window at a time, charged against
//! the same budget.
//!
//! # Failures
//! The head (status, Content-Length, ETag) goes with the first window,
//! once its bytes are in and checked: a store that is down or bytes that
//! fail their CRC before then are answered with an error (503, 500).
//! After, a window that cannot be had cuts the connection (logged with the
//! cause): the client sees fewer bytes than Content-Length said, never a
//! wrong byte and never a short body that looks complete.
//!
//! Everything a tiered answer holds (its plan's references and pinned
//! objects, windows fetched or being fetched, their budget) is given back
//! when it is dropped, which is also what happens to a connection that
//! closes mid-answer: a fetch in flight then finishes into a cancelled
//! slot and its bytes are dropped at once.

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use pktfs_engine::TxMsg;
use pktfs_fs::{FsError, TxHold, TxKeep, TxPlan, TxWindow};

use super::{held_len, msg_dram, Conn};
use crate::http::response::status_of;
use crate::transmit::fetch::{Charge, FetchError, Job, Slot};

/// Windows of one connection in DRAM at once: one being sent, the next
/// fetched meanwhile.
const WINDOWS_PER_CONN: usize = 2;

/// One window of a connection alive (asked for, fetched, queued or being
/// sent): dropped with the window's hold, or with the window when it
/// never became one.
#[derive(Debug)]
struct WindowToken(Arc<AtomicUsize>);

impl WindowToken {
    fn new(n: &Arc<AtomicUsize>) -> WindowToken {
        n.fetch_add(1, Ordering::Relaxed);
        WindowToken(n.clone())
    }
}

impl Drop for WindowToken {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A tiered answer under way on an event loop.
pub(in crate::http) struct Tiered<'a> {
    plan: TxPlan<'a>,
    /// The answer's head, sent with the first window.
    head: Option<Vec<u8>>,
    /// Keep the connection after the answer (for an error answered instead).
    keep: bool,
    /// Windows asked for, in order.
    pending: VecDeque<(TxWindow, Arc<Slot>, WindowToken)>,
    /// A window the fetch queue had no place for, asked again when woken.
    unsent: Option<Job>,
    live: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Tiered<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tiered")
            .field("pending", &self.pending.len())
            .field("live", &self.live.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Drop for Tiered<'_> {
    fn drop(&mut self) {
        // Fetches in flight drop their bytes when they finish.
        for (_, slot, _) in &self.pending {
            slot.cancel();
        }
        if let Some(j) = &self.unsent {
            j.slot.cancel();
        }
    }
}

/// The status for a window that could not be had before the head went.
fn status_for(e: &FetchError) -> u16 {
    match e {
        FetchError::Fs(FsError::Remote(_)) | FetchError::Deadline | FetchError::Stopped => 503,
        FetchError::Fs(e) => status_of(e),
    }
}

impl<'a> Conn<'a> {
    /// Send the answer whose head is in `self.out` with the planned range
    /// as its body, a window at a time (module docs). False: the
    /// connection ends.
    pub(in crate::http) fn send_tiered(&mut self, plan: TxPlan<'a>, keep: bool) -> bool {
        match self.sock {
            Some(sock) => self.send_tiered_blocking(sock, plan, keep),
            None => {
                let head = std::mem::take(&mut self.out);
                let t = Tiered {
                    plan,
                    head: Some(head),
                    keep,
                    pending: VecDeque::new(),
                    unsent: None,
                    live: Arc::new(AtomicUsize::new(0)),
                };
                self.outbox.get_or_insert_with(Default::default).tiered = Some(t);
                // The first window is asked for now; the rest follows from
                // the session's flow.
                self.pump_tiered() && keep
            }
        }
    }

    /// Move a loop's tiered answer on: windows whose bytes are in are
    /// queued (in order), the next ones asked for. False: it failed after
    /// its head went out and the connection must be cut (logged).
    pub(in crate::http) fn pump_tiered(&mut self) -> bool {
        let Some(mut t) = self.outbox.as_mut().and_then(|o| o.tiered.take()) else {
            return true;
        };
        loop {
            if let Some(j) = t.unsent.take() {
                if let Err(j) = self.sh.fetch.try_submit(j) {
                    t.unsent = Some(j);
                }
            }
            let queued = match self.queue_ready(&mut t) {
                Ok(n) => n,
                Err(e) => return self.tiered_failed(t, e),
            };
            let asked = self.ask_windows(&mut t);
            if queued == 0 && asked == 0 {
                break;
            }
        }
        if !(t.plan.all_taken() && t.pending.is_empty()) {
            if let Some(o) = self.outbox.as_mut() {
                o.tiered = Some(t);
            }
        }
        true
    }

    /// Queue the windows at the front whose bytes are in; how many.
    fn queue_ready(&mut self, t: &mut Tiered<'a>) -> Result<usize, FetchError> {
        let mut n = 0;
        while let Some(r) = t.pending.front().and_then(|p| p.1.take()) {
            let (w, _, token) = t.pending.pop_front().expect("looked at");
            let (f, charge) = r?;
            let keep: (Option<Charge>, WindowToken) = (charge, token);
            let hold = t.plan.take(w, f, Some(TxKeep(Box::new(keep))))?;
            let head = t.head.take().unwrap_or_default();
            let len = head.len() as u64 + held_len(&hold);
            let ob = self.outbox.get_or_insert_with(Default::default);
            ob.queued_bytes += msg_dram(head.len(), Some(&hold));
            ob.msgs.push_back(TxMsg {
                head,
                hold: Some(hold),
            });
            self.add_queued(len);
            n += 1;
        }
        Ok(n)
    }

    /// Ask for windows while the connection has fewer than
    /// [`WINDOWS_PER_CONN`] alive; how many.
    fn ask_windows(&mut self, t: &mut Tiered<'a>) -> usize {
        let cfg = &self.sh.cfg;
        let mut n = 0;
        while t.unsent.is_none() && t.live.load(Ordering::Relaxed) < WINDOWS_PER_CONN {
            let Some(w) = t.plan.plan_window(cfg.tier_window_bytes) else {
                break;
            };
            n += 1;
            let token = WindowToken::new(&t.live);
            if w.fetch_bytes() == 0 {
                // Local records and holes only: nothing to fetch.
                let r = self.vol.tx_fetch(&w).map(|f| (f, None)).map_err(Into::into);
                t.pending.push_back((w, Slot::ready(r), token));
                continue;
            }
            let waker = self.outbox.as_ref().and_then(|o| o.waker.clone());
            if waker.is_none() {
                tracing::error!(
                    "a loop session without a waker: its tiered windows are never seen"
                );
            }
            let slot = Slot::new(waker);
            let job = Job {
                vol: self.sh.vol.clone(),
                window: w.clone(),
                slot: slot.clone(),
                deadline: self.now() + cfg.io_timeout,
            };
            t.pending.push_back((w, slot, token));
            if let Err(j) = self.sh.fetch.try_submit(job) {
                t.unsent = Some(j);
            }
        }
        n
    }

    /// A window could not be had: before the head went, answer the error
    /// instead; after, cut the connection. Returns what `pump_tiered` does.
    fn tiered_failed(&mut self, t: Tiered<'a>, e: FetchError) -> bool {
        let started = t.head.is_none();
        let keep = t.keep;
        drop(t);
        if started {
            tracing::warn!(
                peer = %self.peer,
                path = %self.path.display(),
                "a tiered GET failed mid-body: {e}; connection cut"
            );
            return false;
        }
        self.error(
            status_for(&e),
            &format!("{}: {e}", self.path.display()),
            keep,
        );
        if !keep {
            self.linger();
        }
        true
    }

    /// The threads transport: fetch each window on this thread (charged
    /// against the server's budget), then send it.
    fn send_tiered_blocking(&mut self, sock: &TcpStream, mut plan: TxPlan<'a>, keep: bool) -> bool {
        let mut first = true;
        while let Some(w) = plan.plan_window(self.sh.cfg.tier_window_bytes) {
            let hold = match self.fetch_window(&mut plan, w) {
                Ok(h) => h,
                Err(e) if first => {
                    self.out.clear();
                    self.error(
                        status_for(&e),
                        &format!("{}: {e}", self.path.display()),
                        keep,
                    );
                    if !keep {
                        self.linger();
                    }
                    return keep;
                }
                Err(e) => {
                    tracing::warn!(
                        peer = %self.peer,
                        path = %self.path.display(),
                        "a tiered GET failed mid-body: {e}; connection cut"
                    );
                    let _ = sock.shutdown(Shutdown::Both);
                    return false;
                }
            };
            // The head goes with the first window (`self.out`), then is
            // cleared so later windows go alone.
            if !self.send_with(Some(hold), false) {
                return false;
            }
            self.out.clear();
            first = false;
        }
        keep
    }

    fn fetch_window(&self, plan: &mut TxPlan<'a>, w: TxWindow) -> Result<TxHold<'a>, FetchError> {
        let bytes = w.fetch_bytes();
        let charge = if bytes > 0 {
            let deadline = Instant::now() + self.sh.cfg.io_timeout;
            Some(self.sh.fetch.reserve(bytes, deadline)?)
        } else {
            None
        };
        let f = self.vol.tx_fetch(&w)?;
        Ok(plan.take(w, f, Some(TxKeep(Box::new(charge))))?)
    }
}
