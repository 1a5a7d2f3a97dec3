//! The ingest example (netpath/examples/ingest.rs), built by `cargo test`,
//! run against real sockets: three connections become three files whose
//! bytes and CRCs match what was sent.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// target/<profile>/examples/ingest, next to this test's deps directory.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let p = dir.join("examples").join("ingest");
    if !p.exists() {
        // `cargo test` builds the examples, but `cargo test --test NAME`
        // does not: build it the same way.
        let st = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "pktfs-netpath", "--example", "ingest"])
            .status()
            .unwrap();
        assert!(st.success(), "building the ingest example failed");
    }
    assert!(p.exists(), "{} is not built", p.display());
    p
}

#[test]
fn ingest_example_stores_each_connection_as_a_file() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("ingest.img");
    let mut child = Command::new(example())
        .args([img.to_str().unwrap(), "127.0.0.1:0", "3"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line.trim().rsplit(' ').next().unwrap().to_string();
    let bodies: Vec<Vec<u8>> = (0..3u32)
        .map(|k| (0..(100_000 + k * 50_000)).map(|i| (i ^ k) as u8).collect())
        .collect();
    for b in &bodies {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.write_all(b).unwrap();
    }
    let mut rest = String::new();
    for _ in 0..3 {
        out.read_line(&mut rest).unwrap();
    }
    assert!(child.wait().unwrap().success());
    let v = pktfs_fs::Volume::open(&img, &pktfs_fs::OpenOptions::default()).unwrap();
    let mut got: Vec<Vec<u8>> = (0..3)
        .map(|n| {
            let a = v.lookup(v.root(), format!("conn-{n}").as_bytes()).unwrap();
            v.read(a.ino, 0, u64::MAX).unwrap()
        })
        .collect();
    got.sort_by_key(|b| b.len());
    assert_eq!(got, bodies);
    for b in &bodies {
        assert!(
            rest.contains(&format!("crc32c {:08x}", pktfs_layout::crc32c(b))),
            "{rest}"
        );
    }
}
