//! Receive times through the library's receivers, in this process: the
//! receive-to-file helper run only [`HOLD`] after the bytes arrived (the
//! in-process form of a held receiver: nothing reads the socket until
//! then) stores the arrival time, flagged as the kernel's; a socket whose
//! receives come without the kernel's time stores records that say so
//! (the clock when they were taken, no `kernel_time`), never a kernel claim.
//! The held servers and `pktfs recv` are in the pktfs package's
//! `rxtime_cli`.

use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use pktfs_fs::{ChainEntry, Volume};
use pktfs_netpath::receive::stamped;
use pktfs_netpath::receive::stream::RxStream;
use pktfs_netpath::receive::to_file::{recv_to_file, RecvOptions};

use crate::net_common::{data, send_and_close, wall_ns};

/// How long the bytes wait before anything reads them.
const HOLD: Duration = Duration::from_millis(300);
/// A record's time is at least this long before the receiver started.
const BEFORE_RECEIVE: Duration = Duration::from_millis(250);
/// How long after the last write returned a kernel time may be.
const SLACK: Duration = Duration::from_millis(25);
/// Small enough to sit in the socket's receive buffer unread.
const STREAM_BYTES: usize = 24 << 10;

fn volume() -> Volume {
    Volume::in_memory(pktfs_layout::GeometryParams::for_size(16 << 20)).unwrap()
}

fn chain(vol: &Volume, path: &str) -> Vec<ChainEntry> {
    vol.chain(vol.resolve_path(path).unwrap().ino).unwrap()
}

#[test]
fn recv_to_file_stores_the_arrival_time_of_bytes_queued_before_accept() {
    let vol = volume();
    let l = stamped::listen("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let body = data(STREAM_BYTES, 11);
    let sent = send_and_close(&mut c, &body);
    std::thread::sleep(HOLD);
    let started = wall_ns();
    let (s, _) = l.accept().unwrap();
    let rep = recv_to_file(&vol, &s, "/held.bin", &RecvOptions::default()).unwrap();
    assert!(rep.ended_cleanly);
    assert_eq!(rep.bytes, body.len() as u64);
    assert_eq!(rep.kernel_time_records, rep.records, "{rep:?}");
    let recs = chain(&vol, "/held.bin");
    assert_eq!(recs.len() as u64, rep.records);
    for r in &recs {
        assert!(r.from_network && r.kernel_time, "{r:?}");
        assert!(r.timestamp_ns + 1_000 >= sent.0, "before the send: {r:?}");
        assert!(
            r.timestamp_ns <= sent.1 + SLACK.as_nanos() as u64,
            "{} ms after the send: the time it was read, not the arrival: {r:?}",
            (r.timestamp_ns - sent.1) / 1_000_000
        );
        assert!(r.timestamp_ns + BEFORE_RECEIVE.as_nanos() as u64 <= started);
    }
    assert_eq!(rep.first_rx_ns, recs[0].timestamp_ns);
}

#[test]
fn a_receive_without_a_kernel_time_says_so() {
    let vol = volume();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    let mut rx = RxStream::new(&vol, &s, 1 << 20);
    // The kernel gives no time once the option is off.
    pktfs_fs::media::net::set_rx_timestamps(&s, false).unwrap();
    assert!(!pktfs_fs::media::net::rx_timestamps_enabled(&s).unwrap());
    let body = data(STREAM_BYTES, 12);
    let sent = send_and_close(&mut c, &body);
    std::thread::sleep(HOLD);
    let started = wall_ns();
    let mut pieces = Vec::new();
    let mut got = 0;
    while got < body.len() {
        let n = rx
            .fill(STREAM_BYTES as u32, Duration::from_secs(10))
            .unwrap();
        assert!(n > 0, "the stream ended early");
        got += n;
        let k = rx.available();
        rx.take_into(k, &mut pieces).unwrap();
    }
    for p in &pieces {
        assert!(
            !p.at().is_kernel(),
            "a kernel claim without a kernel time: {:?}",
            p.at()
        );
    }
    drop(rx);
    let ino = vol
        .create(vol.root(), b"clock.bin", 0o644, 0, 0)
        .unwrap()
        .ino;
    vol.rx_commit(ino, pieces).unwrap();
    let recs = chain(&vol, "/clock.bin");
    assert!(!recs.is_empty());
    for r in &recs {
        assert!(r.from_network, "{r:?}");
        assert!(
            !r.kernel_time,
            "FLAG_KERNEL_TIME without a kernel time: {r:?}"
        );
        // What it says is the clock when the bytes were taken: after the
        // hold, so never passed off as the arrival.
        assert!(
            r.timestamp_ns >= started && r.timestamp_ns > sent.1,
            "{r:?}"
        );
    }
    assert_eq!(vol.read(ino, 0, u64::MAX).unwrap(), body);
}
