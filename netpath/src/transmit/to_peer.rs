//! Send a file to a plain TCP peer by its chain, one iovec per record,
//! the same way GET does (see [`crate::transmit::chain`]); TCP cuts the
//! stream into segments of its own, so a peer sees the file's bytes, not
//! its records. Part of the embedding API (docs/EMBEDDING.md); `pktfs
//! send` and the control socket use it too.
//!
//! Unlike a GET, a send checks every local record's CRC32C against its
//! bytes when it holds the file, whatever the volume's verify mode
//! ([`pktfs_fs::Volume::tx_hold_checked`]): with `verify=once` a GET skips
//! a record checked earlier in the mount, but a send is how bytes leave
//! for another system, so it is one pass over them before the socket gets
//! any. Tiered records are checked on every fetch. A record that fails is
//! named ([`hold_checked`]) and nothing is sent.

use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use pktfs_fs::Volume;

use crate::transmit::chain::send_held;

/// What a send did.
#[derive(Debug, Clone, Copy)]
pub struct SendReport {
    pub bytes: u64,
    /// Segments handed to the kernel (records, or parts of records).
    pub segments: u64,
    pub syscalls: u64,
    pub elapsed: Duration,
}

/// Connect to `addr` and send all of file `ino`, then close the sending
/// side. `timeout`: connect timeout and longest wait for room to send. The
/// file is held, and every record's CRC checked against its bytes, before
/// connecting, so a damaged file fails without a connection; a send that
/// fails once connected resets the connection (see [`reset`]).
pub fn send_file(
    vol: &Volume,
    ino: u64,
    addr: &str,
    timeout: Duration,
) -> Result<SendReport, String> {
    let hold = hold_checked(vol, ino)?;
    let s = connect(addr, timeout)?;
    let r = send_hold(&s, &hold, timeout);
    if r.is_err() {
        reset(&s);
    }
    drop(hold); // the kernel has copied what it took
    r
}

/// The file a send of `path` would send: it exists and is a regular file.
/// Checked before connecting, so a peer is never sent an empty stream
/// that looks like an empty file.
pub fn check_source(vol: &Volume, path: &str) -> Result<u64, String> {
    let ino = vol
        .resolve_path(path)
        .map_err(|e| format!("{path}: {e}"))?
        .ino;
    let a = vol.getattr(ino).map_err(|e| format!("{path}: {e}"))?;
    if a.kind != pktfs_fs::FileType::Regular {
        return Err(format!("{path}: not a regular file"));
    }
    Ok(ino)
}

/// End a connection whose send failed with a reset (SO_LINGER 0: the
/// close, by whichever process closes it last, sends RST), so the peer
/// sees an error, never a clean end of a stream that is not the whole
/// file.
pub fn reset(sock: &TcpStream) {
    let _ = rustix::net::sockopt::set_socket_linger(sock, Some(Duration::ZERO));
}

/// Resolve `addr` (`HOST:PORT`, host names too) and connect to the first
/// address that answers within `timeout`.
pub fn connect(addr: &str, timeout: Duration) -> Result<TcpStream, String> {
    let mut last = format!("{addr}: no address");
    for a in addr.to_socket_addrs().map_err(|e| format!("{addr}: {e}"))? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("connect {a}: {e}"),
        }
    }
    Err(last)
}

/// Send all of file `ino` on an already connected socket (a socket another
/// process passed over the control socket), then close the sending side.
/// A failure (damage found while holding the file, the peer gone) resets
/// the connection (see [`reset`]).
pub fn send_on(
    vol: &Volume,
    ino: u64,
    sock: &TcpStream,
    timeout: Duration,
) -> Result<SendReport, String> {
    let r = match hold_checked(vol, ino) {
        Ok(hold) => send_hold(sock, &hold, timeout),
        Err(e) => Err(e),
    };
    if r.is_err() {
        reset(sock);
    }
    r
}

/// Hold all of file `ino` with every record's CRC checked now
/// ([`pktfs_fs::Volume::tx_hold_checked`]). A damaged record is named in
/// the error (its number, byte range, stored CRC), so a person can find it
/// with `pktfs chain`.
pub fn hold_checked(vol: &Volume, ino: u64) -> Result<pktfs_fs::TxHold<'_>, String> {
    vol.tx_hold_checked(ino, 0, u64::MAX).map_err(|e| match e {
        pktfs_fs::FsError::Damaged { start, end, .. } => {
            let rec = vol.chain(ino).ok().and_then(|c| {
                c.into_iter()
                    .find(|r| r.file_off == start && r.file_off + r.len as u64 == end)
            });
            match rec {
                Some(r) => format!(
                    "record {} (file bytes [{start}, {end}), stored CRC32C {:08x}) is damaged: \
                     its bytes do not match its checksum; nothing was sent. \
                     `pktfs chain` lists the file's records, `pktfs scrub` checks the image",
                    r.record, r.payload_crc
                ),
                None => format!("{e}; nothing was sent"),
            }
        }
        e => e.to_string(),
    })
}

fn send_hold(
    sock: &TcpStream,
    hold: &pktfs_fs::TxHold<'_>,
    timeout: Duration,
) -> Result<SendReport, String> {
    let t0 = Instant::now();
    let peer = sock
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "the peer".into());
    let st = send_held(sock, hold, timeout).map_err(|e| format!("send to {peer}: {e}"))?;
    let _ = sock.shutdown(Shutdown::Write);
    Ok(SendReport {
        bytes: st.bytes,
        segments: st.segments,
        syscalls: st.syscalls,
        elapsed: t0.elapsed(),
    })
}
