//! `pktfs chain --pcap`: a file's records as a pcapng capture, read back
//! by tshark. Files written through the network (`pktfs recv`) and by a
//! plain write (`pktfs put`), exported from an image nobody holds and from
//! one a server holds; tshark must see one packet per record (a record
//! over one packet's payload in parts), each stamped with exactly its
//! record's time in nanoseconds, its comment carrying the record's CRC32C,
//! seq and file offset, and the TCP payloads reassembled by sequence
//! number must be the file. A damaged record is refused, named, and no
//! capture is left.

use std::io::Write;
use std::net::TcpStream;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cli_common::{chain_json, mkfs, pktfs, serve, stop, Proc, PKTFS};
use crate::prereq;

/// Most payload bytes one packet of the capture carries (IPv4's 16-bit
/// total length less 40 bytes of headers).
const MAX_PAYLOAD: u64 = 65_535 - 40;

fn data(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) ^ seed) as u8)
        .collect()
}

/// One packet as tshark reads it.
#[derive(Debug)]
struct Packet {
    time_ns: u64,
    tcp_seq: u32,
    payload: Vec<u8>,
    comment: String,
}

/// `frame.time_epoch` ("SECONDS.NNNNNNNNN") as nanoseconds, exactly (a
/// float would lose the last digits).
fn epoch_ns(s: &str) -> u64 {
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    assert_eq!(frac.len(), 9, "tshark printed {s}: not nanoseconds");
    sec.parse::<u64>().unwrap() * 1_000_000_000 + frac.parse::<u64>().unwrap()
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn tshark(cap: &Path) -> Vec<Packet> {
    let o = Command::new("tshark")
        .args([
            "-r",
            cap.to_str().unwrap(),
            "-T",
            "fields",
            "-E",
            "separator=/t",
        ])
        .args(["-e", "frame.time_epoch", "-e", "tcp.seq_raw"])
        .args(["-e", "tcp.payload", "-e", "frame.comment"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 4, "{l}");
            Packet {
                time_ns: epoch_ns(f[0]),
                tcp_seq: f[1].parse().unwrap(),
                payload: hex(f[2]),
                comment: f[3].to_string(),
            }
        })
        .collect()
}

/// The value of `key=` in a packet comment.
fn field<'a>(comment: &'a str, key: &str) -> &'a str {
    comment
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in {comment:?}"))
}

/// Export `path` of `img` with `--pcap`, read it with tshark, and check it
/// against the file's chain and contents. Returns the records' rows.
fn export_and_check(img: &Path, path: &str, want: &[u8]) -> Vec<serde_json::Value> {
    let rows = chain_json(img, path);
    assert!(!rows.is_empty());
    let cap = img.with_extension(format!("{}.pcapng", path.trim_start_matches('/')));
    let o = pktfs(&[
        "chain",
        img.to_str().unwrap(),
        path,
        "--pcap",
        cap.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pkts = tshark(&cap);

    // One packet per record, a longer record in as many parts as it needs.
    let n = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap();
    let want_pkts: u64 = rows
        .iter()
        .map(|r| n(r, "length").div_ceil(MAX_PAYLOAD).max(1))
        .sum();
    assert_eq!(
        pkts.len() as u64,
        want_pkts,
        "packets for {} records",
        rows.len()
    );
    let mut file = vec![0u8; want.len()];
    let mut at = 0usize;
    for r in &rows {
        let parts = n(r, "length").div_ceil(MAX_PAYLOAD).max(1) as usize;
        let mut bytes = Vec::new();
        for p in &pkts[at..at + parts] {
            // The packet's time is its record's, to the nanosecond.
            assert_eq!(p.time_ns, n(r, "timestamp_ns"), "{}", p.comment);
            assert_eq!(field(&p.comment, "record"), n(r, "record").to_string());
            assert_eq!(field(&p.comment, "crc32c"), r["crc32c"].as_str().unwrap());
            assert_eq!(field(&p.comment, "seq"), n(r, "seq").to_string());
            assert_eq!(
                field(&p.comment, "file_offset"),
                n(r, "file_offset").to_string()
            );
            assert_eq!(
                field(&p.comment, "kernel_time"),
                r["kernel_time"].as_bool().unwrap().to_string()
            );
            assert_eq!(
                field(&p.comment, "from_network"),
                r["from_network"].as_bool().unwrap().to_string()
            );
            // TCP sequence = file offset: reassembly gives the file back.
            let off = p.tcp_seq as usize;
            assert_eq!(off, n(r, "file_offset") as usize + bytes.len());
            file[off..off + p.payload.len()].copy_from_slice(&p.payload);
            bytes.extend_from_slice(&p.payload);
        }
        assert_eq!(
            format!("{:08x}", pktfs_layout::crc32c(&bytes)),
            r["crc32c"].as_str().unwrap(),
            "the packets of record {} carry its bytes",
            r["record"]
        );
        at += parts;
    }
    assert_eq!(file, want, "the reassembled payloads are the file");
    rows
}

#[test]
fn tshark_reads_records_received_and_written() {
    require!(prereq::tool("tshark"));
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);

    // Through the network: `pktfs recv` takes a stream sent in pieces
    // with pauses, so the file has many records, each with a kernel time.
    let mut r = Proc::spawn(
        Command::new(PKTFS)
            .args([
                "recv",
                img.to_str().unwrap(),
                "/net.bin",
                "--listen",
                "127.0.0.1:0",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let addr = recv_address(&mut r);
    let net = data(150_000, 7);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    for chunk in net.chunks(10_000) {
        s.write_all(chunk).unwrap();
        std::thread::sleep(Duration::from_millis(15));
    }
    drop(s);
    let o = r.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // A plain write: one record over one packet's payload, one small one.
    let big = data(200_000, 9);
    let small = b"a small file\n".to_vec();
    for (name, body) in [("big", &big), ("small", &small)] {
        let src = d.path().join(name);
        std::fs::write(&src, body).unwrap();
        let o = pktfs(&[
            "put",
            img.to_str().unwrap(),
            src.to_str().unwrap(),
            &format!("/{name}"),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    let rows = export_and_check(&img, "/net.bin", &net);
    assert!(rows.len() > 1, "{} records", rows.len());
    assert!(rows.iter().all(|r| r["from_network"] == true));
    let rows = export_and_check(&img, "/big", &big);
    assert!(rows
        .iter()
        .any(|r| r["length"].as_u64().unwrap() > MAX_PAYLOAD));
    assert!(rows.iter().all(|r| r["from_network"] == false));
    export_and_check(&img, "/small", &small);

    // The same through the control socket of a server holding the image.
    let (server, _) = serve(&img, Stdio::null());
    export_and_check(&img, "/net.bin", &net);
    export_and_check(&img, "/big", &big);
    stop(server);
}

/// The address `pktfs recv --listen 127.0.0.1:0` says it waits on.
fn recv_address(r: &mut Proc) -> std::net::SocketAddr {
    use std::io::{BufRead, BufReader};
    let mut line = String::new();
    BufReader::new(r.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("waiting for one connection"), "{line}");
    line.split_whitespace()
        .find_map(|w| w.trim_end_matches([',', ':', ')']).parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
}

#[test]
fn a_damaged_record_is_refused_and_named() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);
    let src = d.path().join("src");
    std::fs::write(&src, data(5_000, 3)).unwrap();
    let o = pktfs(&["put", img.to_str().unwrap(), src.to_str().unwrap(), "/f"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = chain_json(&img, "/f");
    let r = &rows[0];
    flip_byte(&img, r["image_offset"].as_u64().unwrap() + 100);

    let cap = d.path().join("f.pcapng");
    let o = pktfs(&[
        "chain",
        img.to_str().unwrap(),
        "/f",
        "--pcap",
        cap.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(&format!("record {}", r["record"])) && err.contains("damaged"),
        "{err}"
    );
    assert!(!cap.exists(), "no capture is left");
}

/// Flip one byte of the image file (the media changing under the file
/// system, as a stray write would).
fn flip_byte(img: &Path, at: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(img)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    b[0] ^= 0x5a;
    f.write_all_at(&b, at).unwrap();
}
