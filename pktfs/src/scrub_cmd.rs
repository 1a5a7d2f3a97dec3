//! `pktfs scrub IMAGE|MOUNTPOINT`: check every payload CRC of an image,
//! live or not, and name the damaged files and ranges.
//!
//! A mounted or served image is scrubbed by the process that holds it (over
//! its control socket), so service never stops and no read is torn; an
//! image nobody holds is opened read-only here. Exit status as e2fsck: 0 no
//! damage, 4 damage found, 8 operational error, 32 cancelled.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

pub const EXIT_DAMAGE: i32 = 4;
pub const EXIT_ERROR: i32 = 8;

#[derive(clap::Args, Debug)]
pub struct ScrubArgs {
    /// The image file, or the directory it is mounted on.
    pub target: PathBuf,
    /// Print the report as JSON (no progress bar).
    #[arg(long)]
    pub json: bool,
    /// Limit the scrub to this many payload bytes per second (a SIZE:
    /// 200M, 1G, 1GiB), so it leaves room for service.
    #[arg(long, value_name = "BYTES_PER_SEC", value_parser = pktfs_support::size::parse_size)]
    pub rate: Option<u64>,
}

/// The image behind a mount point (the source the kernel lists for a
/// `fuse.pktfs` mount there).
fn image_of_mount(dir: &Path) -> Result<PathBuf, String> {
    let dir = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mounts =
        pktfs_support::holder::mounts().map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    mounts
        .into_iter()
        .find(|m| m.mountpoint == dir)
        .map(|m| m.source)
        .ok_or_else(|| {
            format!(
                "{} is a directory but no pktfs image is mounted there",
                dir.display()
            )
        })
}

/// Run the scrub; returns the exit status.
pub fn run(a: ScrubArgs) -> i32 {
    match scrub(&a) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pktfs scrub: {e}");
            EXIT_ERROR
        }
    }
}

fn scrub(a: &ScrubArgs) -> Result<i32, String> {
    let image = if a.target.is_dir() {
        image_of_mount(&a.target)?
    } else {
        a.target.clone()
    };
    let bar = (!a.json && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, {eta}) {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let on_progress = |p: &Value| {
        if let Some(b) = &bar {
            b.set_length(p["total_bytes"].as_u64().unwrap_or(0));
            b.set_position(p["bytes"].as_u64().unwrap_or(0));
            b.set_message(format!("{} files", p["files"].as_u64().unwrap_or(0)));
        }
    };
    let req = json!({"op": "scrub", "rate_bytes_per_sec": a.rate});
    let opts = pktfs_fs::ScrubOptions {
        rate_bytes_per_sec: a.rate,
    };
    let rep = crate::chain_cmd::ask(&image, &req, &mut |p| on_progress(p), |v| {
        v.scrub(&opts, &mut |p| {
            on_progress(&json!({"bytes": p.bytes, "total_bytes": p.total_bytes, "files": p.files}));
            true
        })
        .map(|r| r.to_json())
        .map_err(|e| e.to_string())
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let damage = rep["damage"].as_array().cloned().unwrap_or_default();
    if a.json {
        pktfs_support::outln!("{rep}");
    } else {
        for d in &damage {
            let (path, what) = (
                d["path"].as_str().unwrap_or("?"),
                d["what"].as_str().unwrap_or(""),
            );
            let why = d["why"].as_str().unwrap_or("");
            if what == "data" {
                pktfs_support::outln!(
                    "{path}: bytes [{}, {}) damaged: {why}",
                    d["start"].as_u64().unwrap_or(0),
                    d["end"].as_u64().unwrap_or(0)
                );
            } else {
                pktfs_support::outln!("{path}: {what} damaged: {why}");
            }
        }
        let bytes = rep["bytes"].as_u64().unwrap_or(0);
        let secs = rep["elapsed_s"].as_f64().unwrap_or(0.0);
        pktfs_support::outln!(
            "pktfs scrub: {}: {} files, {} records, {} bytes checked in {:.3} s ({:.2} GB/s); {}",
            image.display(),
            rep["files"].as_u64().unwrap_or(0),
            rep["records"].as_u64().unwrap_or(0),
            bytes,
            secs,
            bytes as f64 / secs.max(1e-9) / 1e9,
            if damage.is_empty() {
                "no damage".to_string()
            } else {
                format!("{} damaged ranges", damage.len())
            }
        );
    }
    Ok(if damage.is_empty() { 0 } else { EXIT_DAMAGE })
}
