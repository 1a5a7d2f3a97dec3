//! Volume unit tests of the receive path: packet buffers filled in place
//! and linked into files (`rx_*`), unnamed files and their naming,
//! transmit holds, and links and removals made conditional on what a name
//! leads to. Each is checked against the media (`check_invariants`).

use super::tests::{fresh, ok, reopen};
use super::*;

#[test]
fn receive_into_buffers_and_publish_tmpfile_atomically() {
    use std::io::Write;
    let v = fresh(8 << 20);
    let r = v.root();
    let old = v.create(r, b"obj", 0o644, 0, 0).unwrap();
    v.write(old.ino, 0, b"old contents").unwrap();
    let t = v.create_tmpfile(0o644, 0, 0).unwrap();
    let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let body: Vec<u8> = (0..10_000u32).map(|i| (i * 13) as u8).collect();
    let mut req = b"PUT /obj HTTP/1.1\r\n\r\n".to_vec();
    let hdr = req.len() as u32;
    req.extend_from_slice(&body);
    a.write_all(&req).unwrap();
    drop(a);
    let mut got = 0u32;
    let mut pieces = Vec::new();
    let mut seq = 0u64;
    while got < req.len() as u32 {
        let mut buf = v.rx_reserve(4096).unwrap();
        let (n, _ts) = buf.recv_timestamped(&b, 0).unwrap();
        assert!(n > 0);
        // The request header that landed in the first buffer is skipped by
        // the record's offset.
        let skip = if got == 0 { hdr } else { 0 };
        if n as u32 > skip {
            pieces.push(v.rx_piece(&buf, skip, n as u32 - skip, RxTime::Kernel(42), seq));
            seq += (n as u32 - skip) as u64;
        }
        got += n as u32;
        v.rx_release(buf);
    }
    // Not visible under its name before the link.
    assert_eq!(v.read(old.ino, 0, 100).unwrap(), b"old contents");
    v.rx_commit(t.ino, pieces).unwrap();
    v.link_tmpfile(t.ino, r, b"obj", true).unwrap();
    let now = v.lookup(r, b"obj").unwrap();
    assert_eq!(now.ino, t.ino);
    assert_eq!(v.read(t.ino, 0, 1 << 20).unwrap(), body);
    assert!(v.getattr(old.ino).is_err(), "replaced file freed");
    let ch = v.chain(t.ino).unwrap();
    assert!(ch
        .iter()
        .all(|c| c.from_network && c.kernel_time && c.timestamp_ns == 42));
    ok(&v);
    // An upload abandoned half way leaves nothing behind.
    let free = v.statfs();
    let t2 = v.create_tmpfile(0o644, 0, 0).unwrap();
    let mut buf = v.rx_reserve(8192).unwrap();
    buf.append(&[1u8; 100]);
    let p = v.rx_piece(&buf, 0, 100, RxTime::Clock(1), 0);
    v.rx_release(buf);
    v.rx_commit(t2.ino, vec![p]).unwrap();
    v.unpin(t2.ino, 1);
    assert_eq!(v.statfs().files_free, free.files_free);
    ok(&v);
    let v = reopen(v);
    ok(&v);
    assert_eq!(v.read(t.ino, 0, 1 << 20).unwrap(), body);
}

#[test]
fn transmit_hold_keeps_space_until_released() {
    let v = fresh(8 << 20);
    let r = v.root();
    let f = v.create(r, b"f", 0o644, 0, 0).unwrap();
    v.write(f.ino, 0, &[7u8; 5000]).unwrap();
    v.write(f.ino, 8000, &[8u8; 100]).unwrap();
    let h = v.tx_hold(f.ino, 10, 1 << 20).unwrap();
    assert_eq!(h.size(), 8100);
    let kinds: Vec<u64> = h.segs().iter().map(TxSeg::len).collect();
    assert_eq!(kinds, vec![4990, 3000, 100]);
    let TxSeg::Image { image_off, len } = h.segs()[0] else {
        panic!()
    };
    // Delete the file while the hold is out: its bytes must stay put.
    v.unlink(r, b"f").unwrap();
    let g = v.create(r, b"g", 0o644, 0, 0).unwrap();
    v.write(g.ino, 0, &vec![9u8; 1 << 20]).unwrap();
    assert!(v
        .pm()
        .slice(image_off, len as usize)
        .iter()
        .all(|&b| b == 7));
    // The hold sends its own segments: the first one, its first 90 bytes
    // already sent; a hole stops the run.
    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    let (n, offered) = h.send(&a, 0, 90, 1024, 0).unwrap();
    assert_eq!((n, offered), (4900, 1));
    drop(a);
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut b, &mut got).unwrap();
    assert_eq!(got, vec![7u8; 4900]);
    let free = v.statfs().blocks_free;
    v.tx_release(h);
    assert!(v.statfs().blocks_free > free, "the hold's space came back");
    ok(&v);
}

/// Ownership of buffer space is a value: a reservation, the references
/// held for a persister and the pieces made from them are released by
/// whichever drops last, on any thread, exactly once.
#[test]
fn receive_references_are_released_once_whoever_drops_last() {
    let v = fresh(8 << 20);
    let before = v.statfs();
    let barrier = std::sync::Barrier::new(3);
    for round in 0..300u32 {
        let mut buf = v.rx_reserve(64 << 10).unwrap();
        buf.append(&vec![round as u8; 40_000]);
        let held = buf.hold(0, 20_000);
        let piece = buf.piece(20_000, 20_000, RxTime::Clock(1), 20_000);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                barrier.wait();
                // A persister making its piece and dropping it.
                drop(held.piece(RxTime::Clock(1), 0));
            });
            sc.spawn(|| {
                barrier.wait();
                drop(piece);
            });
            barrier.wait();
            drop(buf);
        });
    }
    let after = v.statfs();
    assert_eq!(after.blocks_free, before.blocks_free, "no reference leaked");
    ok(&v);
}

/// Received pieces of `data`, as the receive path makes them.
pub(crate) fn rx_pieces<'v>(
    v: &'v Volume,
    data: &[u8],
    piece_len: usize,
) -> Vec<crate::RxPiece<'v>> {
    let mut out = Vec::new();
    for (k, chunk) in data.chunks(piece_len).enumerate() {
        let mut buf = v.rx_reserve(chunk.len() as u32).unwrap();
        buf.append(chunk);
        out.push(v.rx_piece(&buf, 0, chunk.len() as u32, RxTime::Clock(7), k as u64));
        v.rx_release(buf);
    }
    out
}

#[test]
fn rx_link_commits_tail_and_name_together() {
    let v = fresh(8 << 20);
    let r = v.root();
    let before = v.statfs();
    // A body committed partly by rx_commit, the rest with the name.
    let body: Vec<u8> = (0..30_000u32).map(|i| (i * 7 + 1) as u8).collect();
    let t = v.create_tmpfile(0o644, 0, 0).unwrap();
    v.rx_commit(t.ino, rx_pieces(&v, &body[..10_000], 4096))
        .unwrap();
    v.rx_link(
        t.ino,
        rx_pieces(&v, &body[10_000..], 4096),
        r,
        b"obj",
        false,
    )
    .unwrap();
    let a = v.lookup(r, b"obj").unwrap();
    assert_eq!(a.ino, t.ino);
    assert_eq!(a.size, body.len() as u64);
    assert_eq!(a.nlink, 1);
    assert_eq!(v.read(t.ino, 0, 1 << 20).unwrap(), body);
    assert_eq!(v.chain(t.ino).unwrap().len(), 8);
    ok(&v);

    // Refusals drop the tail and leave the unnamed file to its owner.
    let used_after_obj = v.statfs();
    let t2 = v.create_tmpfile(0o644, 0, 0).unwrap();
    let e = v
        .rx_link(t2.ino, rx_pieces(&v, &[5u8; 9000], 4096), r, b"obj", false)
        .unwrap_err();
    assert!(matches!(e, FsError::Exists), "{e:?}");
    v.mkdir(r, b"d", 0o755, 0, 0).unwrap();
    let e = v
        .rx_link(t2.ino, rx_pieces(&v, &[5u8; 9000], 4096), r, b"d", true)
        .unwrap_err();
    assert!(matches!(e, FsError::IsDir), "{e:?}");
    let e = v
        .rx_link(t2.ino, rx_pieces(&v, &[5u8; 100], 100), t.ino, b"x", true)
        .unwrap_err();
    assert!(matches!(e, FsError::NotDir), "{e:?}");
    assert_eq!(v.getattr(t2.ino).unwrap().size, 0, "nothing committed");
    v.unpin(t2.ino, 1);
    v.rmdir(r, b"d").unwrap();
    let s = v.statfs();
    assert_eq!(s.blocks_free, used_after_obj.blocks_free, "tails freed");
    assert_eq!(s.files_free, used_after_obj.files_free);
    assert_eq!(s.records_free, used_after_obj.records_free);
    ok(&v);

    // Replacing: the old file's space comes back after the commit.
    let t3 = v.create_tmpfile(0o644, 0, 0).unwrap();
    v.rx_link(t3.ino, rx_pieces(&v, b"new", 3), r, b"obj", true)
        .unwrap();
    assert_eq!(v.read(t3.ino, 0, 100).unwrap(), b"new");
    assert!(v.getattr(t.ino).is_err(), "replaced file freed");
    ok(&v);
    let v = reopen(v);
    ok(&v);
    let a = v.lookup(r, b"obj").unwrap();
    assert_eq!(v.read(a.ino, 0, 100).unwrap(), b"new");
    v.unlink(r, b"obj").unwrap();
    let s = v.statfs();
    assert_eq!(s.blocks_free, before.blocks_free);
    assert_eq!(s.files_free, before.files_free);
}

/// rx_link to a new name when the records run out between the dirent and
/// the tail: NoSpace, and every record, buffer reference and name byte it
/// took comes back (the dirent's name payload included).
#[test]
fn rx_link_out_of_records_leaves_nothing_behind() {
    let v = fresh(8 << 20);
    let r = v.root();
    let one = v.create(r, b"one", 0o644, 0, 0).unwrap();
    v.write(one.ino, 0, b"1").unwrap();
    let big = v.create(r, b"big", 0o644, 0, 0).unwrap();
    // One record per write: 1 byte every 8 KiB, until the records run out.
    let mut k = 0u64;
    loop {
        match v.write(big.ino, k * 8192, b"x") {
            Ok(_) => k += 1,
            Err(FsError::NoSpace(_)) => break,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(v.statfs().records_free, 0, "{k} records written");
    // Unlinking `one` frees exactly its data record and its dirent.
    v.unlink(r, b"one").unwrap();
    assert_eq!(v.statfs().records_free, 2);
    let before = v.statfs();
    let t = v.create_tmpfile(0o644, 0, 0).unwrap();
    // The dirent takes one record; the three pieces need three more.
    let e = v
        .rx_link(t.ino, rx_pieces(&v, &[9u8; 3000], 1000), r, b"new", false)
        .unwrap_err();
    assert!(matches!(e, FsError::NoSpace(_)), "{e:?}");
    assert!(v.lookup(r, b"new").is_err());
    v.unpin(t.ino, 1);
    let after = v.statfs();
    assert_eq!(after.records_free, before.records_free);
    assert_eq!(after.blocks_free, before.blocks_free);
    assert_eq!(after.files_free, before.files_free);
    ok(&v);
}

/// `rx_link_deferred` replacing a file: the old file is unreachable at
/// once, its space comes back only when the `Linked` is dropped, and an
/// image taken in between (a crash before the drop) recovers with that
/// space free and nothing else lost.
#[test]
fn rx_link_deferred_frees_the_replaced_file_on_drop() {
    let v = fresh(8 << 20);
    let r = v.root();
    let start = v.statfs();
    let t1 = v.create_tmpfile(0o644, 0, 0).unwrap();
    v.rx_link(
        t1.ino,
        rx_pieces(&v, &[1u8; 20_000], 4096),
        r,
        b"obj",
        false,
    )
    .unwrap();
    let with_old = v.statfs();
    let t2 = v.create_tmpfile(0o644, 0, 0).unwrap();
    let linked = v
        .rx_link_deferred(t2.ino, rx_pieces(&v, b"new", 3), r, b"obj", true)
        .unwrap();
    assert!(linked.replaced());
    assert_eq!(v.lookup(r, b"obj").unwrap().ino, t2.ino);
    assert_eq!(v.read(t2.ino, 0, 100).unwrap(), b"new");
    // Held: the old file's inode and buffers are still taken.
    let held = v.statfs();
    assert_eq!(v.getattr(t1.ino).unwrap().nlink, 0);
    assert!(held.blocks_free < with_old.blocks_free, "new file's buffer");
    assert!(
        held.files_free < with_old.files_free,
        "old inode still held"
    );
    ok(&v);
    // A crash now: recovery finds the old file unreachable and frees it.
    let crashed = Volume::open_pm(
        Pm::from_bytes(v.pm.slice(0, v.pm.len() as usize).to_vec()),
        false,
    )
    .unwrap();
    crashed.check_invariants().unwrap();
    assert_eq!(crashed.read(t2.ino, 0, 100).unwrap(), b"new");
    assert!(
        crashed.getattr(t1.ino).is_err(),
        "old file freed by recovery"
    );
    assert_eq!(crashed.statfs().files_free, start.files_free - 1);
    drop(crashed);
    // The drop gives the space back.
    drop(linked);
    assert!(v.getattr(t1.ino).is_err(), "replaced file freed");
    let after = v.statfs();
    assert_eq!(after.files_free, start.files_free - 1);
    assert_eq!(
        after.records_free,
        start.records_free - 2,
        "one data record, one dirent"
    );
    ok(&v);
    // Replacing a file with another link frees nothing and holds nothing.
    v.link(t2.ino, r, b"alias").unwrap();
    let t3 = v.create_tmpfile(0o644, 0, 0).unwrap();
    let linked = v
        .rx_link_deferred(t3.ino, rx_pieces(&v, b"3", 1), r, b"obj", true)
        .unwrap();
    assert!(linked.replaced());
    drop(linked);
    assert_eq!(v.getattr(t2.ino).unwrap().nlink, 1);
    assert_eq!(v.read(t2.ino, 0, 100).unwrap(), b"new");
    ok(&v);
}

/// An unlinked file still held (open) is consistent: `check_invariants`
/// accepts its stale, unreachable slot, and the last unpin frees it.
#[test]
fn unlinked_but_held_file_passes_invariants() {
    let v = fresh(8 << 20);
    let r = v.root();
    let f = v.create(r, b"f", 0o644, 0, 0).unwrap();
    v.write(f.ino, 0, b"still readable").unwrap();
    v.pin(f.ino).unwrap();
    v.unlink(r, b"f").unwrap();
    ok(&v);
    assert_eq!(v.read(f.ino, 0, 100).unwrap(), b"still readable");
    v.unpin(f.ino, 1);
    assert!(v.getattr(f.ino).is_err());
    ok(&v);
}

/// An unnamed file is owned through its pin: dropped unnamed (or after a
/// failed link) it is freed; named, the pin went with the name.
#[test]
fn tmpfile_is_freed_by_drop_unless_named() {
    let v = fresh(8 << 20);
    let r = v.root();
    let free = v.statfs();
    {
        let t = v.tmpfile(0o644, 0, 0).unwrap();
        t.commit(rx_pieces(&v, &[3u8; 5000], 4096)).unwrap();
        assert!(v.statfs().files_free < free.files_free);
    }
    assert_eq!(v.statfs().files_free, free.files_free);
    assert_eq!(v.statfs().blocks_free, free.blocks_free);
    v.create(r, b"taken", 0o644, 0, 0).unwrap();
    let after_create = v.statfs();
    {
        let mut t = v.tmpfile(0o644, 0, 0).unwrap();
        let e = t.link(rx_pieces(&v, b"tail", 4), r, b"taken", false);
        assert!(matches!(e, Err(FsError::Exists)), "{e:?}");
        assert!(!t.is_linked());
    }
    assert_eq!(v.statfs().files_free, after_create.files_free);
    assert_eq!(v.statfs().blocks_free, after_create.blocks_free);
    let ino = {
        let mut t = v.tmpfile(0o644, 0, 0).unwrap();
        let l = t
            .link(rx_pieces(&v, b"named", 5), r, b"new", false)
            .unwrap();
        assert!(!l.replaced());
        t.ino()
    };
    assert_eq!(v.lookup(r, b"new").unwrap().ino, ino);
    assert_eq!(v.read(ino, 0, 100).unwrap(), b"named");
    ok(&v);
}

/// A conditional link or removal sees what the name leads to under the
/// change's own locks, and a refusal changes nothing (HTTP If-Match
/// without a window for a concurrent replacement).
#[test]
fn conditional_link_and_remove_check_under_their_locks() {
    use crate::volume::Bound;
    let v = fresh(8 << 20);
    let r = v.root();
    let seen = std::cell::RefCell::new(Vec::new());
    let refuse = |b: &Bound| {
        seen.borrow_mut().push(*b);
        false
    };
    let allow = |b: &Bound| {
        seen.borrow_mut().push(*b);
        true
    };
    // Absent: refused, nothing named, the tail's references dropped.
    let before = v.statfs();
    let mut t = v.tmpfile(0o644, 0, 0).unwrap();
    let e = t
        .link_if(
            rx_pieces(&v, &[1u8; 5000], 4096),
            r,
            b"f",
            true,
            Some(&refuse),
        )
        .unwrap_err();
    assert!(matches!(e, FsError::PreconditionFailed), "{e:?}");
    assert_eq!(seen.borrow().last(), Some(&Bound::Absent));
    assert!(matches!(v.lookup(r, b"f"), Err(FsError::NotFound)));
    assert_eq!(
        v.statfs().blocks_free,
        before.blocks_free,
        "tail given back"
    );
    // Allowed: linked with its tail, and described as linked.
    let linked = t
        .link_if(
            rx_pieces(&v, &[1u8; 5000], 4096),
            r,
            b"f",
            true,
            Some(&allow),
        )
        .unwrap();
    let first = v.lookup(r, b"f").unwrap();
    let d1 = v.content_digest(first.ino).unwrap();
    assert_eq!(linked.digest(), Some(&d1));
    assert_eq!(d1.crc32c, pktfs_layout::crc32c(&[1u8; 5000]));
    drop(linked);
    // The other link calls take no digest (a pass over the records that
    // `pktfs recv` and FUSE do not need).
    let t3 = v.create_tmpfile(0o644, 0, 0).unwrap();
    let l3 = v
        .rx_link_deferred(t3.ino, rx_pieces(&v, &[3u8; 10], 10), r, b"g", false)
        .unwrap();
    assert_eq!(l3.digest(), None);
    drop(l3);
    v.unlink(r, b"g").unwrap();
    // Present: the replaced file's digest, as content_digest gives it.
    let mut t2 = v.tmpfile(0o644, 0, 0).unwrap();
    let e = t2
        .link_if(
            rx_pieces(&v, &[2u8; 700], 700),
            r,
            b"f",
            true,
            Some(&refuse),
        )
        .unwrap_err();
    assert!(matches!(e, FsError::PreconditionFailed), "{e:?}");
    assert_eq!(
        seen.borrow().last(),
        Some(&Bound::Present {
            digest: Some(d1),
            mtime_ns: d1.mtime_ns,
            ctime_ns: v.getattr(first.ino).unwrap().ctime_ns,
        })
    );
    assert_eq!(v.lookup(r, b"f").unwrap().ino, first.ino);
    assert_eq!(v.read(first.ino, 0, 1 << 20).unwrap(), vec![1u8; 5000]);
    drop(t2);
    // Removal: refused keeps the file; an absent name asks the condition.
    let e = v.remove_if(r, b"f", Some(&refuse)).unwrap_err();
    assert!(matches!(e, FsError::PreconditionFailed), "{e:?}");
    assert_eq!(v.lookup(r, b"f").unwrap().ino, first.ino);
    assert_eq!(v.remove_if(r, b"f", Some(&allow)).unwrap(), first.ino);
    let e = v.remove_if(r, b"f", Some(&refuse)).unwrap_err();
    assert!(matches!(e, FsError::PreconditionFailed), "{e:?}");
    let e = v.remove_if(r, b"f", Some(&allow)).unwrap_err();
    assert!(matches!(e, FsError::NotFound), "{e:?}");
    // Directories: removed when empty, whichever kind the name is.
    let d = v.mkdir(r, b"d", 0o755, 0, 0).unwrap().ino;
    v.create(d, b"x", 0o644, 0, 0).unwrap();
    assert!(matches!(v.remove_if(r, b"d", None), Err(FsError::NotEmpty)));
    v.unlink(d, b"x").unwrap();
    assert_eq!(v.remove_if(r, b"d", None).unwrap(), d);
    assert!(matches!(
        v.remove_if(r, b".", None),
        Err(FsError::Invalid(_))
    ));
    assert_eq!(v.statfs().files_free, before.files_free);
    ok(&v);
    // Everything given back: what a restart finds free is what was.
    drop(t);
    let v = reopen(v);
    assert_eq!(v.statfs().blocks_free, before.blocks_free);
    ok(&v);
}

/// A piece made on one thread and committed on another: its write-back was
/// queued on the thread that made it (media/writeback.rs), so the commit
/// writes the bytes back again before its own fence. Debug builds check
/// that the bytes were durable before the publish (the tracker counts a
/// fence only for the thread's own flushes).
#[test]
fn a_piece_made_on_another_thread_is_durable_when_committed() {
    let v = fresh(8 << 20);
    let t = v.create_tmpfile(0o644, 0, 0).unwrap();
    let body: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    let pieces: Vec<RxPiece<'_>> = std::thread::scope(|s| {
        s.spawn(|| {
            let mut buf = v.rx_reserve(4096).unwrap();
            buf.append(&body);
            let p = v.rx_piece(&buf, 0, body.len() as u32, RxTime::Clock(7), 0);
            v.rx_release(buf);
            vec![p]
        })
        .join()
        .unwrap()
    });
    v.rx_commit(t.ino, pieces).unwrap();
    assert_eq!(v.read(t.ino, 0, 1 << 20).unwrap(), body);
    v.unpin(t.ino, 1);
    ok(&v);
}

/// An unnamed file made on one thread and named on another (O_TMPFILE and
/// linkat arrive on different FUSE threads): its inode was written back
/// without a fence where it was made (`create_tmpfile`), so the naming
/// commit writes it back again before its own fence. Debug builds check
/// the inode is durable before the publish that names it.
#[test]
fn an_unnamed_file_made_on_another_thread_is_durable_when_named() {
    let v = fresh(8 << 20);
    let r = v.root();
    let t = std::thread::scope(|s| {
        s.spawn(|| v.create_tmpfile(0o640, 0, 0).unwrap())
            .join()
            .unwrap()
    });
    v.link_tmpfile(t.ino, r, b"named", false).unwrap();
    assert_eq!(v.lookup(r, b"named").unwrap().ino, t.ino);
    ok(&v);
    let v = reopen(v);
    assert_eq!(v.lookup(r, b"named").unwrap().perm, 0o640);
}
