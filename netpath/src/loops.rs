//! The event loops (one per two cores): multishot accept on a
//! SO_REUSEPORT listener per loop (SO_TIMESTAMPNS set before listen),
//! multishot receive with the kernel's receive time into a provided-buffer
//! ring whose buffers are free packet buffers of the image
//! ([`pktfs_engine::RxRing`]), batched submissions, sends of one iovec per
//! record, idle deadlines on a timer heap. Protocol-agnostic: a
//! [`Protocol`] opens a [`Session`] per connection (the raw stream server
//! is one, [`crate::raw`]). The ring is an io_uring, or its epoll stand-in
//! where io_uring is not usable (`pktfs_engine::RingBackend`); the loops are the
//! same code on both. See docs/NETPATH.md, "Event loop (io_uring)" and
//! "The epoll fallback".
//!
//! [`choose`] decides at start how to serve (Auto probes io_uring and falls
//! back to the loops on epoll with the reason).

mod conn_table;
mod event_loop;
pub mod limits;
mod listen;
pub mod protocol;
pub mod wake;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use pktfs_engine::RxRingConfig;
use pktfs_fs::Volume;

use event_loop::Service;
pub use event_loop::{LoopReport, LoopShared};
pub use protocol::{CloseReason, Flow, Protocol, SendRule, Session, TurnClock};

use crate::config::IoMode;

/// How connections are served, as decided at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoChoice {
    /// io_uring event loops.
    Uring {
        loops: usize,
        /// Provided buffers are consumed incrementally (kernel 6.12+).
        incremental: bool,
    },
    /// The same event loops on epoll; `reason` says why when io_uring was
    /// wanted (Auto) but is not usable.
    Epoll {
        loops: usize,
        reason: Option<String>,
    },
    /// A thread per connection; `reason` says why the loops did not start
    /// when they were wanted.
    Threads { reason: Option<String> },
}

impl IoChoice {
    /// The loops' backend, when connections run on event loops.
    pub fn backend(&self) -> Option<pktfs_engine::RingBackend> {
        match self {
            IoChoice::Uring { .. } => Some(pktfs_engine::RingBackend::Uring),
            IoChoice::Epoll { .. } => Some(pktfs_engine::RingBackend::Epoll),
            IoChoice::Threads { .. } => None,
        }
    }
}

impl std::fmt::Display for IoChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IoChoice::Uring { loops, .. } => write!(
                f,
                "io_uring ({loops} loop{})",
                if *loops == 1 { "" } else { "s" }
            ),
            IoChoice::Epoll { loops, reason } => {
                write!(
                    f,
                    "epoll ({loops} loop{})",
                    if *loops == 1 { "" } else { "s" }
                )?;
                match reason {
                    Some(r) => write!(f, " (io_uring unavailable: {r})"),
                    None => Ok(()),
                }
            }
            IoChoice::Threads { reason: None } => f.write_str("threads"),
            IoChoice::Threads { reason: Some(r) } => write!(f, "threads ({r})"),
        }
    }
}

/// Loops to run: `wanted`, or one per two available cores (at least one).
///
/// Why not one per core: a loop's connections need kernel time that is
/// not on the loop's thread (TCP receive processing in softirq, the
/// wakeups of the peers), and every loop takes the same volume's
/// allocator lock. On 2 vCPUs with the client on the same
/// machine, one loop served more 1 KiB PUTs/s at 16 connections than two
/// (docs/DESIGN.md, "The event loops"); `--loops` sets the number.
pub fn loop_count(wanted: usize) -> usize {
    if wanted > 0 {
        return wanted;
    }
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// Decide how to serve: `Threads` and `Epoll` as asked; `Uring` if the
/// probe passes (an error otherwise); `Auto` probes and falls back to the
/// loops on epoll with the reason.
pub fn choose(mode: IoMode, loops: usize) -> std::io::Result<IoChoice> {
    match mode {
        IoMode::Threads => return Ok(IoChoice::Threads { reason: None }),
        IoMode::Epoll => {
            return Ok(IoChoice::Epoll {
                loops: loop_count(loops),
                reason: None,
            })
        }
        IoMode::Auto | IoMode::Uring => {}
    }
    match pktfs_engine::rxring::probe() {
        Ok(f) => Ok(IoChoice::Uring {
            loops: loop_count(loops),
            incremental: f.incremental,
        }),
        Err(why) if mode == IoMode::Auto => {
            tracing::warn!("io_uring is not usable here ({why}); serving on epoll loops");
            Ok(IoChoice::Epoll {
                loops: loop_count(loops),
                reason: Some(why),
            })
        }
        Err(why) => Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!("--io uring: io_uring is not usable here: {why}"),
        )),
    }
}

/// Running loops of one listener. Stopped (every connection closed, every
/// buffer back) by [`Loops::stop`] or when dropped.
#[derive(Debug)]
pub struct Loops {
    shared: Arc<LoopShared>,
    threads: Vec<JoinHandle<LoopReport>>,
    /// The bound address of each service, in the order given.
    addrs: Vec<SocketAddr>,
    loops: usize,
    nofile: u64,
    max_connections: usize,
    busy_poll: std::time::Duration,
}

/// Counters of the loops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopStats {
    pub loops: usize,
    pub active: usize,
    pub accepted: u64,
    pub refused: u64,
    pub idle_closed: u64,
    /// Connections ended because the image had no buffer space left to
    /// receive into (HTTP answered 507 first; raw kept what was stored).
    pub nospace_closed: u64,
    /// Receives read into DRAM because the ring had no buffer and the
    /// volume none to give (request heads on a full image).
    pub dram_reads: u64,
    /// Turns whose completions the loops found by busy polling.
    pub polled: u64,
    /// Polls for a peer's next bytes that found nothing before the loop
    /// slept (each cost up to `busy_poll` of CPU for nothing; after a few
    /// in a row a loop pauses polling).
    pub poll_misses: u64,
    /// Receives that found a ring empty and were re-armed after it was
    /// replenished.
    pub enobufs: u64,
    /// The soft RLIMIT_NOFILE in force (after raising it to the hard
    /// limit) and the connections it allows.
    pub nofile: u64,
    pub max_connections: usize,
    /// The loops' busy polling (`Config::busy_poll`; zero: none).
    pub busy_poll: std::time::Duration,
}

/// Share of the volume's free buffer space all rings together may hold:
/// lent space is reserved (a small image must not be emptied into rings
/// that other loops, HTTP uploads and the files themselves then lack).
const RING_SHARE: u64 = 8;

/// `want` shrunk so `loops` rings hold at most 1/RING_SHARE of the free
/// buffer space: fewer bytes per entry first (down to one buffer), then
/// fewer entries (a power of two, at least one).
pub fn fit_ring(want: RxRingConfig, vol: &Volume, loops: usize) -> RxRingConfig {
    let st = vol.statfs();
    let bs = vol.geometry().buffer_size_bytes as u64;
    let budget =
        st.blocks_free.saturating_mul(st.block_size as u64) / RING_SHARE / loops.max(1) as u64;
    let mut r = want;
    r.entries = r.entries.clamp(1, 32768).next_power_of_two().min(32768);
    r.entry_bytes = r.entry_bytes.max(bs as u32);
    if r.entries as u64 * r.entry_bytes as u64 > budget {
        let per = (budget / r.entries as u64) / bs * bs;
        r.entry_bytes = per.max(bs) as u32;
    }
    while r.entries > 1 && r.entries as u64 * r.entry_bytes as u64 > budget {
        r.entries /= 2;
    }
    r
}

impl Loops {
    /// Run `loops` loops, each serving every `(address, protocol)` of
    /// `services` on its own SO_REUSEPORT listener, all through the loop's
    /// one ring (one ring of packet buffers per core, whatever the
    /// protocol). `shared`: the counters (the server's metrics read them).
    /// `busy_poll`: see [`crate::Config::busy_poll`].
    pub fn start(
        vol: Arc<Volume>,
        services: Vec<(SocketAddr, Arc<dyn Protocol>)>,
        loops: usize,
        ring: RxRingConfig,
        busy_poll: std::time::Duration,
        shared: Arc<LoopShared>,
    ) -> std::io::Result<Loops> {
        let ring = fit_ring(ring, &vol, loops);
        let nofile = limits::raise_nofile();
        let max_connections = limits::connection_limit(nofile);
        let names: Vec<&str> = services.iter().map(|s| s.1.name()).collect();
        tracing::info!(
            "{}: RLIMIT_NOFILE {nofile}: up to {max_connections} connections on {loops} {} loop(s), each lending the kernel {} x {} bytes of packet buffers, busy polling {} us",
            names.join("+"),
            ring.backend,
            ring.entries,
            ring.entry_bytes,
            busy_poll.as_micros()
        );
        // Per service, one listener per loop (SO_REUSEPORT spreads the
        // connections over the loops); the first fixes the port.
        let mut per_loop: Vec<Vec<Service>> = (0..loops).map(|_| Vec::new()).collect();
        let mut addrs = Vec::new();
        for (addr, proto) in &services {
            let listeners = listen::reuseport_listeners(*addr, loops)?;
            addrs.push(listeners[0].local_addr()?);
            for (k, lis) in listeners.into_iter().enumerate() {
                per_loop[k].push((lis, proto.clone()));
            }
        }
        let params = event_loop::LoopParams {
            ring,
            max_connections,
            busy_poll,
        };
        let mut l = Loops {
            shared: shared.clone(),
            threads: Vec::new(),
            addrs,
            loops,
            nofile,
            max_connections,
            busy_poll,
        };
        for (k, svcs) in per_loop.into_iter().enumerate() {
            let (tx, rx) = std::sync::mpsc::channel();
            let (vol, shared) = (vol.clone(), shared.clone());
            let t = std::thread::Builder::new()
                .name(format!("pktfs-loop-{k}"))
                .spawn(move || event_loop::run(vol, svcs, shared, params, tx))?;
            l.threads.push(t);
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(std::io::Error::other("an event loop died starting")),
            }
        }
        Ok(l)
    }

    /// The bound address of service `k` (in the order given to `start`).
    pub fn addr(&self, k: usize) -> SocketAddr {
        self.addrs[k]
    }

    pub fn stats(&self) -> LoopStats {
        let s = &self.shared;
        LoopStats {
            loops: self.loops,
            active: s.active.load(Ordering::Relaxed),
            accepted: s.accepted.load(Ordering::Relaxed),
            refused: s.refused.load(Ordering::Relaxed),
            idle_closed: s.idle_closed.load(Ordering::Relaxed),
            nospace_closed: s.nospace_closed.load(Ordering::Relaxed),
            dram_reads: s.dram_reads.load(Ordering::Relaxed),
            enobufs: s.enobufs.load(Ordering::Relaxed),
            polled: s.polled.load(Ordering::Relaxed),
            poll_misses: s.poll_misses.load(Ordering::Relaxed),
            nofile: self.nofile,
            max_connections: self.max_connections,
            busy_poll: self.busy_poll,
        }
    }

    /// Stop every loop: connections are closed (what they delivered is
    /// committed), every buffer goes back to the volume.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            match t.join() {
                Ok(r) => tracing::debug!("event loop done: {r:?}"),
                Err(_) => tracing::error!("an event loop panicked"),
            }
        }
    }
}

impl Drop for Loops {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests;
