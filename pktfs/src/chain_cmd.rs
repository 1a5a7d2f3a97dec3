//! `pktfs chain` and `pktfs stat`: read-only views of an image.

use std::path::PathBuf;

use pktfs::{OpenOptions, Volume};

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
    pub image: PathBuf,
    #[arg(long)]
    pub json: bool,
}

/// Resolve a slash-separated path from the root.
pub fn resolve(v: &Volume, path: &str) -> Result<u64, String> {
    let mut ino = v.root();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        ino = v
            .lookup(ino, part.as_bytes())
            .map_err(|e| format!("{path}: {e}"))?
            .ino;
    }
    Ok(ino)
}

fn open_ro(image: &std::path::Path) -> Result<Volume, String> {
    // Read-only and without the lock: safe to run against a mounted image.
    Volume::open(
        image,
        &OpenOptions {
            read_only: true,
            no_lock: true,
            ..Default::default()
        },
    )
    .map_err(|e| format!("{}: {e}", image.display()))
}

pub fn chain(a: ChainArgs) -> Result<(), String> {
    let v = open_ro(&a.image)?;
    let ino = resolve(&v, &a.path)?;
    let recs = v.chain(ino).map_err(|e| e.to_string())?;
    if a.json {
        let rows: Vec<serde_json::Value> = recs.iter().map(|r| r.to_json()).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!(
        "{:>8} {:>12} {:>8} {:>9} {:>6} {:>8}  {:<30} {:>12}  {:<5}  state",
        "record", "file_off", "len", "buffer", "boff", "crc32c", "timestamp", "seq", "src"
    );
    for r in &recs {
        println!(
            "{:>8} {:>12} {:>8} {:>9} {:>6} {:08x}  {:<30} {:>12}  {:<5}  {}",
            r.record,
            r.file_off,
            r.len,
            r.buffer,
            r.buf_off,
            r.payload_crc,
            fmt_ns(r.timestamp_ns),
            r.seq,
            if r.from_network { "net" } else { "write" },
            if r.damaged { "DAMAGED" } else { "ok" }
        );
    }
    let bad = recs.iter().filter(|r| r.damaged).count();
    if bad > 0 {
        println!("{} records, {bad} damaged (reads of their ranges fail with EIO)", recs.len());
    } else {
        println!("{} records", recs.len());
    }
    Ok(())
}

/// UTC time with nanoseconds, without a date crate.
pub fn fmt_ns(ns: u64) -> String {
    let (y, m, d, hh, mm, ss, _) = netpath::civil((ns / 1_000_000_000) as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{:09}Z",
        ns % 1_000_000_000
    )
}

pub fn stat(a: StatArgs) -> Result<(), String> {
    let v = open_ro(&a.image)?;
    let sb = v.superblock();
    let g = v.geometry();
    let s = v.statfs();
    if a.json {
        let j = serde_json::json!({
            "image_bytes": g.image_len_bytes, "buffer_size": g.buffer_size_bytes,
            "buffers": g.buffer_count, "buffers_free": s.blocks_free,
            "inodes": g.inode_count, "inodes_free": s.files_free,
            "records": g.record_count, "records_free": s.records_free,
            "clean": sb.state == layout::superblock::STATE_CLEAN, "mount_count": sb.mount_count,
        });
        println!("{j}");
        return Ok(());
    }
    println!(
        "image        {} bytes, {}",
        g.image_len_bytes,
        if sb.state == layout::superblock::STATE_CLEAN {
            "clean"
        } else {
            "not cleanly closed"
        }
    );
    println!(
        "buffers      {} x {} B, {} free",
        g.buffer_count, g.buffer_size_bytes, s.blocks_free
    );
    println!("inodes       {}, {} free", g.inode_count, s.files_free);
    println!("records      {}, {} free", g.record_count, s.records_free);
    println!("mounts       {}", sb.mount_count);
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
