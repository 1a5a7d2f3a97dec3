//! The threaded transport's pace rule for request bodies
//! (`Config::min_recv_rate`, and a chunk-size line's or trailer section's
//! `header_timeout`), the same rule the loops keep on their timers
//! (`session.rs`, "Timeouts"): a body is judged over each `io_timeout`
//! window from the end of its head; one that brought less than the rate
//! in a window, or whose line is not complete within `header_timeout` of
//! its first byte, gets no more time: it must end within `io_timeout` of
//! its last bytes before the judgement, whatever it sends after. Without
//! it a byte just under every `io_timeout` held the connection's thread
//! for ever.
//!
//! Cost on the fast path: a body that arrives with its head never waits,
//! so the rule is a few stores per body; a body that is read in many
//! receives keeps the socket's receive timeout at `io_timeout` (no
//! `setsockopt` per receive) while its window already has its bytes and no
//! line is under way.

use std::time::{Duration, Instant};

use crate::config::Config;

/// One body's pace, reset when the body begins ([`RecvPace::begin`]).
#[derive(Debug, Default)]
pub(super) struct RecvPace {
    /// End of the current window; None until the body first waits (it
    /// then runs from the head's end).
    window_end: Option<Instant>,
    window_bytes: u64,
    /// Bytes came since the last wait began.
    fresh: bool,
    /// When the last bytes were taken (as seen by the next wait).
    last: Option<Instant>,
    /// The chunk-size line or trailer section under way began then.
    line_since: Option<Instant>,
    /// The rule was broken: the body must end by then.
    frozen: Option<Instant>,
}

/// Why a wait may not go on: the body is answered 408.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct TooSlow;

impl RecvPace {
    /// A body begins.
    #[inline]
    pub(super) fn begin(&mut self) {
        *self = RecvPace::default();
    }

    /// `n` bytes were received.
    #[inline]
    pub(super) fn got(&mut self, n: u64) {
        self.window_bytes = self.window_bytes.saturating_add(n);
        self.fresh = true;
    }

    /// A chunk-size line or trailer section is incomplete: its deadline
    /// runs from now unless it already runs.
    pub(super) fn line_open(&mut self) {
        if self.line_since.is_none() {
            self.line_since = Some(Instant::now());
        }
    }

    /// The line is complete.
    #[inline]
    pub(super) fn line_done(&mut self) {
        self.line_since = None;
    }

    /// Before a receive at `now` (the head ended at `head_end`): how long
    /// the receive may wait, or [`TooSlow`].
    pub(super) fn wait(
        &mut self,
        now: Instant,
        head_end: Instant,
        cfg: &Config,
    ) -> Result<Duration, TooSlow> {
        let io = cfg.io_timeout;
        if std::mem::take(&mut self.fresh) {
            self.last = Some(now);
        }
        let last = *self.last.get_or_insert(head_end);
        if let Some(d) = self.frozen {
            return d
                .checked_duration_since(now)
                .filter(|t| !t.is_zero())
                .ok_or(TooSlow);
        }
        let silent_until = last + io;
        if silent_until <= now {
            return Err(TooSlow);
        }
        let need = cfg.min_window_bytes();
        let mut until = silent_until;
        let mut judged = false;
        if need > 0 {
            let end = *self.window_end.get_or_insert(head_end + io);
            if end <= now {
                if self.window_bytes < need {
                    tracing::info!(
                        "a request body brought {} bytes in {io:?} (min_recv_rate {}/s); no more time",
                        self.window_bytes,
                        cfg.min_recv_rate
                    );
                    return self.freeze(silent_until, now);
                }
                self.window_end = Some(now + io);
                self.window_bytes = 0;
            }
            if self.window_bytes < need {
                judged = true;
                until = until.min(self.window_end.unwrap_or(now + io));
            }
        }
        if let Some(s) = self.line_since {
            let d = s + cfg.header_timeout;
            if d <= now {
                tracing::info!(
                    "a chunk-size line or trailer section not complete within header_timeout; no more time"
                );
                return self.freeze(silent_until, now);
            }
            judged = true;
            until = until.min(d);
        }
        if !judged {
            // Nothing to judge before the silence limit: the constant
            // timeout, so the socket option is not set again.
            return Ok(io);
        }
        Ok(until
            .saturating_duration_since(now)
            .max(Duration::from_millis(1)))
    }

    fn freeze(&mut self, until: Instant, now: Instant) -> Result<Duration, TooSlow> {
        self.frozen = Some(until);
        until
            .checked_duration_since(now)
            .filter(|t| !t.is_zero())
            .ok_or(TooSlow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config {
            io_timeout: Duration::from_secs(1),
            header_timeout: Duration::from_secs(1),
            min_recv_rate: 1024,
            ..Config::default()
        }
    }

    #[test]
    fn a_trickle_is_stopped_within_two_windows() {
        let c = cfg();
        let t0 = Instant::now();
        let mut p = RecvPace::default();
        p.begin();
        let mut at = t0;
        let mut stopped = None;
        // A byte every 0.9 s: each inside io_timeout.
        for k in 1..10u32 {
            let w = p.wait(at, t0, &c);
            match w {
                Err(TooSlow) => {
                    stopped = Some(at);
                    break;
                }
                Ok(t) => {
                    let next = t0 + Duration::from_millis(900) * k;
                    if at + t < next {
                        // The wait ends before the byte: judged then.
                        at += t;
                        if p.wait(at, t0, &c).is_err() {
                            stopped = Some(at);
                            break;
                        }
                    }
                    at = next;
                    p.got(1);
                }
            }
        }
        let s = stopped.expect("the trickle was never stopped");
        assert!(
            s - t0 <= Duration::from_millis(2100),
            "stopped after {:?}",
            s - t0
        );
    }

    #[test]
    fn a_steady_body_is_never_stopped() {
        let c = cfg();
        let t0 = Instant::now();
        let mut p = RecvPace::default();
        for k in 0..100u32 {
            // 10 KiB/s in 1 KiB pieces.
            let now = t0 + Duration::from_millis(100) * k;
            assert!(p.wait(now, t0, &c).is_ok(), "stopped at piece {k}");
            p.got(1024);
        }
    }

    #[test]
    fn a_slow_line_is_stopped() {
        let c = cfg();
        let t0 = Instant::now();
        let mut p = RecvPace::default();
        p.got(4096);
        p.line_open();
        let since = Instant::now();
        assert!(p.wait(since + Duration::from_millis(500), t0, &c).is_ok());
        p.got(1);
        // Past the line's deadline: frozen, the end is the last bytes'
        // io_timeout.
        let r = p.wait(since + Duration::from_millis(1100), t0, &c);
        assert!(matches!(r, Ok(t) if t <= Duration::from_secs(1)), "{r:?}");
        p.got(1);
        assert_eq!(
            p.wait(since + Duration::from_millis(2200), t0, &c),
            Err(TooSlow)
        );
    }
}
