//! Socket I/O straight to and from the mapping, for the network path (the
//! Volume's `RxBuf` and `TxHold` are the public face of it):
//! receive into packet buffers with the kernel's receive timestamp, and send
//! records out by `sendfile` from the image file or `sendmsg` with one
//! iovec per record (TCP cuts and joins the bytes into segments as it
//! likes: a record is not a packet on the wire). The bytes are never
//! staged.

use std::os::fd::{AsFd, AsRawFd, RawFd};

use super::Pm;

/// Ask the kernel to timestamp received data (SO_TIMESTAMPNS).
pub fn enable_rx_timestamps(fd: impl AsFd) -> std::io::Result<()> {
    set_rx_timestamps(fd, true)
}

/// Turn SO_TIMESTAMPNS on or off: off, receives come without the kernel's
/// time (how a test shows what a record says then).
pub fn set_rx_timestamps(fd: impl AsFd, on: bool) -> std::io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt::ReceiveTimestampns};
    setsockopt(&fd, ReceiveTimestampns, &on).map_err(std::io::Error::from)
}

/// Whether `fd` has SO_TIMESTAMPNS on (as the kernel reports it: a socket
/// accepted from a listener that had it on has it too).
pub fn rx_timestamps_enabled(fd: impl AsFd) -> std::io::Result<bool> {
    use nix::sys::socket::{getsockopt, sockopt::ReceiveTimestampns};
    getsockopt(&fd, ReceiveTimestampns).map_err(std::io::Error::from)
}

/// recvmsg(2) from `fd` into `buf` (memory of the caller's, not the
/// mapping), with the kernel receive time in ns since the epoch when the
/// socket has SO_TIMESTAMPNS on and the kernel supplied one: what a
/// receiver that must hold bytes in DRAM (no buffer space free) uses, so
/// those bytes keep their arrival time like bytes received into the image
/// ([`Pm::recv_timestamped`]).
pub fn recv_timestamped_into(
    fd: impl AsFd,
    buf: &mut [u8],
    flags: i32,
) -> std::io::Result<(usize, Option<u64>)> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let mut cmsg = nix::cmsg_space!(nix::sys::time::TimeSpec);
    let msg = recvmsg::<()>(
        fd.as_fd().as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::from_bits_truncate(flags),
    )
    .map_err(std::io::Error::from)?;
    let mut ts = None;
    for c in msg.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmTimestampns(t) = c {
            ts = Some(t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64);
        }
    }
    Ok((msg.bytes, ts))
}

/// Wake readers of `fd` only once `bytes` are queued (SO_RCVLOWAT), or at
/// end of stream. (Neither nix nor rustix wraps SO_RCVLOWAT: a plain
/// setsockopt.)
pub fn set_rcvlowat(fd: impl AsFd, bytes: u32) -> std::io::Result<()> {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_int(fd.as_fd().as_raw_fd(), libc::SO_RCVLOWAT, v)
}

/// setsockopt(SOL_SOCKET, `opt`, `value`). A closed or foreign fd is an
/// error, not UB: the kernel checks it.
fn set_int(fd: RawFd, opt: libc::c_int, value: libc::c_int) -> std::io::Result<()> {
    // SAFETY: `value` outlives the call and its size is passed; setsockopt
    // does not retain the pointer.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            &value as *const libc::c_int as *const libc::c_void,
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// One iovec of a send: bytes of the image, or bytes in DRAM (tiered data
/// fetched back, a response head).
#[derive(Clone, Copy, Debug)]
pub enum IoSeg<'a> {
    Image { off: u64, len: usize },
    Mem(&'a [u8]),
}

impl Pm {
    /// recvmsg(2) into `[off, off+len)` of the mapping. Returns the byte
    /// count and the kernel receive time in ns since the epoch, when the
    /// socket has SO_TIMESTAMPNS on and the kernel supplied one.
    /// Crate-internal: the caller owns those bytes (a reservation,
    /// `RxBuf::recv_timestamped`), and nothing reads or writes them
    /// meanwhile.
    pub(crate) fn recv_timestamped(
        &self,
        fd: RawFd,
        off: u64,
        len: usize,
        flags: i32,
    ) -> std::io::Result<(usize, Option<u64>)> {
        self.check_writable();
        let o = self.check(off, len);
        let mut iov = libc::iovec {
            // SAFETY: o..o+len is inside the writable mapping (checked) and
            // reserved for this caller by the Volume (free buffer space).
            iov_base: unsafe { self.base.add(o) } as *mut libc::c_void,
            iov_len: len,
        };
        // Room for one SCM_TIMESTAMPNS control message (u64-aligned).
        let mut cbuf = [0u64; 8];
        // SAFETY: msghdr is plain old data; zeroed is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = size_of_val(&cbuf) as _;
        // SAFETY: msg points at one valid iovec into the mapping and a valid
        // control buffer, all alive for the call.
        let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = n as usize;
        let mut ts = None;
        // SAFETY: CMSG_* walk the control buffer the kernel just filled,
        // bounded by msg_controllen; each header is checked for level/type
        // before its data is read as a timespec.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let t = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    ts = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        self.tracker.dirty(off, n as u64);
        if let Some(r) = &self.recorder {
            let bytes = self.slice(off, n).to_vec();
            r.lock()
                .unwrap_or_else(|e| e.into_inner())
                .store(off, &bytes);
        }
        Ok((n, ts))
    }

    /// sendmsg(2) with one iovec per segment (bytes of the image, or DRAM). Returns
    /// the bytes the kernel took (may be fewer than asked, like any send).
    /// Crate-internal: the segments must stay allocated and unwritten for
    /// the call (`TxHold::send` holds references on them).
    pub(crate) fn send_segments<'a>(
        &self,
        fd: RawFd,
        segs: impl IntoIterator<Item = IoSeg<'a>>,
        flags: i32,
    ) -> std::io::Result<usize> {
        let iovs: Vec<libc::iovec> = segs
            .into_iter()
            .map(|s| match s {
                IoSeg::Image { off, len } => {
                    let o = self.check(off, len);
                    libc::iovec {
                        // SAFETY: in bounds (checked); the kernel only reads it.
                        iov_base: unsafe { self.base.add(o) } as *mut libc::c_void,
                        iov_len: len,
                    }
                }
                // Borrowed for the call; the kernel only reads it.
                IoSeg::Mem(b) => libc::iovec {
                    iov_base: b.as_ptr() as *mut libc::c_void,
                    iov_len: b.len(),
                },
            })
            .collect();
        // SAFETY: as above; zeroed msghdr is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iovs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = iovs.len() as _;
        // SAFETY: msg names `iovs`, alive for the call; the kernel reads the
        // mapped bytes, which the caller keeps allocated (pinned) meanwhile.
        let n = unsafe { libc::sendmsg(fd, &msg, flags | libc::MSG_NOSIGNAL) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// sendfile(2) `len` bytes of the image file at `off` to socket `fd`
    /// (real backend only: the kernel reads the file's pages itself; on
    /// tmpfs/DAX there is no copy through user space).
    pub fn sendfile_to(&self, fd: impl AsFd, off: u64, len: usize) -> std::io::Result<usize> {
        let Some(file) = self.file() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "sendfile needs an image file",
            ));
        };
        self.check(off, len);
        let mut o = off as libc::off_t;
        nix::sys::sendfile::sendfile(fd, file, Some(&mut o), len).map_err(std::io::Error::from)
    }
}
