//! Transmit: `send` streams a file by its chain; why the servers use
//! sendmsg (kernel copies before returning) and not sendfile (pages stay
//! referenced until the peer reads them).

use std::io::Read;
use std::net::TcpListener;
use std::time::Duration;

use pktfs_fs::media::{MapOptions, Pm};

use crate::net_common::*;

#[test]
fn send_streams_a_file_by_its_chain_with_holes_as_zeros() {
    let (_d, vol) = image(64 << 20);
    let root = vol.root();
    let f = vol.create(root, b"f", 0o644, 0, 0).unwrap();
    let a = data(3_000_000, 1);
    vol.write(f.ino, 0, &a).unwrap();
    vol.write(f.ino, 5_000_000, b"end").unwrap();
    vol.write(f.ino, 100, b"overwrite in the middle").unwrap();
    let mut want = vec![0u8; 5_000_003];
    want[..a.len()].copy_from_slice(&a);
    want[100..123].copy_from_slice(b"overwrite in the middle");
    want[5_000_000..].copy_from_slice(b"end");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let rx = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut v = Vec::new();
        s.read_to_end(&mut v).unwrap();
        v
    });
    let r =
        pktfs_netpath::transmit::to_peer::send_file(&vol, f.ino, &addr, Duration::from_secs(10))
            .unwrap();
    let got = rx.join().unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got == want);
    assert_eq!(r.bytes, want.len() as u64);
    let records = vol.chain(f.ino).unwrap().len() as u64;
    assert_eq!(r.segments, records, "one iovec per record");
    vol.check_invariants().unwrap();
}

/// The reason netpath does not use sendfile: after sendfile(2) returns, a
/// loopback peer that has not read yet still gets the bytes the file holds
/// *when it reads*. sendmsg copies at the call. (If a kernel ever changes
/// this, this test says so, and tx.rs's reasoning should be revisited.)
#[test]
fn sendfile_pages_stay_in_flight_after_the_call_but_sendmsg_copies() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = dir.path().join("file");
    std::fs::write(&p, vec![b'A'; 65536]).unwrap();
    let mut pm = Pm::open(&p, &MapOptions::default()).unwrap();
    let mut pm = pm.exclusive();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (server, _) = l.accept().unwrap();
    // sendfile, then change the bytes before the peer reads.
    assert_eq!(pm.pm().sendfile_to(&server, 0, 65536).unwrap(), 65536);
    std::thread::sleep(Duration::from_millis(50));
    pm.write(0, &[b'B'; 65536]);
    let mut got = vec![0u8; 65536];
    client.read_exact(&mut got).unwrap();
    let changed = got.iter().filter(|&&b| b == b'B').count();
    // sendmsg from the mapping, then change the bytes the same way.
    pm.write(0, &[b'A'; 65536]);
    assert_eq!(pm.send_segments(&server, [(0, 65536)], 0).unwrap(), 65536);
    pm.write(0, &[b'B'; 65536]);
    client.read_exact(&mut got).unwrap();
    assert!(got.iter().all(|&b| b == b'A'), "sendmsg copied at the call");
    assert!(
        changed > 0,
        "sendfile sent bytes written after it returned (this kernel copies: revisit tx.rs)"
    );
}
