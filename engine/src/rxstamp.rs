//! The kernel's receive time of one socket read: the `SCM_TIMESTAMPNS`
//! control message a socket with SO_TIMESTAMPNS set adds to every
//! `recvmsg`, found in the control bytes the read returned.
//!
//! Both engines read it: io_uring finds the control bytes inside the
//! provided buffer, after the `io_uring_recvmsg_out` header of a multishot
//! `recvmsg` (`crate::uring`); epoll passes a control buffer of its own to
//! `recvmsg` (`crate::epoll`). Parsing is safe code over bytes, so the
//! control bytes may sit at any alignment (in a provided buffer they start
//! wherever the previous receive ended).
//!
//! For a TCP read the kernel reports the arrival of the newest segment the
//! read took (`tcp_recvmsg` keeps the stamp of each segment it copies from),
//! not of the first byte; and a segment queued behind another is merged
//! into it, taking the later stamp, a bare FIN included (so bytes read
//! only after the peer closed carry the FIN's arrival).

/// Bytes of a `struct cmsghdr` as the kernel lays it out (`cmsg_len` is a
/// `size_t`, then level and type), aligned: where a message's data starts.
const HDR_BYTES: usize = cmsg_align(size_of::<libc::cmsghdr>());
/// Bytes of the data of an `SCM_TIMESTAMPNS` message (`struct timespec`).
const TS_BYTES: usize = size_of::<libc::timespec>();

/// Control bytes a receive keeps room for: exactly one `SCM_TIMESTAMPNS`
/// message (`CMSG_SPACE(sizeof(struct timespec))`, 32 on 64-bit Linux).
pub(crate) const CONTROL_BYTES: usize = HDR_BYTES + cmsg_align(TS_BYTES);

/// `CMSG_ALIGN`: control messages are laid out on `size_t` boundaries.
const fn cmsg_align(n: usize) -> usize {
    let a = size_of::<usize>();
    (n + a - 1) & !(a - 1)
}

/// The receive time in `control` (the control bytes a `recvmsg` returned,
/// `msg_controllen` of them), ns since the epoch; `None` when the kernel
/// gave none (the socket has no SO_TIMESTAMPNS, or the message did not
/// fit: `MSG_CTRUNC`). A message that claims more bytes than are there is
/// not read.
pub(crate) fn timestamp_ns(control: &[u8]) -> Option<u64> {
    let mut at = 0usize;
    while control.len().saturating_sub(at) >= HDR_BYTES {
        let h = &control[at..];
        let len = usize::from_ne_bytes(h[..size_of::<usize>()].try_into().ok()?);
        let i = size_of::<usize>();
        let level = i32::from_ne_bytes(h[i..i + 4].try_into().ok()?);
        let kind = i32::from_ne_bytes(h[i + 4..i + 8].try_into().ok()?);
        if len < HDR_BYTES || len > h.len() {
            // Malformed, or cut short by MSG_CTRUNC.
            return None;
        }
        if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS && len >= HDR_BYTES + TS_BYTES
        {
            let d = &h[HDR_BYTES..HDR_BYTES + TS_BYTES];
            let sec = i64::from_ne_bytes(d[..8].try_into().ok()?);
            let nsec = i64::from_ne_bytes(d[8..16].try_into().ok()?);
            if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
                return None;
            }
            return (sec as u64)
                .checked_mul(1_000_000_000)?
                .checked_add(nsec as u64);
        }
        at += cmsg_align(len);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One control message of `level`/`kind` with `data`, as the kernel
    /// writes it.
    fn cmsg(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
        let len = HDR_BYTES + data.len();
        let mut v = Vec::new();
        v.extend_from_slice(&len.to_ne_bytes());
        v.extend_from_slice(&level.to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.resize(HDR_BYTES, 0);
        v.extend_from_slice(data);
        v.resize(cmsg_align(len), 0);
        v
    }

    fn ts(sec: i64, nsec: i64) -> Vec<u8> {
        let mut v = sec.to_ne_bytes().to_vec();
        v.extend_from_slice(&nsec.to_ne_bytes());
        v
    }

    #[test]
    fn the_room_is_one_timestamp_message() {
        assert_eq!(CONTROL_BYTES, cmsg(0, 0, &ts(0, 0)).len());
        assert_eq!(CONTROL_BYTES, 32, "64-bit Linux");
    }

    #[test]
    fn finds_the_time_at_any_alignment() {
        let m = cmsg(
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPNS,
            &ts(1_700_000_000, 123),
        );
        for shift in 0..8 {
            let mut b = vec![0xAA; shift];
            b.extend_from_slice(&m);
            assert_eq!(
                timestamp_ns(&b[shift..]),
                Some(1_700_000_000_000_000_123),
                "shift {shift}"
            );
        }
    }

    #[test]
    fn skips_other_messages_and_refuses_what_is_cut_short() {
        let mut b = cmsg(libc::SOL_SOCKET, libc::SCM_RIGHTS, &[1, 0, 0, 0]);
        b.extend(cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts(5, 6)));
        assert_eq!(timestamp_ns(&b), Some(5_000_000_006));
        // Truncated (MSG_CTRUNC): the header claims more than is there.
        let m = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts(5, 6));
        assert_eq!(timestamp_ns(&m[..m.len() - 4]), None);
        assert_eq!(timestamp_ns(&m[..HDR_BYTES - 1]), None);
        assert_eq!(timestamp_ns(&[]), None);
        // Another kind of message only.
        let o = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMP, &ts(5, 6));
        assert_eq!(timestamp_ns(&o), None);
        // A length below its own header is malformed, not a loop.
        let mut z = m.clone();
        z[..8].copy_from_slice(&0usize.to_ne_bytes());
        assert_eq!(timestamp_ns(&z), None);
        // Nonsense nanoseconds.
        let bad = cmsg(
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPNS,
            &ts(5, 2_000_000_000),
        );
        assert_eq!(timestamp_ns(&bad), None);
    }
}
