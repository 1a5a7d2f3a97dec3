//! Tiering from the command line: the `--tier` options of mount, serve and
//! up; `pktfs tier` (one pass, a snapshot, a collection or the state, on an
//! image no process holds); `pktfs restore` (an image from a bucket).
//!
//! The store is reached the way AWS tools reach it: credentials, region and
//! endpoint from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
//! AWS_REGION, AWS_ENDPOINT_URL, AWS_PROFILE) and ~/.aws/config and
//! ~/.aws/credentials; `--tier-endpoint` and `--tier-region` override.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pktfs_fs::Volume;
use pktfs_tier::engine::{Tier, TierConfig};
use pktfs_tier::s3::{ObjectStore, StoreOptions};
use pktfs_tier::target::TierTarget;

fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("not a duration ({e}); e.g. 90s, 10m, 1h"))
}

fn fraction(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| "not a percentage, e.g. 80%".to_string())?;
    if !(0.0..=100.0).contains(&v) {
        return Err("a percentage between 0 and 100".into());
    }
    Ok(v / 100.0)
}

/// `--tier` and its policy, shared by mount, serve and up.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TierArgs {
    /// Tier cold data to an S3-compatible store: s3://BUCKET/PREFIX.
    /// Credentials, region and endpoint as AWS tools take them
    /// (AWS_* environment, ~/.aws/config and credentials).
    #[arg(long, value_name = "URL", value_parser = parse_target)]
    pub tier: Option<TierTarget>,
    /// The store's endpoint URL (default: AWS_ENDPOINT_URL, else AWS).
    #[arg(long, value_name = "URL", requires = "tier")]
    pub tier_endpoint: Option<String>,
    /// The store's region (default: AWS_REGION / the profile's).
    #[arg(long, value_name = "REGION", requires = "tier")]
    pub tier_region: Option<String>,
    /// Tier out files not modified for this long; "off": only when PM
    /// passes the high watermark [default: 1h].
    #[arg(long, value_name = "AGE", requires = "tier")]
    pub tier_age: Option<String>,
    /// PM use above which the least recently used files are tiered out
    /// [default: 80%].
    #[arg(long, value_name = "PCT", value_parser = fraction, requires = "tier")]
    pub tier_high: Option<f64>,
    /// ... until PM use is below this [default: 60%].
    #[arg(long, value_name = "PCT", value_parser = fraction, requires = "tier")]
    pub tier_low: Option<f64>,
    /// Size of the segment objects small files are packed into
    /// [default: 32M].
    #[arg(long, value_name = "SIZE", value_parser = pktfs_support::size::parse_size, requires = "tier")]
    pub tier_segment: Option<u64>,
    /// Uploads in flight at once [default: 4].
    #[arg(long, value_name = "N", requires = "tier")]
    pub tier_concurrency: Option<usize>,
    /// Upload bandwidth limit per second, e.g. 100M [default: none].
    #[arg(long, value_name = "SIZE", value_parser = pktfs_support::size::parse_size, requires = "tier")]
    pub tier_bandwidth: Option<u64>,
    /// While clients are writing, tier-out that PM use does not force
    /// (below the high watermark) goes at most this fast, so ingest keeps
    /// its pace; "off": never yield [default: 32M].
    #[arg(long, value_name = "SIZE", value_parser = size_or_off, requires = "tier")]
    pub tier_busy_bandwidth: Option<SizeOrOff>,
    /// How often the policy runs [default: 5s].
    #[arg(long, value_name = "DURATION", value_parser = duration, requires = "tier")]
    pub tier_interval: Option<Duration>,
    /// How often a metadata snapshot is uploaded when anything changed
    /// [default: 5m]; it bounds what a lost machine loses.
    #[arg(long, value_name = "DURATION", value_parser = duration, requires = "tier")]
    pub tier_snapshot_interval: Option<Duration>,
    /// Bring a file back into PM after this many record reads through the
    /// tier between two policy runs; "off" never [default: 64].
    #[arg(long, value_name = "N", requires = "tier")]
    pub tier_promote_after: Option<String>,
    /// Read-through: 8 MiB windows fetched ahead of a sequential reader,
    /// 0..=16 [default: 8]. More keeps a distant store busy; fewer leaves
    /// CPU to a store on the same machine.
    #[arg(long, value_name = "N", requires = "tier")]
    pub tier_readahead: Option<u64>,
}

fn parse_target(s: &str) -> Result<TierTarget, String> {
    s.parse::<TierTarget>().map_err(|e| e.to_string())
}

impl TierArgs {
    pub fn config(&self) -> Result<TierConfig, String> {
        let mut c = TierConfig::default();
        if let Some(a) = &self.tier_age {
            c.age = if a == "off" { None } else { Some(duration(a)?) };
        }
        if let Some(v) = self.tier_high {
            c.high_watermark = v;
        }
        if let Some(v) = self.tier_low {
            c.low_watermark = v;
        }
        if c.low_watermark > c.high_watermark {
            return Err(format!(
                "--tier-low ({:.0}%) is above --tier-high ({:.0}%)",
                c.low_watermark * 100.0,
                c.high_watermark * 100.0
            ));
        }
        if let Some(v) = self.tier_segment {
            if v < 1 << 20 {
                return Err("--tier-segment must be at least 1M".into());
            }
            c.segment_bytes = v;
        }
        if let Some(v) = self.tier_concurrency {
            if v == 0 || v > 256 {
                return Err("--tier-concurrency must be 1..256".into());
            }
            c.concurrency = v;
        }
        c.bandwidth_bytes_per_s = self.tier_bandwidth;
        if let Some(SizeOrOff(v)) = self.tier_busy_bandwidth {
            c.busy_bandwidth_bytes_per_s = v;
        }
        if let Some(v) = self.tier_interval {
            c.scan_interval = v.max(Duration::from_millis(100));
        }
        if let Some(v) = self.tier_snapshot_interval {
            c.snapshot_interval = v;
        }
        if let Some(n) = self.tier_readahead {
            if n > 16 {
                return Err(format!("--tier-readahead {n}: at most 16 windows"));
            }
            c.readahead_windows = n;
        }
        if let Some(p) = &self.tier_promote_after {
            c.promote_after_reads = if p == "off" {
                None
            } else {
                Some(
                    p.parse()
                        .map_err(|_| format!("--tier-promote-after {p}: a number or off"))?,
                )
            };
        }
        Ok(c)
    }

    fn store_options(&self) -> StoreOptions {
        StoreOptions {
            endpoint: self.tier_endpoint.clone(),
            region: self.tier_region.clone(),
            ..StoreOptions::default()
        }
    }

    /// The flags again, for a daemon's command line.
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> = Vec::new();
        let Some(t) = &self.tier else { return v };
        v.extend(["--tier".into(), t.to_string().into()]);
        let mut opt = |k: &str, val: Option<String>| {
            if let Some(val) = val {
                v.extend([k.into(), val.into()]);
            }
        };
        opt("--tier-endpoint", self.tier_endpoint.clone());
        opt("--tier-region", self.tier_region.clone());
        opt("--tier-age", self.tier_age.clone());
        opt(
            "--tier-high",
            self.tier_high.map(|f| format!("{}%", f * 100.0)),
        );
        opt(
            "--tier-low",
            self.tier_low.map(|f| format!("{}%", f * 100.0)),
        );
        opt("--tier-segment", self.tier_segment.map(|n| n.to_string()));
        opt(
            "--tier-concurrency",
            self.tier_concurrency.map(|n| n.to_string()),
        );
        opt(
            "--tier-bandwidth",
            self.tier_bandwidth.map(|n| n.to_string()),
        );
        opt(
            "--tier-busy-bandwidth",
            self.tier_busy_bandwidth
                .map(|SizeOrOff(v)| v.map_or("off".into(), |n| n.to_string())),
        );
        opt(
            "--tier-interval",
            self.tier_interval.map(|d| format!("{}ms", d.as_millis())),
        );
        opt(
            "--tier-snapshot-interval",
            self.tier_snapshot_interval
                .map(|d| format!("{}ms", d.as_millis())),
        );
        opt("--tier-promote-after", self.tier_promote_after.clone());
        opt(
            "--tier-readahead",
            self.tier_readahead.map(|n| n.to_string()),
        );
        v
    }

    /// Start the engine on `vol` when `--tier` was given.
    pub fn start(&self, vol: &Arc<Volume>) -> Result<Option<Tier>, String> {
        let Some(t) = &self.tier else { return Ok(None) };
        let cfg = self.config()?;
        let store =
            ObjectStore::connect(t, &self.store_options()).map_err(|e| format!("tier {t}: {e}"))?;
        // A read-only image reads through the tier; nothing is tiered out.
        let background = !vol.is_read_only();
        Tier::start(vol.clone(), t.clone(), store, cfg, background)
            .map(Some)
            .map_err(|e| format!("tier {t}: {e}"))
    }
}

/// A size, or "off".
#[derive(Clone, Copy, Debug)]
pub struct SizeOrOff(pub Option<u64>);

fn size_or_off(s: &str) -> Result<SizeOrOff, String> {
    if s == "off" {
        return Ok(SizeOrOff(None));
    }
    pktfs_support::size::parse_size(s)
        .map(|n| SizeOrOff(Some(n)))
        .map_err(|e| format!("{e} (a size such as 32M, or off)"))
}

/// The engine's counters for /metrics and `pktfs stat`.
pub fn extra(t: &Tier) -> pktfs_netpath::Extra {
    let r = t.stats_handle();
    pktfs_netpath::Extra(Arc::new(move || {
        let s = r.snapshot();
        let c = |name, help, value| pktfs_netpath::ExtraStat {
            name,
            help,
            value,
            counter: true,
        };
        let g = |name, help, value| pktfs_netpath::ExtraStat {
            name,
            help,
            value,
            counter: false,
        };
        vec![
            c(
                "tier_files",
                "Files tiered out to the object store",
                s.files_tiered,
            ),
            c(
                "tier_bytes",
                "Bytes tiered out (PM space freed)",
                s.bytes_tiered,
            ),
            c(
                "tier_objects_uploaded",
                "Objects uploaded",
                s.objects_uploaded,
            ),
            c("tier_upload_bytes", "Bytes uploaded", s.bytes_uploaded),
            c(
                "tier_upload_errors",
                "Uploads that failed (their files stay in PM)",
                s.upload_errors,
            ),
            g(
                "tier_backlog_files",
                "Files the current pass chose and has not finished",
                s.backlog_files,
            ),
            g(
                "tier_backlog_bytes",
                "PM bytes the current pass chose and has not finished",
                s.backlog_bytes,
            ),
            c(
                "tier_yielded_ms",
                "Milliseconds tier-out waited for writing clients",
                s.yielded_ms,
            ),
            c("tier_fetches", "Ranged GETs for read-through", s.fetches),
            c(
                "tier_fetch_bytes",
                "Bytes fetched for read-through",
                s.fetch_bytes,
            ),
            c(
                "tier_cache_hits",
                "Read-through reads served from the cache",
                s.cache_hits,
            ),
            c(
                "tier_fetch_errors",
                "Read-through fetches that failed",
                s.fetch_errors,
            ),
            c(
                "tier_recalled_files",
                "Files brought back into PM",
                s.recalled_files,
            ),
            c(
                "tier_objects_deleted",
                "Objects deleted by collection",
                s.objects_deleted,
            ),
            c("tier_snapshots", "Metadata snapshots uploaded", s.snapshots),
            g(
                "tier_last_snapshot",
                "Sequence number of the last snapshot",
                s.last_snapshot_seq,
            ),
        ]
    }))
}

/// `pktfs tier`: work on an image no process holds.
#[derive(clap::Args, Debug)]
pub struct TierCmdArgs {
    #[command(subcommand)]
    pub what: TierWhat,
}

#[derive(clap::Subcommand, Debug)]
pub enum TierWhat {
    /// Run one tier-out pass now (`--all`: every file with data in PM),
    /// upload a snapshot, and print what was done.
    Out {
        /// The image file.
        image: PathBuf,
        /// Every file, whatever the age and watermarks say.
        #[arg(long)]
        all: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        tier: TierArgs,
    },
    /// Bring every tiered file of the image back into PM.
    Recall {
        /// The image file (not mounted or served).
        image: PathBuf,
        #[command(flatten)]
        tier: TierArgs,
    },
    /// Delete objects nothing references and compact mostly dead ones.
    Collect {
        /// The image file (not mounted or served).
        image: PathBuf,
        #[command(flatten)]
        tier: TierArgs,
    },
}

fn open_for_tier(image: &std::path::Path, t: &TierArgs) -> Result<(Arc<Volume>, Tier), String> {
    let vol = Arc::new(
        crate::cli::open_volume(image, &pktfs_fs::OpenOptions::default(), |n| {
            eprintln!("pktfs: {n}")
        })
        .map_err(|e| crate::cli::open_error(image, &e))?,
    );
    let Some(target) = &t.tier else {
        return Err("give the store: --tier s3://BUCKET/PREFIX".into());
    };
    let store = ObjectStore::connect(target, &t.store_options())
        .map_err(|e| format!("tier {target}: {e}"))?;
    let mut cfg = t.config()?;
    cfg.promote_after_reads = None;
    let tier = Tier::start(vol.clone(), target.clone(), store, cfg, false)
        .map_err(|e| format!("tier {target}: {e}"))?;
    Ok((vol, tier))
}

fn close(vol: Arc<Volume>) -> Result<(), String> {
    match Arc::try_unwrap(vol) {
        Ok(v) => v.close().map_err(|e| format!("closing the image: {e}")),
        Err(_) => Ok(()),
    }
}

pub fn run(a: TierCmdArgs) -> Result<(), String> {
    match a.what {
        TierWhat::Out {
            image,
            all,
            json,
            tier,
        } => {
            let (vol, t) = open_for_tier(&image, &tier)?;
            let t0 = std::time::Instant::now();
            let rep = t.tier_out_now(all).map_err(|e| e.to_string())?;
            let secs = t0.elapsed().as_secs_f64();
            let snap = if rep.files_tiered > 0 {
                Some(t.snapshot_now().map_err(|e| e.to_string())?)
            } else {
                None
            };
            if json {
                pktfs_support::outln!(
                    "{}",
                    serde_json::json!({"pass": rep, "seconds": secs, "snapshot": snap})
                );
            } else {
                pktfs_support::outln!(
                    "tiered {} of {} files ({} bytes) into {} objects in {secs:.2}s; {} errors{}",
                    rep.files_tiered,
                    rep.files_chosen,
                    rep.bytes_tiered,
                    rep.objects,
                    rep.errors,
                    snap.map(|s| format!("; snapshot {s}")).unwrap_or_default()
                );
            }
            drop(t);
            close(vol)?;
            if rep.errors > 0 {
                return Err(format!("{} uploads failed (see the log)", rep.errors));
            }
            Ok(())
        }
        TierWhat::Recall { image, tier } => {
            let (vol, t) = open_for_tier(&image, &tier)?;
            let mut n = 0u64;
            for r in vol.remote_records() {
                n += vol
                    .tier_recall(r.ino, u64::MAX)
                    .map_err(|e| e.to_string())?;
            }
            pktfs_support::outln!("recalled {n} bytes into PM");
            drop(t);
            close(vol)
        }
        TierWhat::Collect { image, tier } => {
            let (vol, t) = open_for_tier(&image, &tier)?;
            let rep = t.collect_now().map_err(|e| e.to_string())?;
            pktfs_support::outln!(
                "{} objects listed, {} deleted ({} bytes), {} compacted",
                rep.objects_listed,
                rep.objects_deleted,
                rep.bytes_deleted,
                rep.objects_compacted
            );
            drop(t);
            close(vol)
        }
    }
}

/// `pktfs restore s3://BUCKET/PREFIX IMAGE`.
#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    /// Where the image tiered to: s3://BUCKET/PREFIX.
    #[arg(value_parser = parse_target)]
    pub from: TierTarget,
    /// The image file to create.
    pub image: PathBuf,
    /// Size of the new image (default: the size of the image the snapshot
    /// was taken of).
    #[arg(long, value_name = "SIZE", value_parser = pktfs_support::size::parse_size)]
    pub size: Option<u64>,
    /// Restore from this snapshot number (default: the newest).
    #[arg(long, value_name = "N")]
    pub snapshot: Option<u64>,
    /// Replace IMAGE if it exists. The new image is built beside it and
    /// renamed over it when complete: a failed restore leaves the old one.
    #[arg(long)]
    pub force: bool,
    /// The store's endpoint URL (default: AWS_ENDPOINT_URL, else AWS).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// The store's region.
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn restore(a: RestoreArgs) -> Result<(), String> {
    let opts = StoreOptions {
        endpoint: a.endpoint.clone(),
        region: a.region.clone(),
        ..StoreOptions::default()
    };
    let store = ObjectStore::connect(&a.from, &opts).map_err(|e| format!("{}: {e}", a.from))?;
    let rep =
        pktfs_tier::restore_from_bucket(&store, &a.from, &a.image, a.size, a.snapshot, a.force)
            .map_err(|e| e.to_string())?;
    if a.json {
        pktfs_support::outln!("{}", serde_json::to_value(&rep).unwrap_or_default());
    } else {
        pktfs_support::outln!("{}", rep.to_text());
    }
    Ok(())
}
