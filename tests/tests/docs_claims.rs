//! What the documents state about records and verification, held to the
//! code: the longest record they name is the Volume's cap, no path that
//! writes (write, copy, HTTP upload, raw stream) makes a longer one, a
//! 1 MiB write is the number of records the README says; and the verify
//! modes do what INTEGRITY.md says, with `once` the default.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use pktfs_fs::volume::MAX_RECORD_BYTES;
use pktfs_fs::{OpenOptions, VerifyMode, Volume};
use pktfs_testkit::net_common::{data, serve, wait_until};

fn doc(name: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn records_are_at_most_as_long_as_the_documents_say() {
    assert_eq!(MAX_RECORD_BYTES, 256 << 10, "the documents say 256 KiB");
    for (file, says) in [
        (
            "README.md",
            "up to 256 KiB, so a 1 MiB write is four records",
        ),
        ("README.md", "no record is longer than 256 KiB"),
        ("docs/FORMAT.md", "*writes* slices of at most 256 KiB"),
        (
            "docs/SIZING.md",
            "run of up to 256 KiB, so a 1 MiB write is four",
        ),
        ("docs/INTEGRITY.md", "a record is at most 256 KiB"),
    ] {
        let text = doc(file).split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains(says), "{file} no longer says {says:?}");
    }
    let (dir, vol) = pktfs_testkit::net_common::image(64 << 20);
    let check = |ino: u64, what: &str| {
        let chain = vol.chain(ino).unwrap();
        assert!(!chain.is_empty(), "{what}: no records");
        let longest = chain.iter().map(|r| r.len).max().unwrap();
        assert!(
            longest <= MAX_RECORD_BYTES,
            "{what}: a record of {longest} bytes"
        );
        chain.len()
    };
    let root = vol.root();
    // A write of 1 MiB at an aligned offset: four records.
    let f = vol.create(root, b"w", 0o644, 0, 0).unwrap().ino;
    vol.write(f, 0, &data(1 << 20, 1)).unwrap();
    assert_eq!(
        check(f, "a 1 MiB write"),
        4,
        "README: a 1 MiB write is four records"
    );
    vol.write(f, 100, &data(3 << 20, 2)).unwrap();
    check(f, "an unaligned 3 MiB write");
    let c = vol.create(root, b"c", 0o644, 0, 0).unwrap().ino;
    vol.copy_range(f, 0, c, 0, 3 << 20).unwrap();
    check(c, "copy_range");
    // Over the network: an HTTP upload and a raw stream, 3 MiB each.
    let srv = serve(dir, vol.clone(), |cfg| {
        cfg.raw_listen = Some("127.0.0.1:0".parse().unwrap());
        cfg.raw_dir = "/raw".into();
    });
    let r = pktfs_testkit::net_common::http(srv.http, "PUT", "/up", &[], &data(3 << 20, 3));
    assert_eq!(r.status, 201);
    check(srv.lookup("/up").unwrap().ino, "an HTTP upload");
    let mut s = TcpStream::connect(srv.raw.unwrap()).unwrap();
    s.write_all(&data(3 << 20, 4)).unwrap();
    drop(s);
    wait_until("the raw stream stored", Duration::from_secs(10), || {
        srv.lookup("/raw")
            .and_then(|_| srv.files_in("/raw").first().cloned())
            .is_some_and(|(_, ino)| vol.getattr(ino).is_ok_and(|a| a.size == 3 << 20))
    });
    let (_, raw) = srv.files_in("/raw")[0].clone();
    check(raw, "a raw stream");
}

#[test]
fn the_verify_modes_do_what_integrity_md_says() {
    let integrity = doc("docs/INTEGRITY.md");
    assert!(
        integrity.contains("- **once** (default)"),
        "INTEGRITY.md: once is the default"
    );
    assert_eq!(OpenOptions::default().verify, VerifyMode::Once);
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let img = dir.path().join("img");
    let params = pktfs_layout::GeometryParams::for_size(16 << 20);
    Volume::format(
        &img,
        &pktfs_fs::FormatOptions {
            params,
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    // Where the file's one record lies (asking for the chain checks it, so
    // not in the mounts below).
    let (f, pos) = {
        let v = Volume::open(&img, &OpenOptions::default()).unwrap();
        let f = v.create(v.root(), b"f", 0o644, 0, 0).unwrap().ino;
        v.write(f, 0, &data(100_000, 5)).unwrap();
        let r = v.chain(f).unwrap()[0];
        v.close().unwrap();
        (f, r.image_off + 50)
    };
    let open = |mode: VerifyMode| {
        let opts = OpenOptions {
            verify: mode,
            ..Default::default()
        };
        Volume::open(&img, &opts).unwrap()
    };
    let flip = |v: &mut Volume| {
        let mut b = [0u8];
        v.pm_exclusive().read(pos, &mut b);
        v.pm_exclusive().write(pos, &[b[0] ^ 1]);
    };
    // (mode, a damaged record's first read in a mount fails, a read after
    // the bytes changed behind a record already read fails)
    for (mode, first_read, after_a_read) in [
        (VerifyMode::Once, true, false),
        (VerifyMode::Always, true, true),
        (VerifyMode::Off, false, false),
    ] {
        // "every mount checks every record again on first use" (once).
        let mut v = open(mode);
        flip(&mut v);
        assert_eq!(
            v.read(f, 0, 10).is_err(),
            first_read,
            "{mode}: the first read"
        );
        flip(&mut v);
        drop(v);
        // A byte changes behind the Volume after a read (what scrub is
        // for): `once` checked the record already in this mount, `always`
        // checks it again, `off` never does.
        let mut v = open(mode);
        assert!(v.read(f, 0, 10).is_ok(), "{mode}: a sound record reads");
        flip(&mut v);
        assert_eq!(
            v.read(f, 0, 10).is_err(),
            after_a_read,
            "{mode}: a later read"
        );
        flip(&mut v);
    }
}
