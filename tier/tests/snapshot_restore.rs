//! Snapshot and restore on real Volumes (in memory): a tree with nested
//! directories, hard links, a symlink, a FIFO, xattrs and a default ACL, a
//! sparse file, an empty file, files of several records and a file received
//! from the network path is tiered out into an in-memory object map,
//! captured, and restored into a new volume that reads through the same
//! map: everything is identical, records field for field, and a file still
//! partly in PM is named and left out. A damaged or truncated snapshot, or
//! one with extent flags this version does not know, is refused; a version
//! 1 snapshot (extents without flags) still restores. (The bucket round trip runs against real Garage
//! in pktfs/tests/tier_cli.rs.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pktfs_fs::media::Pm;
use pktfs_fs::{RemoteBytes, RemoteSource, SetAttr, TimeSet, Volume, XattrFlags};
use pktfs_layout::{FileType, GeometryParams};
use pktfs_tier::restore::restore_into;
use pktfs_tier::snapshot::{capture, parse, referenced_objects};

#[derive(Debug, Default)]
struct Mem(Mutex<HashMap<u64, Vec<u8>>>);

impl RemoteSource for Mem {
    fn fetch(&self, _ino: u64, obj: u64, off: u64, len: u32) -> Result<RemoteBytes, String> {
        let m = self.0.lock().unwrap();
        let o = m.get(&obj).ok_or("no such object")?;
        Ok(RemoteBytes::new(
            o[off as usize..off as usize + len as usize].to_vec(),
        ))
    }
}

fn fresh(size: u64) -> Volume {
    fresh_with(GeometryParams::for_size(size))
}

fn fresh_with(params: GeometryParams) -> Volume {
    Volume::in_memory(params).unwrap()
}

fn tier_all(v: &Volume, mem: &Mem, next: &mut u64) {
    for c in v.tier_candidates() {
        let out = v.tier_begin(c.ino, u64::MAX).unwrap();
        let obj = *next;
        *next += 1;
        let mut body = Vec::new();
        let mut placed = Vec::new();
        for k in 0..out.extents().len() {
            placed.push((obj, body.len() as u64));
            body.extend_from_slice(out.bytes(k).unwrap());
        }
        mem.0.lock().unwrap().insert(obj, body);
        v.tier_switch(out, &placed).unwrap();
    }
}

/// Everything a restore must bring back, by path.
fn tree(v: &Volume) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![(v.root(), String::new())];
    let mut seen_ino: HashMap<u64, String> = HashMap::new();
    while let Some((dir, path)) = stack.pop() {
        let mut ents = v.list_dir(dir).unwrap();
        ents.sort_by(|a, b| a.name.cmp(&b.name));
        for e in ents {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let p = format!("{path}/{}", String::from_utf8_lossy(&e.name));
            let a = v.getattr(e.ino).unwrap();
            let mut x: Vec<(Vec<u8>, Vec<u8>)> = v
                .listxattr(e.ino)
                .unwrap()
                .into_iter()
                .map(|n| {
                    let val = v.getxattr(e.ino, &n).unwrap();
                    (n, val)
                })
                .collect();
            x.sort();
            let content = match a.kind {
                FileType::Regular => {
                    format!(
                        "{:08x}",
                        pktfs_layout::crc32c(&v.read(e.ino, 0, a.size).unwrap())
                    )
                }
                FileType::Symlink => String::from_utf8_lossy(&v.readlink(e.ino).unwrap()).into(),
                _ => String::new(),
            };
            let link = seen_ino.get(&e.ino).cloned().unwrap_or_default();
            seen_ino.entry(e.ino).or_insert(p.clone());
            out.push((
                p.clone(),
                format!(
                    "{:?} {:o} {}:{} n{} s{} rdev{} a{} m{} {x:?} {content} link={link}",
                    a.kind, a.perm, a.uid, a.gid, a.nlink, a.size, a.rdev, a.atime_ns, a.mtime_ns
                ),
            ));
            if a.kind == FileType::Directory {
                stack.push((e.ino, p));
            }
        }
    }
    out.sort();
    out
}

/// What a restore must keep of each record: file offset, length, CRC,
/// sequence number, timestamp, where its bytes are, and whether they came
/// from the network path.
type RecordKey = (u64, u32, u32, u64, u64, Option<(u64, u64)>, bool, bool);

fn key(c: &pktfs_fs::ChainEntry) -> RecordKey {
    (
        c.file_off,
        c.len,
        c.payload_crc,
        c.seq,
        c.timestamp_ns,
        c.remote,
        c.from_network,
        c.kernel_time,
    )
}

/// A file `name` in the root written through the receive path, as
/// netpath does (its records carry FLAG_RX, FLAG_KERNEL_TIME and the
/// kernel's receive time), so a round trip must keep both flags.
fn received(v: &Volume, name: &[u8], body: &[u8]) -> u64 {
    let t = v.create_tmpfile(0o644, 0, 0).unwrap().ino;
    let mut buf = v.rx_reserve(body.len() as u32).unwrap();
    buf.append(body);
    let p = v.rx_piece(
        &buf,
        0,
        body.len() as u32,
        pktfs_fs::RxTime::Kernel(1_234_567),
        0,
    );
    v.rx_release(buf);
    v.rx_commit(t, vec![p]).unwrap();
    v.link_tmpfile(t, v.root(), name, false).unwrap();
    v.unpin(t, 1);
    t
}

#[test]
fn capture_and_restore_a_whole_tree() {
    let v = fresh(64 << 20);
    let mem = Arc::new(Mem::default());
    v.set_remote_source(mem.clone());
    let r = v.root();
    let d = v.mkdir(r, b"dir", 0o750, 10, 20).unwrap().ino;
    let dd = v.mkdir(d, b"deeper", 0o755, 0, 0).unwrap().ino;
    let f = v.create(d, b"multi", 0o640, 10, 20).unwrap().ino;
    for k in 0..5u64 {
        v.write(f, k * 300_000, &vec![k as u8 + 1; 300_000])
            .unwrap();
    }
    let sparse = v.create(dd, b"sparse", 0o600, 0, 0).unwrap().ino;
    v.write(sparse, 5_000_000, b"end").unwrap();
    v.setattr(
        sparse,
        &SetAttr {
            size: Some(6_000_000),
            ..Default::default()
        },
    )
    .unwrap();
    v.create(r, b"empty", 0o644, 0, 0).unwrap();
    v.link(f, r, b"hardlink").unwrap();
    v.symlink(r, b"sym", b"dir/multi", 0, 0).unwrap();
    v.mknod(r, b"fifo", FileType::Fifo, 0o600, 0, 0, 0).unwrap();
    v.setxattr(f, b"user.note", b"a value", XattrFlags::default())
        .unwrap();
    // A file whose records came from the network path (FLAG_RX): they
    // must come back saying so.
    let rx = received(&v, b"received", &[9u8; 3000]);
    // A default ACL (user::rwx, group::r-x, other::---).
    let acl: Vec<u8> = [
        2u32.to_le_bytes().to_vec(),
        [1u16.to_le_bytes(), 7u16.to_le_bytes()].concat(),
        u32::MAX.to_le_bytes().to_vec(),
        [4u16.to_le_bytes(), 5u16.to_le_bytes()].concat(),
        u32::MAX.to_le_bytes().to_vec(),
        [0x20u16.to_le_bytes(), 0u16.to_le_bytes()].concat(),
        u32::MAX.to_le_bytes().to_vec(),
    ]
    .concat();
    v.setxattr(d, b"system.posix_acl_default", &acl, XattrFlags::default())
        .unwrap();
    v.setattr(
        d,
        &SetAttr {
            atime: Some(TimeSet::Ns(1_000_000_007)),
            mtime: Some(TimeSet::Ns(2_000_000_009)),
            ..Default::default()
        },
    )
    .unwrap();
    let mut next = 1;
    tier_all(&v, &mem, &mut next);
    // One file keeps bytes in PM: not restorable.
    let partial = v.create(r, b"partial", 0o644, 0, 0).unwrap().ino;
    v.write(partial, 0, b"only in PM").unwrap();
    let snap = capture(&v, 7).unwrap();
    assert_eq!(snap.partial_files, 1);
    assert_eq!(
        referenced_objects(&snap.bytes).unwrap(),
        snap.referenced_objects
    );
    let parsed = parse(&snap.bytes).unwrap();
    assert_eq!(parsed.seq, 7);
    let v2 = fresh(64 << 20);
    v2.set_remote_source(mem.clone());
    let rep = restore_into(&v2, &parsed).unwrap();
    assert_eq!(rep.skipped_partial, vec![("/partial".to_string(), 10)]);
    assert_eq!(rep.hard_links, 1);
    let want: Vec<_> = tree(&v)
        .into_iter()
        .filter(|(p, _)| p != "/partial")
        .collect();
    assert_eq!(tree(&v2), want);
    // The records came back field for field.
    let a = v.chain(f).unwrap();
    let ino2 = v2
        .lookup(v2.lookup(v2.root(), b"dir").unwrap().ino, b"multi")
        .unwrap()
        .ino;
    let b = v2.chain(ino2).unwrap();
    assert_eq!(
        a.iter().map(key).collect::<Vec<_>>(),
        b.iter().map(key).collect::<Vec<_>>()
    );
    let a = v.chain(rx).unwrap();
    assert!(a.iter().all(|c| c.from_network && c.remote.is_some()));
    let b = v2
        .chain(v2.lookup(v2.root(), b"received").unwrap().ino)
        .unwrap();
    assert_eq!(
        a.iter().map(key).collect::<Vec<_>>(),
        b.iter().map(key).collect::<Vec<_>>()
    );
    v2.check_invariants().unwrap();
    // The same after a remount of the restored image.
    let mut v2 = v2;
    let img = v2.snapshot();
    drop(v2);
    let v3 = Volume::open_pm(Pm::from_bytes(img), false).unwrap();
    v3.set_remote_source(mem.clone());
    v3.check_invariants().unwrap();
    assert_eq!(tree(&v3), want);
}

#[test]
fn a_damaged_or_truncated_snapshot_is_refused() {
    let v = fresh(16 << 20);
    let mem = Arc::new(Mem::default());
    v.set_remote_source(mem.clone());
    let f = v.create(v.root(), b"a", 0o644, 0, 0).unwrap().ino;
    v.write(f, 0, b"hello").unwrap();
    v.setxattr(f, b"user.x", b"y", XattrFlags::default())
        .unwrap();
    v.mkdir(v.root(), b"d", 0o755, 0, 0).unwrap();
    let mut next = 1;
    tier_all(&v, &mem, &mut next);
    let snap = capture(&v, 1).unwrap();
    parse(&snap.bytes).unwrap();
    for i in 0..snap.bytes.len() {
        let mut b = snap.bytes.clone();
        b[i] ^= 0x04;
        assert!(parse(&b).is_err(), "a flip at byte {i} was not noticed");
    }
    for n in 0..snap.bytes.len() {
        assert!(
            parse(&snap.bytes[..n]).is_err(),
            "truncated to {n} accepted"
        );
    }
    let mut longer = snap.bytes.clone();
    longer.push(0);
    assert!(parse(&longer).is_err());
    assert!(parse(b"").is_err());
}

#[test]
fn a_hundred_thousand_files_capture_and_parse() {
    let v = fresh_with(GeometryParams {
        inode_count: Some(110_000),
        ..GeometryParams::for_size(512 << 20)
    });
    let mem = Arc::new(Mem::default());
    v.set_remote_source(mem.clone());
    let d = v.mkdir(v.root(), b"many", 0o755, 0, 0).unwrap().ino;
    for k in 0..100_000u32 {
        let f = v
            .create(d, format!("f{k:06}").as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        v.write(f, 0, &k.to_le_bytes()).unwrap();
    }
    let mut next = 1;
    let t = std::time::Instant::now();
    tier_all(&v, &mem, &mut next);
    println!("tier-out of 100,000 files (in memory): {:?}", t.elapsed());
    let t = std::time::Instant::now();
    let snap = capture(&v, 1).unwrap();
    let cap = t.elapsed();
    let t = std::time::Instant::now();
    let p = parse(&snap.bytes).unwrap();
    println!(
        "100,000 files: capture {cap:?}, parse {:?}, {} bytes ({} per file)",
        t.elapsed(),
        snap.bytes.len(),
        snap.bytes.len() / 100_000
    );
    assert_eq!(p.names.len(), 100_001); // and the directory's own name
    assert_eq!(snap.complete_files, 100_000);
}

/// A snapshot written before extents had flags (version 1: 48-byte
/// extents) still parses and restores: the same tree, its records written
/// as local ones.
#[test]
fn a_version_1_snapshot_still_restores() {
    let v = fresh(16 << 20);
    let mem = Arc::new(Mem::default());
    v.set_remote_source(mem.clone());
    let f = v.create(v.root(), b"local", 0o644, 0, 0).unwrap().ino;
    v.write(f, 0, &[3u8; 5000]).unwrap();
    let rx = received(&v, b"received", &[4u8; 2000]);
    let mut next = 1;
    tier_all(&v, &mem, &mut next);
    let snap = capture(&v, 3).unwrap();
    let v1 = as_version_1(&snap.bytes);
    assert!(v1.len() < snap.bytes.len(), "no extent was shortened");
    let parsed = parse(&v1).unwrap();
    assert!(parsed
        .inodes
        .iter()
        .flat_map(|i| &i.extents)
        .all(|e| !e.from_network));
    let v2 = fresh(16 << 20);
    v2.set_remote_source(mem.clone());
    restore_into(&v2, &parsed).unwrap();
    assert_eq!(tree(&v2), tree(&v));
    // Field for field but the provenance version 1 did not keep.
    let unflagged = |c: &pktfs_fs::ChainEntry| {
        let mut k = key(c);
        (k.6, k.7) = (false, false);
        k
    };
    let a = v.chain(rx).unwrap();
    let b = v2
        .chain(v2.lookup(v2.root(), b"received").unwrap().ino)
        .unwrap();
    assert!(b.iter().all(|c| !c.from_network && !c.kernel_time));
    assert_eq!(
        a.iter().map(unflagged).collect::<Vec<_>>(),
        b.iter().map(unflagged).collect::<Vec<_>>()
    );
    v2.check_invariants().unwrap();
}

/// Flags or reserved bytes a reader does not know are refused, not
/// dropped: a newer writer's meaning would otherwise be lost silently.
#[test]
fn unknown_extent_flags_are_refused() {
    let v = fresh(16 << 20);
    let mem = Arc::new(Mem::default());
    v.set_remote_source(mem.clone());
    received(&v, b"r", &[5u8; 100]);
    let mut next = 1;
    tier_all(&v, &mem, &mut next);
    let snap = capture(&v, 1).unwrap();
    for (at, value) in [(48usize, 0x04u8), (49, 0x01), (55, 0x80)] {
        let bad = rewrite_extents(&snap.bytes, true, |e| {
            let mut e = e.to_vec();
            e[at] |= value;
            e
        });
        let err = parse(&bad).unwrap_err().to_string();
        assert!(err.contains("does not know"), "byte {at}: {err}");
    }
}

/// The same snapshot in format version 1.
fn as_version_1(b: &[u8]) -> Vec<u8> {
    rewrite_extents(b, false, |e| e[..48].to_vec())
}

/// Re-encode a version 2 snapshot with every extent passed through `f`,
/// the entries' and the header's checksums made right again; the header
/// says version 2 if `keep_version`, else 1.
fn rewrite_extents(b: &[u8], keep_version: bool, f: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
    use pktfs_tier::snapshot::{ExtentRaw, InodeRaw, HEADER_BYTES, SNAPSHOT_MAGIC_V1};
    use zerocopy::FromBytes;
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let objects = u32_at(b, 48) as usize;
    let entries = u32_at(b, 52);
    let list_end = HEADER_BYTES + objects * 8 + 4;
    let mut out = b[..list_end].to_vec();
    if !keep_version {
        out[..8].copy_from_slice(&SNAPSHOT_MAGIC_V1);
    }
    let crc = pktfs_layout::crc32c(&out[..60]);
    out[60..64].copy_from_slice(&crc.to_le_bytes());
    let mut at = list_end;
    for _ in 0..entries {
        let len = u32_at(b, at) as usize;
        let body = &b[at + 4..at + 4 + len];
        at += 8 + len;
        let mut new = body.to_vec();
        if body[0] == 1 {
            let raw = InodeRaw::read_from_bytes(&body[1..1 + size_of::<InodeRaw>()]).unwrap();
            let mut p = 1 + size_of::<InodeRaw>() + raw.target_len.get() as usize;
            for _ in 0..raw.xattrs.get() {
                let (n, v) = (u32_at(body, p) as usize, u32_at(body, p + 4) as usize);
                p += 8 + n + v;
            }
            new.truncate(p);
            for e in body[p..].chunks_exact(size_of::<ExtentRaw>()) {
                new.extend_from_slice(&f(e));
            }
        }
        out.extend_from_slice(&(new.len() as u32).to_le_bytes());
        out.extend_from_slice(&new);
        out.extend_from_slice(&pktfs_layout::crc32c(&new).to_le_bytes());
    }
    out
}
