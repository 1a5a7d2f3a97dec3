//! `pktfs send`: stream a file to a plain TCP peer by its chain, one iovec
//! per record, the same way GET does (see [`crate::tx`]).

use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use pktfs::Volume;

use crate::tx::send_held;

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
/// side. `timeout`: connect timeout and longest wait for room to send.
pub fn send_file(
    vol: &Volume,
    ino: u64,
    addr: &str,
    timeout: Duration,
) -> Result<SendReport, String> {
    let target = addr
        .to_socket_addrs()
        .map_err(|e| format!("{addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr}: no address"))?;
    let sock = TcpStream::connect_timeout(&target, timeout)
        .map_err(|e| format!("connect {target}: {e}"))?;
    let hold = vol.tx_hold(ino, 0, u64::MAX).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let r = send_held(&sock, &hold, timeout);
    drop(hold);
    let st = r.map_err(|e| format!("send to {target}: {e}"))?;
    let _ = sock.shutdown(Shutdown::Write);
    Ok(SendReport {
        bytes: st.bytes,
        segments: st.segments,
        syscalls: st.syscalls,
        elapsed: t0.elapsed(),
    })
}
