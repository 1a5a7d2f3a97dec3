//! The loop's send path with a protocol of its own (raw mode never sends):
//! a session that answers its first bytes with a whole file, sent by the
//! chain through the loop (one iovec per record, holes from the zero page),
//! continued over many partial sends while the client reads.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pktfs_engine::RxRingConfig;
use pktfs_fs::{RxHeld, RxTime, Volume};

use super::{CloseReason, Flow, Loops, Protocol, Session, TurnClock};

struct SendFile {
    ino: u64,
    sent: Arc<AtomicU64>,
}

struct SendSession<'v> {
    vol: &'v Volume,
    ino: u64,
    asked: bool,
    sent: Arc<AtomicU64>,
}

impl Protocol for SendFile {
    fn name(&self) -> &'static str {
        "sendfile-test"
    }
    fn open<'v>(&'v self, vol: &'v Volume, _peer: SocketAddr) -> Option<Box<dyn Session<'v> + 'v>> {
        Some(Box::new(SendSession {
            vol,
            ino: self.ino,
            asked: false,
            sent: self.sent.clone(),
        }))
    }
}

impl<'v> Session<'v> for SendSession<'v> {
    fn on_data(&mut self, _data: RxHeld<'v>, _rx: RxTime, _at: TurnClock) -> Flow<'v> {
        if std::mem::replace(&mut self.asked, true) {
            return Flow::Continue;
        }
        Flow::Send(pktfs_engine::TxMsg {
            head: Vec::new(),
            hold: Some(self.vol.tx_hold(self.ino, 0, u64::MAX).unwrap()),
        })
    }
    fn end_turn(&mut self) -> Flow<'v> {
        Flow::Continue
    }
    fn on_eof(&mut self) -> Flow<'v> {
        Flow::Continue
    }
    fn on_sent(&mut self, result: std::io::Result<u64>, _spent: Vec<u8>) -> Flow<'v> {
        self.sent.store(result.unwrap(), Ordering::SeqCst);
        Flow::Finish
    }
    fn idle_timeout(&self) -> Duration {
        Duration::from_secs(30)
    }
    fn on_close(&mut self, _why: CloseReason) {}
}

#[test]
fn a_session_sends_a_file_by_its_chain_over_partial_sends() {
    if let Err(why) = pktfs_engine::rxring::probe() {
        // The in-tree integration tests (net_uring) fail under CI for this;
        // here the loop cannot run at all.
        panic!("io_uring is not usable here: {why}");
    }
    let len = 64 << 20;
    let vol =
        Arc::new(Volume::in_memory(pktfs_layout::GeometryParams::for_size(len as u64)).unwrap());
    let ino = vol.create(vol.root(), b"f", 0o644, 0, 0).unwrap().ino;
    let head: Vec<u8> = (0..6_000_000u32)
        .map(|i| (i * 7 + i / 4096) as u8)
        .collect();
    vol.write(ino, 0, &head).unwrap();
    vol.write(ino, 9_000_000, b"the end").unwrap(); // a 3 MB hole before it
    let want = vol.read(ino, 0, u64::MAX).unwrap();
    let sent = Arc::new(AtomicU64::new(0));
    let mut loops = Loops::start(
        vol.clone(),
        vec![(
            "127.0.0.1:0".parse().unwrap(),
            Arc::new(SendFile {
                ino,
                sent: sent.clone(),
            }) as Arc<dyn Protocol>,
        )],
        1,
        RxRingConfig::default(),
        Duration::from_micros(50),
        Default::default(),
    )
    .unwrap();
    let mut c = TcpStream::connect(loops.addr(0)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(b"go").unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the file, holes as zeros");
    assert_eq!(sent.load(Ordering::SeqCst), want.len() as u64);
    loops.stop();
    assert_eq!(vol.stray_buffer_refs(), 0, "holds and ring returned");
}
