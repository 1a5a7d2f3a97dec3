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
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::config::Change;
use crate::rxstream::{RxStream, IDLE_RESERVATION};
use crate::server::Shared;
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
            Err(_) => break,
        }
    }
    let Some((name, ino)) = made else {
        let _ = sock.shutdown(Shutdown::Both);
        return;
    };
    sh.counters.files_stored.fetch_add(1, Ordering::Relaxed);
    sh.notify(Change::Entry {
        parent: sh.raw_dir,
        name: name.as_bytes(),
        ino,
    });
    let mut rx = RxStream::new(vol, &sock, sh.cfg.rx_chunk);
    let mut pieces = Vec::new();
    let mut size = 0u64;
    let mut noted = (Instant::now(), 0u64);
    // Reservation size follows the sender: doubles while recvs fill half of
    // it, shrinks when they don't.
    let mut want = IDLE_RESERVATION;
    let mut failed = false;
    let mut idle_until = Instant::now() + sh.cfg.raw_idle_timeout;
    loop {
        if sh.stop.load(Ordering::Relaxed) {
            break;
        }
        // While a growth is not yet told (throttled), wake up within
        // 100 ms to tell it even if the sender goes quiet.
        let left = idle_until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let pending = noted.1 != size;
        let wait = if pending { left.min(NOTE_EVERY) } else { left };
        let n = match rx.fill(want, wait) {
            Ok(0) => break,
            Ok(n) => n as u32,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut && pending => {
                sh.notify(Change::Data { ino, size });
                noted = (Instant::now(), size);
                continue;
            }
            Err(_) => break,
        };
        idle_until = Instant::now() + sh.cfg.raw_idle_timeout;
        want = if n >= want / 2 {
            (want * 2).min(sh.cfg.rx_chunk)
        } else {
            (want / 2).max(IDLE_RESERVATION)
        };
        let avail = rx.available();
        if rx.take_into(avail, &mut pieces).is_err() {
            vol.rx_abort(std::mem::take(&mut pieces));
            failed = true;
            break;
        }
        match vol.rx_commit(ino, std::mem::take(&mut pieces)) {
            Ok(s) => size = s,
            Err(_) => {
                failed = true;
                break;
            }
        }
        sh.counters
            .bytes_in
            .fetch_add(avail as u64, Ordering::Relaxed);
        if noted.0.elapsed() >= NOTE_EVERY {
            sh.notify(Change::Data { ino, size });
            noted = (Instant::now(), size);
        }
    }
    if noted.1 != size {
        sh.notify(Change::Data { ino, size });
    }
    drop(rx);
    if failed {
        // Tell the sender the stream was not stored to its end.
        let _ = sock.shutdown(Shutdown::Both);
    }
}
