//! Conditional requests as compare-and-swap under real concurrency, on
//! both transports: clients that read a file and write it back with
//! `If-Match` its ETag never lose each other's updates. (Racing
//! create-only uploads: `net_http_surface`.)
//!
//! No lost update is checked from the versions themselves: each writer
//! puts in its new version the ETag of the one it replaced, so the
//! accepted writes must form one chain from the first version to the
//! last, each replacing exactly the one before (two accepted writes that
//! name the same predecessor would be a lost update).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Barrier};

use pktfs_netpath::IoMode;

use crate::net_common::{server, Conn};

/// Writers racing on one file, and the updates each must get accepted.
const WRITERS: usize = 4;
const UPDATES: usize = 40;

/// One writer: read, write back with If-Match, until `UPDATES` were
/// accepted. Returns (replaced ETag, new ETag) of each accepted write and
/// how many were refused 412.
fn writer(addr: SocketAddr, id: usize, start: Arc<Barrier>) -> (Vec<(String, String)>, usize) {
    let mut c = Conn::new(addr);
    let mut done = Vec::new();
    let mut refused = 0;
    start.wait();
    while done.len() < UPDATES {
        let r = c.request("GET", "/counter", &[], b"");
        assert_eq!(r.status, 200, "GET: {r:?}");
        let tag = r
            .header("ETag")
            .unwrap_or_else(|| panic!("no ETag: {:?}", r.headers))
            .to_string();
        // The new version names the one it replaces; its length varies so
        // versions differ in length and records too.
        let mut body = format!("{id} {} {tag}\n", done.len()).into_bytes();
        body.resize(body.len() + (id * 131 + done.len() * 17) % 3000, b'.');
        let w = c.request("PUT", "/counter", &[("If-Match", &tag)], &body);
        match w.status {
            204 => done.push((tag, w.header("ETag").expect("an ETag").to_string())),
            412 => refused += 1,
            s => panic!("writer {id}: PUT answered {s}: {w:?}"),
        }
    }
    (done, refused)
}

fn no_lost_update(io: IoMode) {
    let s = server(64 << 20, |c| c.io = io);
    let first = Conn::new(s.http).request("PUT", "/counter", &[], b"v0\n");
    assert_eq!(first.status, 201);
    let first = first.header("ETag").unwrap().to_string();
    let start = Arc::new(Barrier::new(WRITERS));
    let ts: Vec<_> = (0..WRITERS)
        .map(|id| {
            let (addr, start) = (s.http, start.clone());
            std::thread::spawn(move || writer(addr, id, start))
        })
        .collect();
    let mut next: BTreeMap<String, String> = BTreeMap::new();
    let mut refused = 0;
    for t in ts {
        let (done, r) = t.join().unwrap();
        refused += r;
        for (old, new) in done {
            if let Some(other) = next.insert(old.clone(), new.clone()) {
                panic!("{io:?}: two writes accepted over {old}: {other} and {new} (a lost update)");
            }
        }
    }
    // One chain from the first version through every accepted write to
    // the file as it is now.
    let mut at = first;
    let mut seen = BTreeSet::new();
    while let Some(n) = next.get(&at) {
        assert!(seen.insert(n.clone()), "{io:?}: the versions loop at {n}");
        at = n.clone();
    }
    assert_eq!(
        seen.len(),
        WRITERS * UPDATES,
        "{io:?}: accepted writes off the chain"
    );
    let now = Conn::new(s.http).request("HEAD", "/counter", &[], b"");
    assert_eq!(
        now.header("ETag"),
        Some(at.as_str()),
        "{io:?}: the file is not the chain's last version"
    );
    s.check();
    eprintln!(
        "{io:?}: {} updates accepted in one chain, {refused} refused 412 (raced)",
        seen.len()
    );
    // With four writers on two vCPUs some must have raced.
    assert!(
        refused > 0,
        "{io:?}: no write was ever refused; nothing raced"
    );
}

#[test]
fn if_match_loses_no_update_on_the_loops() {
    no_lost_update(IoMode::Uring);
}

#[test]
fn if_match_loses_no_update_on_epoll() {
    no_lost_update(IoMode::Epoll);
}

#[test]
fn if_match_loses_no_update_on_threads() {
    no_lost_update(IoMode::Threads);
}
