//! Whether a loop busy-polls before it sleeps: polling pays only while the
//! peer's next bytes arrive within the poll, so a loop whose polls keep
//! finding nothing stops polling for a while and then tries again.
//!
//! Why: a fixed poll after every turn with work costs up to the whole poll
//! window for each request that arrives later than that. A client sending
//! a request every 200 µs on one connection gains nothing from a 50 µs
//! poll, and pays the whole 50 µs of CPU per request for it, more than the
//! request's own cost. KVM's halt polling has the same
//! problem and shrinks its window when polls fail; it measures the time
//! the vCPU then spent blocked, which here would include the wake-up
//! latency polling exists to avoid (on a VM as long as a short gap
//! itself, so the gap would read as about twice its length). This counts
//! outcomes instead:
//!
//! - a poll that found a completion: polling pays, keep going (and forget
//!   earlier misses);
//! - [`MISSES_LIMIT`] polls in a row that found nothing: stop polling for
//!   the next `backoff` waits, doubling `backoff` each time (16 to 1024);
//!   afterwards one probe decides (found: back to polling; missed: a
//!   longer pause);
//! - while paused, a sleep that ended with completions sooner than the
//!   poll window would have lasted ends the pause at once (a poll would
//!   have caught them; the sleep's length includes the wake-up, so this
//!   only errs towards pausing).
//!
//! Only polls that wait for the peer are judged. After a turn that queued
//! a send through the ring (an answer sent at once, as a turn with one
//! receive sends it, queues nothing: `SendPath`), the loop polls for that
//! send's own completion, which comes
//! within microseconds when the socket has room; such polls always run
//! and are not counted, or a paced client (each request a found send
//! completion and a missed wait for the next request) would never let the
//! pause start. A send queued in an earlier turn and still in the kernel
//! waits for its peer to read, so the polls after it are judged like any
//! other.
//!
//! Cost bound: while the peer's gaps exceed the window, at most
//! `MISSES_LIMIT` wasted windows, then one per pause of up to 1,024 waits.

use std::time::Duration;

/// Polls in a row that found nothing before polling pauses.
const MISSES_LIMIT: u32 = 3;
/// The first pause, in waits; it doubles up to [`BACKOFF_MAX`].
const BACKOFF_START: u32 = 16;
const BACKOFF_MAX: u32 = 1024;

/// One loop's polling decisions (no clock, no I/O: the loop reports what
/// happened).
#[derive(Debug, Clone, Copy)]
pub(super) struct PollGovernor {
    /// The poll window (`Config::busy_poll`); zero: never poll.
    window: Duration,
    /// Judged polls in a row that found nothing.
    misses: u32,
    /// Waits left without polling.
    pause: u32,
    /// The next pause's length.
    backoff: u32,
}

/// What the loop should do before its next wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Plan {
    /// Sleep at once (no poll window, the last turn did nothing, or the
    /// governor is pausing).
    Sleep,
    /// Poll for up to this long, then sleep; `judged`: the outcome is
    /// reported to [`PollGovernor::polled`].
    Poll { budget: Duration, judged: bool },
}

impl PollGovernor {
    pub(super) fn new(window: Duration) -> PollGovernor {
        PollGovernor {
            window,
            misses: 0,
            pause: 0,
            backoff: BACKOFF_START,
        }
    }

    /// The plan for the wait after a turn. `worked`: the turn handled
    /// completions (an idle loop sleeps at once); `own_sends`: the turn
    /// queued sends (their completions are imminent); `until_deadline`: the
    /// loop's next timer.
    pub(super) fn plan(&mut self, worked: bool, own_sends: bool, until_deadline: Duration) -> Plan {
        if !worked || self.window.is_zero() {
            return Plan::Sleep;
        }
        let budget = self.window.min(until_deadline);
        if budget.is_zero() {
            return Plan::Sleep;
        }
        if own_sends {
            return Plan::Poll {
                budget,
                judged: false,
            };
        }
        if self.pause > 0 {
            self.pause -= 1;
            return Plan::Sleep;
        }
        // A poll cut short by a timer says nothing about the peer.
        Plan::Poll {
            budget,
            judged: budget == self.window,
        }
    }

    /// A judged poll ended: `found` whether completions came within it.
    pub(super) fn polled(&mut self, found: bool) {
        if found {
            self.misses = 0;
            self.backoff = BACKOFF_START;
            return;
        }
        self.misses += 1;
        if self.misses >= MISSES_LIMIT {
            self.pause = self.backoff;
            self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
            // After the pause one more miss pauses again.
            self.misses = MISSES_LIMIT - 1;
        }
    }

    /// A sleep (no poll before it) ended with completions after `slept`:
    /// while paused, one shorter than the window ends the pause (a poll
    /// would have found them); otherwise it changes nothing.
    pub(super) fn slept(&mut self, slept: Duration) {
        if self.pause > 0 && slept < self.window {
            self.pause = 0;
            self.polled(true);
        }
    }

    /// Whether polling is paused now.
    #[cfg(test)]
    fn paused(&self) -> bool {
        self.pause > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_micros(50);
    const FAR: Duration = Duration::from_millis(100);

    fn judged(g: &mut PollGovernor) -> bool {
        match g.plan(true, false, FAR) {
            Plan::Poll { budget, judged } => {
                assert_eq!(budget, W);
                assert!(judged);
                true
            }
            Plan::Sleep => false,
        }
    }

    /// Three judged polls that find nothing: the pause starts.
    fn miss_until_paused(g: &mut PollGovernor) {
        for _ in 0..MISSES_LIMIT {
            assert!(judged(g));
            g.polled(false);
        }
        assert!(g.paused());
    }

    /// Waits the governor sleeps through before it polls again.
    fn waits_until_probe(g: &mut PollGovernor) -> u32 {
        let mut waits = 0;
        while !judged(g) {
            waits += 1;
        }
        waits
    }

    #[test]
    fn no_window_or_idle_turn_sleeps() {
        let mut g = PollGovernor::new(Duration::ZERO);
        assert_eq!(g.plan(true, false, FAR), Plan::Sleep);
        assert_eq!(g.plan(true, true, FAR), Plan::Sleep);
        let mut g = PollGovernor::new(W);
        assert_eq!(g.plan(false, false, FAR), Plan::Sleep);
        assert_eq!(g.plan(false, true, FAR), Plan::Sleep);
    }

    #[test]
    fn polls_that_find_work_keep_polling() {
        let mut g = PollGovernor::new(W);
        for k in 0..10_000 {
            assert!(judged(&mut g), "wait {k}");
            // An occasional miss (a client hiccup) does not pause it.
            g.polled(k % 50 != 0);
        }
    }

    #[test]
    fn misses_pause_polling_with_growing_backoff() {
        let mut g = PollGovernor::new(W);
        let mut polls = 0;
        for _ in 0..100_000 {
            if judged(&mut g) {
                polls += 1;
                g.polled(false);
            }
        }
        // 3 misses, then one probe after pauses of 16, 32, ..., 1024
        // waits, then one per 1,024 waits: about 3 + 7 + 90.
        assert!((10..=110).contains(&polls), "{polls} polls");
    }

    #[test]
    fn a_found_probe_resumes_polling() {
        let mut g = PollGovernor::new(W);
        miss_until_paused(&mut g);
        assert_eq!(waits_until_probe(&mut g), BACKOFF_START);
        g.polled(true);
        assert!(!g.paused());
        // Polling again, and the backoff started over: three more misses
        // pause for 16 waits, not 32.
        miss_until_paused(&mut g);
        assert_eq!(waits_until_probe(&mut g), BACKOFF_START);
    }

    #[test]
    fn a_short_sleep_ends_the_pause() {
        let mut g = PollGovernor::new(W);
        miss_until_paused(&mut g);
        assert!(!judged(&mut g));
        g.slept(Duration::from_micros(200));
        assert!(g.paused(), "a long sleep: polling would not have paid");
        assert!(!judged(&mut g));
        g.slept(Duration::from_micros(20));
        assert!(!g.paused());
        assert!(judged(&mut g));
    }

    #[test]
    fn own_sends_are_polled_for_and_not_judged() {
        let mut g = PollGovernor::new(W);
        miss_until_paused(&mut g);
        // Paused, yet the completion of the loop's own send is polled for.
        assert_eq!(
            g.plan(true, true, FAR),
            Plan::Poll {
                budget: W,
                judged: false
            }
        );
        // A paced client: found send completion, missed next request.
        let mut g = PollGovernor::new(W);
        let mut judged_polls = 0;
        for _ in 0..10_000 {
            assert!(matches!(
                g.plan(true, true, FAR),
                Plan::Poll { judged: false, .. }
            ));
            if judged(&mut g) {
                judged_polls += 1;
                g.polled(false);
            }
        }
        assert!(judged_polls < 30, "{judged_polls}");
    }

    #[test]
    fn a_poll_cut_short_by_a_timer_is_not_judged() {
        let mut g = PollGovernor::new(W);
        let short = Duration::from_micros(5);
        assert_eq!(
            g.plan(true, false, short),
            Plan::Poll {
                budget: short,
                judged: false
            }
        );
        assert_eq!(g.plan(true, false, Duration::ZERO), Plan::Sleep);
    }
}
