//! System calls the safe wrappers leave unsafe: owning a descriptor that
//! arrived over a socket (the /dev/fuse descriptor fusermount3 hands back
//! for an unprivileged mount).

use std::io::{self, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};

/// Receive one descriptor sent with SCM_RIGHTS on `sock` and own it. Extra
/// descriptors in the same message are closed.
pub fn recv_fd(sock: &OwnedFd) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut cmsg = nix::cmsg_space!([RawFd; 4]);
    let msg = loop {
        match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(m) => break m,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    let mut fds = Vec::new();
    if msg.bytes > 0 {
        for c in msg.cmsgs().map_err(io::Error::from)? {
            if let ControlMessageOwned::ScmRights(v) = c {
                fds.extend(v);
            }
        }
    }
    let owned: Vec<OwnedFd> = fds
        .into_iter()
        .filter(|&fd| fd >= 0)
        // SAFETY: each descriptor was installed in this process by the
        // kernel for the SCM_RIGHTS message just received; nothing else in
        // the process knows its number, so this is its only owner.
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .collect();
    // Any extra descriptors are closed when `owned` is dropped.
    owned
        .into_iter()
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "no descriptor received"))
}
