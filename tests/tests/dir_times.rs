//! A directory's mtime/ctime when a file is named by `rx_link` or created:
//! carried by the new dirent (FLAG_DIR_TIME) instead of a switch of the
//! directory's attribute slot. Checked at every crash instant of the naming commit
//! (name and times appear together or not at all), across remounts, and
//! against the operations that do switch the slot afterwards.

use pktfs_fs::media::Pm;
use pktfs_fs::{SetAttr, TimeSet, Volume};
use pktfs_tests::model::crash::for_each_point;
use pktfs_tests::model::format_image;

const IMAGE: u64 = 2 << 20;

/// An unnamed file holding `data`, as the receive path makes it; returns
/// its inode and the pieces still to commit with the name.
fn upload<'v>(v: &'v Volume, data: &[u8]) -> (u64, Vec<pktfs_fs::RxPiece<'v>>) {
    let t = v.create_tmpfile(0o644, 0, 0).unwrap().ino;
    let mut buf = v.rx_reserve(data.len() as u32).unwrap();
    buf.append(data);
    let p = buf.piece(0, data.len() as u32, pktfs_fs::RxTime::Clock(5), 0);
    drop(buf);
    (t, vec![p])
}

fn times(v: &Volume, ino: u64) -> (i64, i64) {
    let a = v.getattr(ino).unwrap();
    (a.mtime_ns, a.ctime_ns)
}

#[test]
fn naming_a_file_moves_the_directory_times_atomically() {
    // A directory with one file, on a clean image.
    let mut v = Volume::open_pm(Pm::from_bytes(format_image(IMAGE, Some(64))), false).unwrap();
    let d = v.mkdir(v.root(), b"d", 0o755, 0, 0).unwrap().ino;
    let (t, tail) = upload(&v, b"first");
    v.rx_link(t, tail, d, b"a", false).unwrap();
    let base = v.snapshot();
    drop(v);

    // rx_link to a new name, rx_link replacing a file, and create.
    for case in ["new name", "replacing", "create"] {
        let v = Volume::open_pm(Pm::recording(base.clone()), false).unwrap();
        let before = times(&v, d);
        let name: &[u8] = match case {
            "new name" => b"b",
            "replacing" => b"a",
            _ => b"c",
        };
        if case == "create" {
            let f = v.create(d, name, 0o644, 0, 0).unwrap().ino;
            v.write(f, 0, b"second").unwrap();
        } else {
            let (t, tail) = upload(&v, b"second");
            v.rx_link(t, tail, d, name, true).unwrap();
        }
        let after = times(&v, d);
        assert!(after.0 > before.0 && after.1 > before.1);
        v.check_invariants().unwrap();
        let log = v.pm().crash_log().unwrap();
        drop(v);

        let (mut old, mut new) = (0, 0);
        let mut bad = Vec::new();
        for_each_point(&base, &log.events, |p| {
            let mut images = vec![p.image_with(&[])];
            if !p.inflight.is_empty() {
                images.push(p.image_with(&(0..p.inflight.len()).collect::<Vec<_>>()));
                images.push(p.torn_image());
            }
            for img in images {
                let v = match Volume::open_pm(Pm::from_bytes(img), false) {
                    Ok(v) => v,
                    Err(e) => {
                        bad.push(format!("fence {} pre {}: {e}", p.fence, p.pre));
                        continue;
                    }
                };
                // The create case's name exists from its first commit on
                // (its data comes in a second one).
                let named = v
                    .lookup(d, name)
                    .map(|a| case == "create" || v.read(a.ino, 0, 100).unwrap() == b"second")
                    .unwrap_or(false);
                let got = times(&v, d);
                match (named, got) {
                    (true, g) if g == after => new += 1,
                    (false, g) if g == before => old += 1,
                    _ => bad.push(format!(
                        "fence {} pre {}: named {named}, times {got:?} (before {before:?}, after {after:?})",
                        p.fence, p.pre
                    )),
                }
                if let Err(e) = v.check_invariants() {
                    bad.push(e);
                }
            }
            true
        });
        assert!(bad.is_empty(), "{case}: {}", bad.join("\n"));
        assert!(
            old > 0 && new > 0,
            "both outcomes seen ({old} old, {new} new)"
        );
    }
}

#[test]
fn directory_times_survive_remounts_and_later_changes() {
    let v = Volume::open_pm(Pm::from_bytes(format_image(IMAGE, Some(64))), false).unwrap();
    let d = v.mkdir(v.root(), b"d", 0o755, 0, 0).unwrap().ino;
    let (t, tail) = upload(&v, b"x");
    v.rx_link(t, tail, d, b"a", false).unwrap();
    let named = times(&v, d);
    let reopen = |mut v: Volume| {
        let img = v.snapshot();
        drop(v);
        Volume::open_pm(Pm::from_bytes(img), false).unwrap()
    };
    let v = reopen(v);
    assert_eq!(
        times(&v, d),
        named,
        "carried by the dirent across a remount"
    );
    v.check_invariants().unwrap();

    // An explicit older mtime wins over the dirent (its ctime is later).
    let old = 1_000_000_000i64;
    let set = SetAttr {
        mtime: Some(TimeSet::Ns(old)),
        ..Default::default()
    };
    v.setattr(d, &set).unwrap();
    let (m, c) = times(&v, d);
    assert_eq!(m, old);
    assert!(c > named.1);
    let v = reopen(v);
    assert_eq!(times(&v, d), (old, c), "utimensat kept after a remount");

    // A later name moves them again; a chmod (a slot switch) keeps them.
    let (t, tail) = upload(&v, b"y");
    v.rx_link(t, tail, d, b"b", false).unwrap();
    let named2 = times(&v, d);
    assert!(named2.0 > c && named2.0 == named2.1);
    let perm = SetAttr {
        mode: Some(0o700),
        ..Default::default()
    };
    v.setattr(d, &perm).unwrap();
    let after_chmod = times(&v, d);
    assert_eq!(after_chmod.0, named2.0, "chmod does not touch mtime");
    assert!(after_chmod.1 >= named2.1);
    let v = reopen(v);
    assert_eq!(times(&v, d), after_chmod);
    v.check_invariants().unwrap();

    // Unlinking the newest flagged name: the slot carries the unlink's time.
    v.unlink(d, b"b").unwrap();
    let unlinked = times(&v, d);
    assert!(unlinked.0 >= after_chmod.0);
    let v = reopen(v);
    assert_eq!(times(&v, d), unlinked);
    v.check_invariants().unwrap();
}
