//! `pktfs chain` and `pktfs stat`: read-only views of an image, and
//! `pktfs chain --pcap`, a file's records as a pcapng capture.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// Write the file's records as a pcapng capture to FILE (`-`: standard
    /// output) for Wireshark or tshark: one packet per record (a record
    /// over 65495 bytes in several), stamped with the record's time in
    /// nanoseconds, its payload behind synthetic IPv4/TCP headers whose
    /// sequence number is the file offset (so "Follow TCP Stream" gives the
    /// file back), its CRC32C, seq, file offset and where its time came
    /// from in the packet comment. Every record's CRC is checked on the
    /// way: a damaged record is named and no capture is left.
    #[arg(long, value_name = "FILE", conflicts_with = "json")]
    pub pcap: Option<PathBuf>,
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
    if let Some(out) = &a.pcap {
        return pcap(&a.image, &a.path, out);
    }
    let req = serde_json::json!({"op": "chain", "path": a.path});
    let rows = ask(&a.image, &req, &mut |_| {}, |v| {
        control::chain_json(v, &a.path)
    })?;
    let rows = rows.as_array().cloned().unwrap_or_default();
    if a.json {
        pktfs_support::outln!(
            "{}",
            serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    pktfs_support::outln!(
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
        pktfs_support::outln!(
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
        pktfs_support::outln!(
            "{} records, {bad} damaged (reads of their ranges fail with EIO)",
            rows.len()
        );
    } else {
        pktfs_support::outln!("{} records", rows.len());
    }
    Ok(())
}

/// How long the sender of the file's bytes waits for the capture to take
/// them (the send's timeout).
const PCAP_SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// One row of `pktfs chain --json`, as the capture needs it.
struct Row {
    facts: crate::pcapng::RecordFacts,
    len: u64,
    damaged: bool,
}

fn rows_of(v: &Value) -> Result<Vec<Row>, String> {
    let rows = v.as_array().ok_or("the chain is not a list of records")?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let n = |k: &str| {
            r[k].as_u64()
                .ok_or_else(|| format!("a chain row without {k:?}: {r}"))
        };
        let crc = r["crc32c"]
            .as_str()
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| format!("a chain row without a hex \"crc32c\": {r}"))?;
        out.push(Row {
            facts: crate::pcapng::RecordFacts {
                record: n("record")?,
                file_offset: n("file_offset")?,
                seq: n("seq")?,
                timestamp_ns: n("timestamp_ns")?,
                crc32c: crc,
                // A holder from before kernel times were marked: it
                // stamped no record with one.
                kernel_time: r["kernel_time"].as_bool() == Some(true),
                from_network: r["from_network"].as_bool() == Some(true),
            },
            len: n("length")?,
            damaged: r["damaged"].as_bool() == Some(true),
        });
    }
    out.sort_by_key(|r| r.facts.file_offset);
    Ok(out)
}

/// `pktfs chain --pcap OUT`. The records come from the chain (asked of the
/// holder, or read here); their bytes come as `pktfs send` sends them
/// (every record's CRC checked by the sender, whatever the verify mode),
/// over a loopback connection made for it, and each is checked again
/// here against the CRC in its row: bytes that do not match (the file
/// changed between the two questions) are never written as the record.
fn pcap(image: &Path, path: &str, out: &Path) -> Result<(), String> {
    let req = serde_json::json!({"op": "chain", "path": path});
    let r = match control::request(image, &req, &mut |_| {}) {
        Ok(v) => {
            let rows = rows_of(&v)?;
            refuse_damaged(path, &rows)?;
            // Held: the holder sends the file on a socket passed to it.
            let send = serde_json::json!({"op": "send", "path": path});
            export(path, &rows, out, |sock| {
                control::request_passing(image, &send, Some(sock), &mut |_| {})
                    .map(drop)
                    .map_err(|e| e.to_string())
            })
        }
        Err(ControlError::NotServed(_)) => {
            let vol = open_ro(image)?;
            let rows = rows_of(&control::chain_json(&vol, path)?)?;
            refuse_damaged(path, &rows)?;
            let ino = pktfs_netpath::transmit::to_peer::check_source(&vol, path)?;
            export(path, &rows, out, |sock| {
                pktfs_netpath::transmit::to_peer::send_on(&vol, ino, sock, PCAP_SEND_TIMEOUT)
                    .map(drop)
            })
        }
        Err(e) => Err(e.to_string()),
    };
    let (records, packets) = r?;
    eprintln!(
        "pktfs: wrote {records} records of {path} as {packets} packets to {} \
         (every record's CRC32C checked)",
        out.display()
    );
    Ok(())
}

fn refuse_damaged(path: &str, rows: &[Row]) -> Result<(), String> {
    match rows.iter().find(|r| r.damaged) {
        Some(r) => Err(format!(
            "{path}: record {} (file bytes [{}, {}), stored CRC32C {:08x}) is damaged: its bytes \
             do not match its checksum, so it is not exported; no capture was written. \
             `pktfs scrub` checks the whole image",
            r.facts.record,
            r.facts.file_offset,
            r.facts.file_offset + r.len,
            r.facts.crc32c
        )),
        None => Ok(()),
    }
}

/// Write the capture of `rows` to `out`, the file's bytes sent by `send`
/// on one end of a loopback connection (on a thread of its own) and read
/// here from the other. Returns (records, packets). A failed export
/// leaves no capture file behind.
fn export(
    path: &str,
    rows: &[Row],
    out: &Path,
    send: impl FnOnce(&TcpStream) -> Result<(), String> + Send,
) -> Result<(u64, u64), String> {
    let l = TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| format!("a loopback socket for the file's bytes: {e}"))?;
    let addr = l
        .local_addr()
        .map_err(|e| format!("a loopback socket for the file's bytes: {e}"))?;
    let tx = TcpStream::connect(addr)
        .map_err(|e| format!("connecting the loopback socket {addr}: {e}"))?;
    let (rx, _) = l
        .accept()
        .map_err(|e| format!("accepting the loopback socket {addr}: {e}"))?;
    drop(l);
    let to_stdout = out.as_os_str() == "-";
    let sink: Box<dyn Write> = if to_stdout {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?)
    };
    let (sent, written) = std::thread::scope(|s| {
        let sender = s.spawn(move || {
            let r = send(&tx);
            drop(tx);
            r
        });
        let written = write_capture(path, rows, rx, sink, out);
        // The capture stopped reading (done, or failed): the sender gets
        // a reset, not a wait for room that never comes.
        (sender.join(), written)
    });
    let sent = sent.unwrap_or_else(|_| Err("the sending thread panicked".into()));
    let r = match (written, sent) {
        // Every record's bytes arrived and matched: the capture is whole,
        // whatever the sender made of the unread rest (a trailing hole).
        (Ok(n), _) => Ok(n),
        // The sender's reason (a damaged record it named, a tier it could
        // not reach) explains why the bytes stopped.
        (Err(_), Err(e)) => Err(format!("{path}: {e}")),
        (Err(e), Ok(())) => Err(e),
    };
    if r.is_err() && !to_stdout {
        let _ = std::fs::remove_file(out);
    }
    r
}

fn write_capture(
    path: &str,
    rows: &[Row],
    mut rx: TcpStream,
    sink: Box<dyn Write>,
    out: &Path,
) -> Result<(u64, u64), String> {
    let werr = |e: std::io::Error| format!("{}: {e}", out.display());
    let changed =
        |what: String| format!("{path}: {what}: the file changed during the export; run it again");
    let mut w = crate::pcapng::Writer::new(std::io::BufWriter::with_capacity(1 << 20, sink), path)
        .map_err(werr)?;
    let mut pos = 0u64;
    let mut buf = Vec::new();
    for r in rows {
        let f = &r.facts;
        // Holes before the record come as zeros.
        let gap = f
            .file_offset
            .checked_sub(pos)
            .ok_or_else(|| changed(format!("record {} overlaps the record before it", f.record)))?;
        let skipped = std::io::copy(&mut (&mut rx).take(gap), &mut std::io::sink())
            .map_err(|e| format!("{path}: reading the file's bytes: {e}"))?;
        buf.resize(
            usize::try_from(r.len).map_err(|_| "a record over the address space")?,
            0,
        );
        if skipped < gap || rx.read_exact(&mut buf).is_err() {
            return Err(changed(format!(
                "the file ended before record {} (file bytes [{}, {}))",
                f.record,
                f.file_offset,
                f.file_offset + r.len
            )));
        }
        let got = pktfs_layout::crc32c(&buf);
        if got != f.crc32c {
            return Err(changed(format!(
                "the bytes sent for record {} (file bytes [{}, {})) have CRC32C {got:08x}, \
                 not its {:08x}",
                f.record,
                f.file_offset,
                f.file_offset + r.len,
                f.crc32c
            )));
        }
        w.record(f, &buf).map_err(werr)?;
        pos = f.file_offset + r.len;
    }
    let packets = w.packets();
    w.finish().map_err(werr)?;
    Ok((rows.len() as u64, packets))
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
        pktfs_support::outln!("{j}");
        return Ok(());
    }
    let n = |k: &str| j[k].as_u64().unwrap_or(0);
    pktfs_support::outln!(
        "image        {} bytes, {}",
        n("image_bytes"),
        if j["clean"].as_bool() == Some(true) {
            "clean"
        } else {
            "in use or not cleanly closed"
        }
    );
    pktfs_support::outln!(
        "buffers      {} x {} B, {} free",
        n("buffers"),
        n("buffer_size"),
        n("buffers_free")
    );
    pktfs_support::outln!("inodes       {}, {} free", n("inodes"), n("inodes_free"));
    pktfs_support::outln!("records      {}, {} free", n("records"), n("records_free"));
    pktfs_support::outln!("mounts       {}", n("mount_count"));
    if n("remote_objects") > 0 {
        pktfs_support::outln!(
            "tiered       {} bytes in {} objects",
            n("remote_bytes"),
            n("remote_objects")
        );
    }
    if let Some(t) = j["tier"].as_object() {
        for (k, v) in t {
            pktfs_support::outln!("tier         {k}: {v}");
        }
    }
    if let Some(f) = j["failed"].as_str() {
        pktfs_support::outln!("STOPPED      {f}");
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
