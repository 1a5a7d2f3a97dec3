//! Transmit: a file goes out by walking its chain, one iovec per record.
//!
//! # Buffer space in flight is held, not locked
//! A response first takes a [`TxHold`] on the byte range it sends
//! ([`pktfs_fs::Volume::tx_hold`]): under the inode's read lock the Volume lists the
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
use std::time::{Duration, Instant};

use pktfs_fs::{TxHold, TxSeg};

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
    #[error("the client took {taken} bytes in {spent:?}, below {rate} bytes/s")]
    TooSlow {
        taken: u64,
        spent: Duration,
        rate: u64,
    },
    #[error("{0}")]
    Fs(#[from] pktfs_fs::FsError),
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
    send_held_paced(sock, hold, timeout, 0)
}

/// [`send_held`], and once the socket's buffer is full (a send took only
/// part of what it was offered) the client sets the pace and must take
/// `min_rate` bytes per second over each `timeout`, else
/// [`TxError::TooSlow`] (0: no pace rule). Without it each blocking send
/// only waits at most `timeout`, so a client whose window opens a little
/// now and then (a few bytes per timeout) would hold the sending thread
/// for as long as the file lasts. The rule is the loops' and the threads'
/// answer path's (`Config::min_send_rate`). A client that keeps up is
/// never watched: nothing is added per call until a send is partial.
pub fn send_held_paced(
    sock: &TcpStream,
    hold: &TxHold<'_>,
    timeout: Duration,
    min_rate: u64,
) -> Result<TxStats, TxError> {
    sock.set_write_timeout(Some(timeout.max(Duration::from_millis(1))))?;
    let segs = hold.segs();
    let mut st = TxStats::default();
    // Cursor: segment index and bytes of it already sent.
    let (mut i, mut done) = (0usize, 0u64);
    // The pace window once the client sets the pace: since when, and
    // st.bytes then.
    let mut slow: Option<(Instant, u64)> = None;
    while i < segs.len() {
        // The cursor a send of everything offered would end at.
        let mut whole = (i, done);
        let r = match segs[i] {
            TxSeg::Zero { len } => {
                let n = (len - done).min(ZEROS.len() as u64) as usize;
                whole = if done + n as u64 == len {
                    (i + 1, 0)
                } else {
                    (i, done + n as u64)
                };
                rustix::net::send(sock, &ZEROS[..n], rustix::net::SendFlags::NOSIGNAL)
                    .map_err(std::io::Error::from)
            }
            TxSeg::Image { .. } | TxSeg::Fetched { .. } => {
                hold.send(sock, i, done, MAX_IOV, 0).map(|(n, offered)| {
                    st.segments += offered as u64;
                    whole = (i + offered, 0);
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
        if min_rate > 0 && (slow.is_some() || (i, done) < whole) {
            // Partly taken: a blocking send returns short only when its
            // wait for room ran out, so the client sets the pace now.
            let (since, from) = *slow.get_or_insert((Instant::now(), st.bytes));
            let spent = since.elapsed();
            // A window is judged at the send that ends it; the kernel keeps
            // SO_SNDTIMEO in jiffies, so a send that waited `timeout` may
            // return a little before it passed by this clock (judging only
            // after the next one would let a slow client have three).
            if spent >= timeout.mul_f64(0.9) {
                let taken = st.bytes - from;
                if (taken as f64) < min_rate as f64 * spent.as_secs_f64() {
                    return Err(TxError::TooSlow {
                        taken,
                        spent,
                        rate: min_rate,
                    });
                }
                slow = Some((Instant::now(), st.bytes));
            }
        }
        while i < segs.len() && segs[i].is_empty() {
            i += 1;
        }
    }
    Ok(st)
}
