//! `pktfs recv IMAGE PATH (--listen ADDR | --connect HOST:PORT)`: one TCP
//! stream into one file, like `nc -l > file` but one copy from the wire to
//! durable storage, every record checksummed and stamped with its kernel
//! receive time. A mounted or served image is written by the process that
//! holds it: the connected socket is passed to it over the control socket,
//! so the data path stays one copy.
//!
//! The listening (or connecting) socket has receive timestamps on before
//! `listen` (or the handshake), so bytes the sender sends before `accept`
//! returns, or before the holder takes the socket over, are stamped by
//! the kernel as they arrive; a record whose bytes the kernel gave no time
//! says so (the report counts them).

use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use pktfs_fs::{OpenOptions, Volume};
use pktfs_netpath::control::{self, ControlError};
use pktfs_netpath::receive::stamped;
use pktfs_netpath::receive::to_file::{
    check_target, recv_to_file, CommitPolicy, RecvMode, RecvOptions,
};
use serde_json::{json, Value};

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("peer").required(true).args(["listen", "connect"])))]
pub struct RecvArgs {
    /// The image file (mounted, served, or not in use).
    pub image: PathBuf,
    /// The file to receive into, e.g. /logs/today.bin (its directory must exist).
    pub path: String,
    /// Wait for one connection on ADDR (e.g. 127.0.0.1:9000, localhost:9000).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Connect to HOST:PORT and receive what it sends.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: Option<String>,
    /// create: a new file (fails if the name exists); append: add to the
    /// file (created if missing); replace: the file appears, replacing the
    /// old one, only when the stream ends cleanly.
    #[arg(long, default_value = "create", value_parser = ["create", "append", "replace"])]
    pub mode: String,
    /// When received bytes become durable: "chunk" (every receive), "end"
    /// (once, at the end), or a byte count (e.g. 4M, the default).
    #[arg(long, default_value = "4M", value_name = "chunk|end|BYTES")]
    pub commit: String,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn commit_policy(s: &str) -> Result<CommitPolicy, String> {
    Ok(match s {
        "chunk" => CommitPolicy::EveryChunk,
        "end" => CommitPolicy::AtEnd,
        n => CommitPolicy::EveryBytes(
            pktfs_support::size::parse_size(n)
                .map_err(|e| format!("--commit: {e} (or chunk, end)"))?
                .max(1),
        ),
    })
}

/// Returns the exit status: 0 when the stream ended cleanly and is stored
/// whole, 1 otherwise.
pub fn recv(a: RecvArgs) -> Result<i32, String> {
    let commit = commit_policy(&a.commit)?;
    // An image nobody holds is opened before the stream starts, so the
    // sender does not wait for the open.
    let local = if control::is_held(&a.image).map_err(|e| e.to_string())? {
        None
    } else {
        Some(
            Volume::open(
                &a.image,
                &OpenOptions {
                    no_populate: true,
                    ..Default::default()
                },
            )
            .map_err(|e| format!("{}: {e}", a.image.display()))?,
        )
    };
    let mode = match a.mode.as_str() {
        "append" => RecvMode::Append,
        "replace" => RecvMode::ReplaceAtEnd,
        _ => RecvMode::CreateOnly,
    };
    // Refuse now what the receive would refuse (the name exists, the
    // directory is missing, ...), before a sender is taken on.
    match &local {
        Some(v) => check_target(v, &a.path, mode).map_err(|e| e.to_string())?,
        None => {
            let req = json!({"op": "recv_check", "path": a.path, "mode": a.mode});
            match control::request(&a.image, &req, &mut |_| {}) {
                Ok(_) | Err(ControlError::NotServed(_)) => {}
                // A holder from before the check: it decides at the start.
                Err(ControlError::Refused(e)) if e.starts_with("unknown op") => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }
    let t0;
    let sock = if let Some(l) = &a.listen {
        let addrs: Vec<_> = l
            .to_socket_addrs()
            .map_err(|e| format!("--listen {l}: {e}"))?
            .collect();
        let listener =
            stamped::listen_any(addrs.as_slice()).map_err(|e| format!("--listen {l}: {e}"))?;
        let at = listener.local_addr().map_err(|e| e.to_string())?;
        eprintln!("pktfs recv: waiting for one connection on {at}");
        let (s, peer) = listener
            .accept()
            .map_err(|e| format!("accept on {at}: {e}"))?;
        eprintln!("pktfs recv: receiving from {peer}");
        t0 = Instant::now();
        s
    } else {
        let c = a.connect.as_deref().unwrap_or_default();
        let s = stamped::connect(c, Duration::from_secs(30))?;
        t0 = Instant::now();
        s
    };
    let (uid, gid) = (rustix_ids().0, rustix_ids().1);
    let req = json!({"op": "recv", "path": a.path, "mode": a.mode,
        "commit": match commit { CommitPolicy::EveryChunk => "chunk", CommitPolicy::AtEnd => "end", _ => "bytes" },
        "commit_bytes": match commit { CommitPolicy::EveryBytes(n) => Some(n), _ => None },
        "uid": uid, "gid": gid});
    let asked = match &local {
        Some(_) => Err(ControlError::NotServed(a.image.clone())),
        None => control::request_passing(&a.image, &req, Some(&sock), &mut |_| {}),
    };
    let rep = match asked {
        Ok(v) => v,
        Err(ControlError::NotServed(_)) => {
            let vol = match local {
                Some(v) => v,
                None => Volume::open(&a.image, &OpenOptions::default())
                    .map_err(|e| format!("{}: {e}", a.image.display()))?,
            };
            let opts = RecvOptions {
                mode,
                commit,
                uid,
                gid,
                ..Default::default()
            };
            let r = recv_to_file(&vol, &sock, &a.path, &opts).map_err(|e| e.to_string())?;
            vol.close()
                .map_err(|e| format!("{}: closing: {e}", a.image.display()))?;
            r.to_json()
        }
        Err(e) => return Err(e.to_string()),
    };
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    report(&a, &rep, secs);
    Ok(if rep["ended_cleanly"].as_bool() == Some(true) {
        0
    } else {
        1
    })
}

fn report(a: &RecvArgs, rep: &Value, secs: f64) {
    if a.json {
        println!("{rep}");
        return;
    }
    let n = |k: &str| rep[k].as_u64().unwrap_or(0);
    let bytes = n("bytes");
    println!(
        "pktfs recv: {} bytes into {} as {} records in {:.3} s ({:.1} MB/s); CRC32C {}; {}",
        bytes,
        a.path,
        n("records"),
        secs,
        bytes as f64 / secs / 1e6,
        rep["crc32c"].as_str().unwrap_or("?"),
        if rep["ended_cleanly"].as_bool() == Some(true) {
            "the stream ended cleanly"
        } else {
            "the stream did NOT end cleanly: what is stored is a prefix"
        }
    );
    if n("records") > 0 {
        println!(
            "  received {} .. {}; file size {}",
            crate::chain_cmd::fmt_ns(n("first_rx_ns")),
            crate::chain_cmd::fmt_ns(n("last_rx_ns")),
            n("file_size")
        );
    }
    // A holder from before the count says nothing: no claim either way.
    if let Some(k) = rep["kernel_time_records"].as_u64() {
        if k < n("records") {
            println!(
                "  {} of {} records carry this host's clock, not a kernel receive time \
                 (the kernel gave none for their bytes; `pktfs chain` shows which)",
                n("records") - k,
                n("records")
            );
        }
    }
}

/// The caller's user and group: files it receives are its own.
fn rustix_ids() -> (u32, u32) {
    (
        nix::unistd::getuid().as_raw(),
        nix::unistd::getgid().as_raw(),
    )
}
