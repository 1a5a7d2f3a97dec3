//! The servers' counters, kept as Prometheus metrics
//! (`prometheus-client`) and served in the text format at the HTTP
//! server's `metrics_path`.
//!
//! Hot-path cost: connections add their request counts and byte tallies
//! here in batches (every few requests and when they end, see
//! `http::conn`), so a request touches no shared cache line; the commit
//! histogram is one bucket search and two atomic adds per commit, next to
//! a commit's fences. Gauges that describe the volume (space and inodes),
//! the open connections and their spare files are read when the metrics
//! are scraped.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

use pktfs_fs::Volume;

/// Labels of an answered HTTP request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    pub method: &'static str,
    pub status: u16,
}

/// Every metric the servers keep.
pub(crate) struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    /// All requests (for [`crate::Stats`]; the family has them by label).
    pub requests_all: Counter,
    pub bytes_in: Counter,
    pub bytes_out: Counter,
    pub accepted: Counter,
    pub refused: Counter,
    pub files_stored: Counter,
    pub commit_seconds: Histogram,
    open: Gauge,
    buffer_bytes: Gauge,
    buffer_bytes_free: Gauge,
    inodes: Gauge,
    inodes_free: Gauge,
    spares: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::with_prefix("pktfs"),
            requests: Family::default(),
            requests_all: Counter::default(),
            bytes_in: Counter::default(),
            bytes_out: Counter::default(),
            accepted: Counter::default(),
            refused: Counter::default(),
            files_stored: Counter::default(),
            // 10 µs .. ~5 s: a small upload's single commit is tens of
            // microseconds, a large batch's write-back milliseconds.
            commit_seconds: Histogram::new(exponential_buckets(10e-6, 3.0, 13)),
            open: Gauge::default(),
            buffer_bytes: Gauge::default(),
            buffer_bytes_free: Gauge::default(),
            inodes: Gauge::default(),
            inodes_free: Gauge::default(),
            spares: Gauge::default(),
        };
        let r = &mut m.registry;
        r.register(
            "http_requests",
            "HTTP requests answered, by method and status code",
            m.requests.clone(),
        );
        r.register_with_unit(
            "net_received",
            "Bytes received on HTTP and raw connections (heads and bodies)",
            Unit::Bytes,
            m.bytes_in.clone(),
        );
        r.register_with_unit(
            "net_sent",
            "Bytes of HTTP answers the kernel took (heads and bodies)",
            Unit::Bytes,
            m.bytes_out.clone(),
        );
        r.register(
            "net_connections_accepted",
            "Connections accepted and served",
            m.accepted.clone(),
        );
        r.register(
            "net_connections_refused",
            "Connections refused (over the connection cap, or no thread)",
            m.refused.clone(),
        );
        r.register(
            "net_connections_open",
            "Connections being served now",
            m.open.clone(),
        );
        r.register(
            "net_files_stored",
            "Files stored (uploads linked, raw streams created)",
            m.files_stored.clone(),
        );
        r.register_with_unit(
            "commit_duration",
            "Time of the commits that make received data durable (batches and the final commit+link)",
            Unit::Seconds,
            m.commit_seconds.clone(),
        );
        r.register_with_unit(
            "pm_buffer",
            "Packet-buffer space of the volume",
            Unit::Bytes,
            m.buffer_bytes.clone(),
        );
        r.register_with_unit(
            "pm_buffer_free",
            "Free packet-buffer space of the volume",
            Unit::Bytes,
            m.buffer_bytes_free.clone(),
        );
        r.register("pm_inodes", "Inodes of the volume", m.inodes.clone());
        r.register(
            "pm_inodes_free",
            "Free inodes of the volume",
            m.inodes_free.clone(),
        );
        r.register(
            "http_spare_files",
            "Unnamed files keep-alive connections made ahead of their next upload (at most 256; each holds an inode)",
            m.spares.clone(),
        );
        m
    }

    /// The text exposition (format 0.0.4 / OpenMetrics text), with the
    /// gauges read now.
    pub fn render(
        &self,
        vol: &Volume,
        open: usize,
        spares: usize,
        loops: &crate::loops::LoopShared,
        extra: Option<&crate::config::Extra>,
    ) -> String {
        let st = vol.statfs();
        let bs = st.block_size as u64;
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.open.set(clamp(open as u64));
        self.spares.set(clamp(spares as u64));
        self.buffer_bytes.set(clamp(st.blocks.saturating_mul(bs)));
        self.buffer_bytes_free
            .set(clamp(st.blocks_free.saturating_mul(bs)));
        self.inodes.set(clamp(st.files));
        self.inodes_free.set(clamp(st.files_free));
        let mut out = String::with_capacity(4096);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        // The loops count these themselves (they are bumped where the loop
        // already holds the line); read them now. Before the OpenMetrics
        // end marker, in the same text form.
        use std::sync::atomic::Ordering::Relaxed;
        let mut more = String::new();
        let mut add = |name: &str, help: &str, counter: bool, value: u64| {
            let (kind, suffix) = if counter {
                ("counter", "_total")
            } else {
                ("gauge", "")
            };
            let name = format!("pktfs_{name}");
            more +=
                &format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{suffix} {value}\n");
        };
        let loop_counters = [
            (
                "net_connections_idle_closed",
                "Connections the io_uring loops closed for idling or trickling past their timeout",
                &loops.idle_closed,
            ),
            (
                "net_connections_nospace_closed",
                "Connections the io_uring loops ended because the image had no buffer space to receive into",
                &loops.nospace_closed,
            ),
            (
                "net_ring_empty",
                "Receives on the io_uring loops that found the provided-buffer ring empty and waited for it to be refilled",
                &loops.enobufs,
            ),
            (
                "net_busy_poll_turns",
                "Turns of the io_uring loops whose completions were found by busy polling instead of sleeping",
                &loops.polled,
            ),
            (
                "net_busy_poll_misses",
                "Busy polls of the io_uring loops that found nothing before the loop slept (CPU spent for no latency; polling pauses after a few in a row)",
                &loops.poll_misses,
            ),
            (
                "net_dram_reads",
                "Receives the io_uring loops read into DRAM because the image had no buffer to lend (request heads on a full image)",
                &loops.dram_reads,
            ),
        ];
        for (name, help, n) in loop_counters {
            add(name, help, true, n.load(Relaxed));
        }
        if let Some(x) = extra {
            for s in (x.0)() {
                add(s.name, s.help, s.counter, s.value);
            }
        }
        let eof = out.rfind("# EOF").unwrap_or(out.len());
        out.insert_str(eof, &more);
        out
    }
}
