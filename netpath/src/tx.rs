//! Transmit: a file goes out by walking its chain, one iovec per record.
//!
//! # Buffer space in flight is held, not locked
//! A response first takes a [`TxHold`] on the byte range it sends
//! ([`pktfs::Volume::tx_hold`]): under the inode's read lock the Volume lists the
//! range as segments (record slices by image offset, and holes) and takes a
//! reference on every buffer they name. From then on an overwrite, truncate
//! or delete of the file cannot recycle that space, and the segments are
//! one consistent version of the file, however long the client takes. No
//! lock is held while sending, so a slow client never blocks writers. The
//! hold is dropped (its references given back) when the last `sendmsg` has
//! returned.
//!
//! # sendmsg, not sendfile
//! Each batch of segments goes to `sendmsg(2)` with one iovec per record
//! slice, pointing straight into the mapping (no staging copy in user
//! space); holes go out from a static zero page. `sendmsg` without
//! `MSG_ZEROCOPY` copies the bytes into socket buffers before it returns,
//! so releasing the hold afterwards is exact. `sendfile(2)` instead attaches
//! the image file's *pages* to the socket and the bytes are read when the
//! peer consumes them: on loopback that is whenever the receiving process
//! calls `recv`, long after the sender's ACK (tests/tests/net_tx.rs shows
//! the kernel sending bytes written after `sendfile` returned). A hold
//! cannot know when to end for sendfile on loopback, so the servers use
//! `sendmsg`. (`MSG_ZEROCOPY` with the hold released on its completion
//! notification is the upgrade path for real NICs; on loopback the kernel
//! copies anyway.)

use std::net::TcpStream;
use std::time::Duration;

use pktfs::{TxHold, TxSeg};

/// Most iovecs per sendmsg (UIO_MAXIOV is 1024).
const MAX_IOV: usize = 1024;
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

/// Why a transfer stopped early.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("timed out waiting for the client to take data")]
    Timeout,
    #[error("{0}")]
    Fs(#[from] pktfs::FsError),
}

/// How a transfer ran.
#[derive(Debug, Default, Clone, Copy)]
pub struct TxStats {
    pub bytes: u64,
    /// sendmsg/send calls.
    pub syscalls: u64,
    /// Record segments handed to the kernel (one iovec each).
    pub segments: u64,
}

/// Send every segment of `hold`, in order, on `sock` (blocking; `timeout`
/// is the longest wait for room in the socket buffer, set as SO_SNDTIMEO).
/// The caller drops the hold afterwards, whatever the outcome: when this
/// returns the kernel has copied everything it took.
pub fn send_held(
    sock: &TcpStream,
    hold: &TxHold<'_>,
    timeout: Duration,
) -> Result<TxStats, TxError> {
    sock.set_write_timeout(Some(timeout.max(Duration::from_millis(1))))?;
    let segs = hold.segs();
    let mut st = TxStats::default();
    // Cursor: segment index and bytes of it already sent.
    let (mut i, mut done) = (0usize, 0u64);
    while i < segs.len() {
        let r = match segs[i] {
            TxSeg::Zero { len } => {
                let n = (len - done).min(ZEROS.len() as u64) as usize;
                rustix::net::send(sock, &ZEROS[..n], rustix::net::SendFlags::NOSIGNAL)
                    .map_err(std::io::Error::from)
            }
            TxSeg::Image { .. } | TxSeg::Fetched { .. } => {
                hold.send(sock, i, done, MAX_IOV, 0).map(|(n, offered)| {
                    st.segments += offered as u64;
                    n
                })
            }
        };
        st.syscalls += 1;
        let mut n = match r {
            Ok(n) => n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Err(TxError::Timeout),
            Err(e) => return Err(e.into()),
        };
        st.bytes += n;
        // Advance the cursor by n bytes.
        while n > 0 {
            let left = segs[i].len() - done;
            if n >= left {
                n -= left;
                i += 1;
                done = 0;
            } else {
                done += n;
                n = 0;
            }
        }
        while i < segs.len() && segs[i].is_empty() {
            i += 1;
        }
    }
    Ok(st)
}
