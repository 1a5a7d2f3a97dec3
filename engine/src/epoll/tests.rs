//! The epoll backend against the completions a ring posts (the loop and
//! `RxRing` read them the same way for both).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::*;

/// Memory standing in for the image: lent to the ring by address, read
/// back once completions said what was filled. Never freed while lent: each
/// test quiesces the ring (or ends with nothing armed) before it drops.
struct Mem(Box<[u8]>);

impl Mem {
    fn new(bytes: Vec<u8>) -> Mem {
        Mem(bytes.into_boxed_slice())
    }
    fn at(&mut self, off: usize) -> NonNull<u8> {
        NonNull::from(&mut self.0[off..]).cast()
    }
    fn seg(&mut self, off: usize, len: usize) -> RingSeg {
        RingSeg::Mem {
            ptr: self.at(off).as_ptr(),
            len,
        }
    }
    fn read(&self, off: usize, len: usize) -> &[u8] {
        &self.0[off..off + len]
    }
}

fn wait_for(r: &mut EpollRing, out: &mut Vec<Cqe>, want: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.len() < want {
        assert!(Instant::now() < deadline, "completions: {out:?}");
        r.submit_and_wait(Some(Duration::from_millis(50))).unwrap();
        r.reap(out);
    }
}

#[test]
fn completion_flags_read_as_a_ring_posts_them() {
    let c = Cqe {
        user_data: 1,
        result: 5,
        flags: CQE_F_BUFFER | 3 << CQE_BUFFER_SHIFT | CQE_F_MORE | CQE_F_BUF_MORE,
        kernel_ns: None,
    };
    assert_eq!(c.buffer(), Some(3));
    assert!(c.more() && c.buffer_more());
    let last = Cqe { flags: 0, ..c };
    assert_eq!(last.buffer(), None);
    assert!(!last.more() && !last.buffer_more());
}

#[test]
fn accept_receive_into_provided_entries_send_and_cancel() {
    let mut pm = Mem::new(vec![0u8; 64 << 10]);
    let mut r = EpollRing::new(4).unwrap();
    let lis = TcpListener::bind("127.0.0.1:0").unwrap();
    r.accept_multi(lis.as_raw_fd(), 7).unwrap();
    let mut client = TcpStream::connect(lis.local_addr().unwrap()).unwrap();
    let mut out = Vec::new();
    wait_for(&mut r, &mut out, 1);
    let a = out.remove(0);
    assert_eq!((a.user_data, a.more()), (7, true));
    let sock = crate::uring::accepted_fd(&a).unwrap();
    let fd = sock.as_raw_fd();

    // Nothing provided: the receive ends as a ring's does, ENOBUFS.
    client.write_all(b"hello").unwrap();
    r.recv_multi(fd, 9).unwrap();
    wait_for(&mut r, &mut out, 1);
    assert_eq!((out[0].result, out[0].more()), (-libc::ENOBUFS, false));
    out.clear();

    // Two entries of 8 bytes: the first takes "hello" and keeps room
    // (BUF_MORE); the next receive fills it and goes on into the second.
    // SAFETY: `pm` outlives the ring's use of it (see `Mem`).
    unsafe { r.provide(0, pm.at(1024), 8) };
    // SAFETY: `pm` outlives the ring's use of it (see `Mem`).
    unsafe { r.provide(1, pm.at(4096), 8) };
    r.recv_multi(fd, 9).unwrap();
    wait_for(&mut r, &mut out, 1);
    assert_eq!(out[0].result, 5);
    assert_eq!(out[0].buffer(), Some(0));
    assert!(out[0].more() && out[0].buffer_more());
    assert_eq!(pm.read(1024, 5), b"hello");
    out.clear();
    client.write_all(b"0123456").unwrap();
    wait_for(&mut r, &mut out, 2);
    assert_eq!(
        (out[0].result, out[0].buffer(), out[0].buffer_more()),
        (3, Some(0), false)
    );
    assert_eq!(
        (out[1].result, out[1].buffer(), out[1].buffer_more()),
        (4, Some(1), true)
    );
    assert_eq!(pm.read(1024, 8), b"hello012");
    assert_eq!(pm.read(4096, 4), b"3456");
    out.clear();

    // A send completes with the bytes the kernel took.
    let head = b"answer".to_vec();
    r.send_segments(fd, Some(&head), [pm.seg(1024, 5)], 11)
        .unwrap();
    wait_for(&mut r, &mut out, 1);
    assert_eq!((out[0].user_data, out[0].result), (11, 11));
    let mut got = [0u8; 11];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"answerhello");
    out.clear();

    // Cancelling the receive: its last completion, then the cancel's.
    r.cancel(9, 12).unwrap();
    r.reap(&mut out);
    assert_eq!(
        out.iter()
            .map(|c| (c.user_data, c.result))
            .collect::<Vec<_>>(),
        [(9, -libc::ECANCELED), (12, 0)]
    );
    out.clear();
    r.cancel(9, 13).unwrap();
    r.reap(&mut out);
    assert_eq!((out[0].user_data, out[0].result), (13, -libc::ENOENT));
    out.clear();

    // The peer closes: a re-armed receive ends with 0 (EOF).
    r.recv_multi(fd, 9).unwrap();
    drop(client);
    wait_for(&mut r, &mut out, 1);
    assert_eq!((out[0].result, out[0].more()), (0, false));
    out.clear();
    assert!(r.quiesce(&mut out));
    // Only the accept was still armed.
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].user_data, out[0].result), (7, -libc::ECANCELED));
    assert_eq!(r.inflight(), 0);
}

#[test]
fn a_send_that_does_not_fit_waits_for_room() {
    let mut pm = Mem::new(vec![7u8; 8 << 20]);
    let mut r = EpollRing::new(1).unwrap();
    let lis = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(lis.local_addr().unwrap()).unwrap();
    let (srv, _) = lis.accept().unwrap();
    srv.set_nonblocking(true).unwrap();
    let fd = srv.as_raw_fd();
    let mut out = Vec::new();
    let mut sent = 0u64;
    // Fill the socket buffer until a send has to wait.
    let mut waited = false;
    for k in 0..64u64 {
        r.send_segments(fd, None, [pm.seg(0, 8 << 20)], k).unwrap();
        // Queued until a submission, as on a ring; this one tries it.
        r.submit_and_poll(Duration::ZERO).unwrap();
        r.reap(&mut out);
        match out.pop() {
            Some(c) => sent += c.result as u64,
            None => {
                waited = true;
                // The reader drains; the kept send completes.
                let t = std::thread::spawn(move || {
                    let mut c = client;
                    let mut buf = vec![0u8; 1 << 20];
                    let mut n = 0u64;
                    while let Ok(k) = c.read(&mut buf) {
                        if k == 0 {
                            break;
                        }
                        n += k as u64;
                    }
                    n
                });
                wait_for(&mut r, &mut out, 1);
                assert_eq!(out[0].user_data, k);
                assert!(out[0].result > 0, "{:?}", out[0]);
                sent += out[0].result as u64;
                drop(srv);
                assert_eq!(t.join().unwrap(), sent);
                break;
            }
        }
    }
    assert!(waited, "the socket buffer never filled");
    assert_eq!(r.inflight(), 0);
}

#[test]
fn a_second_request_of_a_kind_is_refused_and_the_first_stays_armed() {
    let mut pm = Mem::new(vec![0u8; 16 << 10]);
    let mut r = EpollRing::new(2).unwrap();
    let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let fd = b.as_raw_fd();
    // SAFETY: `pm` outlives the ring's use of it (see `Mem`).
    unsafe { r.provide(0, pm.at(0), 4096) };
    r.recv_multi(fd, 1).unwrap();
    assert!(
        r.recv_multi(fd, 2).is_err(),
        "a second receive on one socket"
    );
    assert!(r.recv_discard(fd, 3).is_err(), "a drain beside a receive");
    assert!(r.recv_multi(7_777, 1).is_err(), "a user_data already armed");
    a.write_all(b"x").unwrap();
    let mut out = Vec::new();
    wait_for(&mut r, &mut out, 1);
    assert_eq!((out[0].user_data, out[0].result), (1, 1));
    assert!(r.quiesce(&mut out));
    assert_eq!(r.inflight(), 0);
}

#[test]
fn a_send_goes_at_the_next_submission_and_a_cancelled_one_never() {
    let mut pm = Mem::new(vec![0u8; 16 << 10]);
    pm.0[..6].copy_from_slice(b"abcdef");
    let mut r = EpollRing::new(1).unwrap();
    let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    b.set_nonblocking(true).unwrap();
    a.set_nonblocking(true).unwrap();
    let fd = b.as_raw_fd();
    let mut out = Vec::new();
    let mut buf = [0u8; 16];

    // Queued: nothing on the wire and no completion until a submission.
    r.send_segments(fd, Some(b"1:"), [pm.seg(0, 3)], 5).unwrap();
    assert!(
        r.send_segments(fd, None, [pm.seg(0, 1)], 6).is_err(),
        "a second send on one socket while the first is queued"
    );
    r.reap(&mut out);
    assert!(out.is_empty(), "{out:?}");
    assert!(a.read(&mut buf).is_err(), "sent before its submission");
    assert_eq!(r.inflight(), 1);
    wait_for(&mut r, &mut out, 1);
    assert_eq!((out[0].user_data, out[0].result), (5, 5));
    assert_eq!(a.read(&mut buf).unwrap(), 5);
    assert_eq!(&buf[..5], b"1:abc");
    out.clear();

    // Cancelled while queued: it ends -ECANCELED and is never sent; the
    // socket takes the next send.
    r.send_segments(fd, None, [pm.seg(3, 3)], 7).unwrap();
    r.cancel(7, 8).unwrap();
    r.send_segments(fd, Some(b"2:"), [], 9).unwrap();
    wait_for(&mut r, &mut out, 3);
    assert_eq!(
        out.iter()
            .map(|c| (c.user_data, c.result))
            .collect::<Vec<_>>(),
        [(7, -libc::ECANCELED), (8, 0), (9, 2)]
    );
    assert_eq!(a.read(&mut buf).unwrap(), 2);
    assert_eq!(&buf[..2], b"2:", "the cancelled send's bytes went out");
    out.clear();

    // Quiesce ends a queued send too, and nothing is sent after.
    r.send_segments(fd, Some(b"3:"), [], 10).unwrap();
    assert!(r.quiesce(&mut out));
    assert_eq!(
        out.iter()
            .map(|c| (c.user_data, c.result))
            .collect::<Vec<_>>(),
        [(10, -libc::ECANCELED)]
    );
    assert_eq!(r.inflight(), 0);
    r.submit_and_poll(Duration::ZERO).unwrap();
    assert!(a.read(&mut buf).is_err(), "a quiesced send went out");
}
