//! What a connection counts (requests by method and status, bytes in and
//! out, files stored) and its access log: added to the shared metrics in
//! batches, not per request.

use super::Conn;
use crate::metrics::RequestLabels;

/// Requests between additions of a connection's tally to the shared
/// metrics ([`crate::Services::stats`] lags a busy connection by at most
/// this many).
const TALLY_EVERY: u64 = 32;

/// This connection's counts not yet added to the shared metrics: added
/// every `TALLY_EVERY` requests and at the end, not per request (shared
/// atomics moved a cache line between the cores serving different
/// connections on every request).
#[derive(Debug, Default)]
pub(super) struct Tally {
    requests: u64,
    /// (method, status) -> count; a handful of entries per connection.
    by_label: Vec<(&'static str, u16, u64)>,
    bytes_in: u64,
    bytes_out: u64,
    files_stored: u64,
}

impl Conn<'_> {
    /// Count the request and write its access-log line.
    pub(in crate::http) fn end_request(&mut self) {
        let r = &self.req;
        let t = &mut self.tally;
        t.requests += 1;
        match t
            .by_label
            .iter_mut()
            .find(|(m, s, _)| *m == r.method && *s == r.status)
        {
            Some(e) => e.2 += 1,
            None => t.by_label.push((r.method, r.status, 1)),
        }
        tracing::info!(
            target: "pktfs::access",
            peer = %self.peer,
            method = r.method,
            path = %self.path.display(),
            status = r.status,
            bytes_in = self.in_pos.saturating_sub(r.in_before),
            bytes_out = self.conn_out - r.out_before,
            us = r.started.elapsed().as_micros() as u64,
            "access"
        );
        if self.tally.requests >= TALLY_EVERY {
            self.flush_tally();
        }
    }

    pub(super) fn flush_tally(&mut self) {
        let t = std::mem::take(&mut self.tally);
        let m = &self.sh.metrics;
        if t.requests > 0 {
            m.requests_all.inc_by(t.requests);
        }
        for (method, status, n) in t.by_label {
            m.requests
                .get_or_create(&RequestLabels { method, status })
                .inc_by(n);
        }
        for (n, c) in [
            (t.bytes_in, &m.bytes_in),
            (t.bytes_out, &m.bytes_out),
            (t.files_stored, &m.files_stored),
        ] {
            if n > 0 {
                c.inc_by(n);
            }
        }
    }

    pub(in crate::http) fn add_in(&mut self, n: u64) {
        self.conn_in += n;
        self.tally.bytes_in += n;
    }

    /// `n` bytes of answers sent (threads: the socket took them).
    pub(in crate::http) fn add_out(&mut self, n: u64) {
        self.conn_out += n;
        self.tally.bytes_out += n;
    }

    /// `n` bytes of answers queued for an event loop to send: the
    /// request's size in the access log; counted as sent ([`Self::add_sent`])
    /// only once the kernel took them, so a client that never reads does
    /// not inflate `bytes_out`.
    pub(in crate::http) fn add_queued(&mut self, n: u64) {
        self.conn_out += n;
    }

    /// An event loop's send completed: `n` bytes went to the kernel.
    pub(in crate::http) fn add_sent(&mut self, n: u64) {
        self.tally.bytes_out += n;
    }

    pub(in crate::http) fn stored_file(&mut self) {
        self.tally.files_stored += 1;
    }
}
