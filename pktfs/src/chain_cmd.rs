//! `pktfs chain` and `pktfs stat`: read-only views of an image.

use std::path::{Path, PathBuf};

use pktfs_fs::{OpenOptions, Volume};
use pktfs_netpath::control::{self, ControlError};
use serde_json::Value;

#[derive(clap::Args, Debug)]
pub struct ChainArgs {
    /// The image file.
    pub image: PathBuf,
    /// Path of a file inside the image, e.g. /logs/a.bin.
    pub path: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct StatArgs {
    /// The image file (asked of the mount or server holding it, if any).
    pub image: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Open an image that no process holds, read-only, under a shared lock
/// (so a writer cannot start meanwhile and no read is ever torn).
pub fn open_ro(image: &Path) -> Result<Volume, String> {
    let opts = OpenOptions {
        read_only: true,
        ..Default::default()
    };
    crate::cli::open_volume(image, &opts, |note| eprintln!("pktfs: {note}")).map_err(|e| match e {
        pktfs_fs::FsError::Media(pktfs_fs::media::MediaError::Locked { .. }) => format!(
            "{} is in use by a process that does not answer on its control socket \
             (an fsck, or an older pktfs); try again when it is done",
            image.display()
        ),
        e => crate::cli::open_error(image, &e),
    })
}

/// Ask the process that holds `image` (a mount or a server) over its
/// control socket; if none does, answer from a read-only open here.
pub fn ask(
    image: &Path,
    req: &Value,
    on_progress: &mut dyn FnMut(&Value),
    local: impl FnOnce(&Volume) -> Result<Value, String>,
) -> Result<Value, String> {
    match control::request(image, req, on_progress) {
        Ok(v) => Ok(v),
        Err(ControlError::NotServed(_)) => local(&open_ro(image)?),
        Err(e) => Err(e.to_string()),
    }
}

pub fn chain(a: ChainArgs) -> Result<(), String> {
    let req = serde_json::json!({"op": "chain", "path": a.path});
    let rows = ask(&a.image, &req, &mut |_| {}, |v| {
        control::chain_json(v, &a.path)
    })?;
    let rows = rows.as_array().cloned().unwrap_or_default();
    if a.json {
        pktfs_cli::outln!(
            "{}",
            serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    pktfs_cli::outln!(
        "{:>8} {:>12} {:>8} {:>9} {:>6} {:>8}  {:<30} {:>12}  {:<5}  state",
        "record",
        "file_off",
        "len",
        "buffer",
        "boff",
        "crc32c",
        "timestamp",
        "seq",
        "src"
    );
    let n = |r: &Value, k: &str| r[k].as_u64().unwrap_or(0);
    for r in &rows {
        pktfs_cli::outln!(
            "{:>8} {:>12} {:>8} {:>9} {:>6} {:>8}  {:<30} {:>12}  {:<5}  {}",
            n(r, "record"),
            n(r, "file_offset"),
            n(r, "length"),
            n(r, "buffer"),
            n(r, "buffer_offset"),
            r["crc32c"].as_str().unwrap_or(""),
            fmt_ns(n(r, "timestamp_ns")),
            n(r, "seq"),
            if r["from_network"].as_bool() == Some(true) {
                "net"
            } else {
                "write"
            },
            if r["damaged"].as_bool() == Some(true) {
                "DAMAGED"
            } else {
                "ok"
            }
        );
    }
    let bad = rows
        .iter()
        .filter(|r| r["damaged"].as_bool() == Some(true))
        .count();
    if bad > 0 {
        pktfs_cli::outln!(
            "{} records, {bad} damaged (reads of their ranges fail with EIO)",
            rows.len()
        );
    } else {
        pktfs_cli::outln!("{} records", rows.len());
    }
    Ok(())
}

/// UTC time with nanoseconds (RFC 3339).
pub fn fmt_ns(ns: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns);
    humantime::format_rfc3339_nanos(t).to_string()
}

pub fn stat(a: StatArgs) -> Result<(), String> {
    let req = serde_json::json!({"op": "stat"});
    let j = ask(&a.image, &req, &mut |_| {}, |v| Ok(control::stat_json(v)))?;
    if a.json {
        pktfs_cli::outln!("{j}");
        return Ok(());
    }
    let n = |k: &str| j[k].as_u64().unwrap_or(0);
    pktfs_cli::outln!(
        "image        {} bytes, {}",
        n("image_bytes"),
        if j["clean"].as_bool() == Some(true) {
            "clean"
        } else {
            "in use or not cleanly closed"
        }
    );
    pktfs_cli::outln!(
        "buffers      {} x {} B, {} free",
        n("buffers"),
        n("buffer_size"),
        n("buffers_free")
    );
    pktfs_cli::outln!("inodes       {}, {} free", n("inodes"), n("inodes_free"));
    pktfs_cli::outln!("records      {}, {} free", n("records"), n("records_free"));
    pktfs_cli::outln!("mounts       {}", n("mount_count"));
    if n("remote_objects") > 0 {
        pktfs_cli::outln!(
            "tiered       {} bytes in {} objects",
            n("remote_bytes"),
            n("remote_objects")
        );
    }
    if let Some(t) = j["tier"].as_object() {
        for (k, v) in t {
            pktfs_cli::outln!("tier         {k}: {v}");
        }
    }
    if let Some(f) = j["failed"].as_str() {
        pktfs_cli::outln!("STOPPED      {f}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn fmt_ns_is_utc_with_nanoseconds() {
        assert_eq!(
            super::fmt_ns(784_111_777_123_456_789),
            "1994-11-06T08:49:37.123456789Z"
        );
        assert_eq!(
            super::fmt_ns(951_782_400_000_000_005),
            "2000-02-29T00:00:00.000000005Z"
        );
        assert_eq!(super::fmt_ns(0), "1970-01-01T00:00:00.000000000Z");
    }
}
