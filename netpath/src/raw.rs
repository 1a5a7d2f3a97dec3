//! Raw stream mode: each connection's bytes become one file.
//!
//! The file is created (named by arrival time and peer, e.g.
//! `20250101T120000.123456789Z-127.0.0.1-54321`) in the configured
//! directory when the connection is accepted, and every `recv()` is
//! appended by one commit as soon as it lands: bytes go from the kernel
//! into packet buffers, become one record (CRC32C, kernel receive time,
//! stream position) and are linked at the end of the file. Each commit is
//! atomic and appends in stream order, so after a crash the file holds an
//! exact prefix of what was sent: never a hole, never a foreign byte.
//! There is nothing to answer; when the volume is full the connection is
//! closed and the file keeps what was stored.

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::config::Change;
use crate::recv::{recv_into, CommitPolicy, RecvHooks, RecvMode, RecvOptions};
use crate::shared::Shared;
use crate::util::{now_ns, raw_name};

/// Growth of a raw file is told to the change callback at most this often
/// (and within this long of the last commit).
const NOTE_EVERY: Duration = Duration::from_millis(100);

pub(crate) fn serve_connection(sh: &Shared, sock: TcpStream, peer: SocketAddr) {
    let vol = &*sh.vol;
    let base = raw_name(now_ns(), peer);
    let mut made = None;
    for k in 0..8 {
        let name = if k == 0 {
            base.clone()
        } else {
            format!("{base}-{k}")
        };
        match vol.create(sh.raw_dir, name.as_bytes(), 0o644, sh.uid, sh.gid) {
            Ok(a) => {
                made = Some((name, a.ino));
                break;
            }
            Err(pktfs::FsError::Exists) => continue,
            Err(e) => {
                tracing::warn!("raw connection from {peer}: cannot create {name}: {e}; closing it");
                break;
            }
        }
    }
    let Some((name, ino)) = made else {
        let _ = sock.shutdown(Shutdown::Both);
        return;
    };
    tracing::info!(target: "pktfs::access", %peer, file = %name, "raw stream started");
    sh.metrics.files_stored.inc();
    sh.notify(Change::Entry {
        parent: sh.raw_dir,
        name: name.as_bytes(),
        ino,
    });
    // Every receive is committed at once (the smallest loss window); the
    // mount hears of the growth at most every NOTE_EVERY, and within that
    // of the last commit even when the sender goes quiet.
    let opts = RecvOptions {
        mode: RecvMode::Append,
        commit: CommitPolicy::EveryChunk,
        chunk_bytes: sh.cfg.rx_chunk,
        idle_timeout: sh.cfg.raw_idle_timeout,
        ..Default::default()
    };
    let noted = std::cell::Cell::new((Instant::now(), 0u64, 0u64)); // (when, told, size)
    let mut on_commit = |_ino: u64, size: u64| {
        let (when, told, before) = noted.get();
        sh.metrics.bytes_in.inc_by(size.saturating_sub(before));
        noted.set((when, told, size));
        if when.elapsed() >= NOTE_EVERY {
            sh.notify(Change::Data { ino, size });
            noted.set((Instant::now(), size, size));
        }
    };
    let mut on_tick = || {
        let (_, told, size) = noted.get();
        if told != size {
            sh.notify(Change::Data { ino, size });
            noted.set((Instant::now(), size, size));
        }
    };
    let t0 = Instant::now();
    let report = recv_into(
        vol,
        &sock,
        ino,
        &opts,
        RecvHooks {
            stop: Some(&sh.stop),
            on_commit: Some(&mut on_commit),
            tick: Some((NOTE_EVERY, &mut on_tick)),
        },
    );
    let (_, told, size) = noted.get();
    if told != size {
        sh.notify(Change::Data { ino, size });
    }
    tracing::info!(
        target: "pktfs::access",
        %peer,
        file = %name,
        bytes_in = size,
        ms = t0.elapsed().as_millis() as u64,
        records = report.records,
        ended_cleanly = report.ended_cleanly,
        "raw stream ended"
    );
}
