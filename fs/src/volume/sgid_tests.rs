//! The setgid-directory rule, applied by the Volume for every way a name
//! appears: create, mkdir, mknod, symlink, and an unnamed file linked in
//! (netpath's uploads, `pktfs recv`).

use super::tests::fresh;
use super::*;

const SGID: u32 = 0o2000;

#[test]
fn new_inodes_in_a_setgid_directory_take_its_group() {
    let v = fresh(16 << 20);
    let r = v.root();
    let d = v.mkdir(r, b"shared", 0o775, 0, 50).unwrap().ino;
    v.setattr(
        d,
        &SetAttr {
            mode: Some(0o2775),
            ..Default::default()
        },
    )
    .unwrap();
    // Created by uid 10, gid 20: the directory's group 50 instead.
    let f = v.create(d, b"f", 0o644, 10, 20).unwrap();
    assert_eq!((f.uid, f.gid, f.perm), (10, 50, 0o644));
    let sub = v.mkdir(d, b"sub", 0o755, 10, 20).unwrap();
    assert_eq!(
        (sub.gid, sub.perm),
        (50, 0o755 | SGID),
        "a subdirectory inherits setgid"
    );
    let s = v.symlink(d, b"s", b"f", 10, 20).unwrap();
    assert_eq!(s.gid, 50);
    let n = v
        .create_node_pinned(d, b"p", FileType::Fifo, NewMode::plain(0o600, 10, 20), 0)
        .unwrap();
    assert_eq!(n.gid, 50);
    v.unpin(n.ino, 1);
    // And one level down, through the inherited bit.
    let g = v.create(sub.ino, b"g", 0o600, 10, 20).unwrap();
    assert_eq!(g.gid, 50);
    // An unnamed file made elsewhere (an upload's) takes the group when
    // it is named here, and keeps its own when named in a plain directory.
    let plain = v.mkdir(r, b"plain", 0o755, 0, 0).unwrap().ino;
    for (dir, name, want) in [(d, &b"up"[..], 50), (plain, &b"up"[..], 20)] {
        let mut t = v.tmpfile(0o644, 10, 20).unwrap();
        let l = t.link(Vec::new(), dir, name, false).unwrap();
        drop(l);
        let a = v.lookup(dir, name).unwrap();
        assert_eq!(a.gid, want);
    }
    // Not a setgid directory: the creator's group.
    let h = v.create(plain, b"h", 0o644, 10, 20).unwrap();
    assert_eq!(h.gid, 20);
    v.check_invariants().unwrap();
    // As stored: the same after a reopen.
    let mut v = v;
    let img = v.snapshot();
    drop(v);
    let v = Volume::open_pm(Pm::from_bytes(img), false).unwrap();
    let up = v.lookup(d, b"up").unwrap();
    assert_eq!(up.gid, 50);
    assert_eq!(v.lookup(d, b"sub").unwrap().perm, 0o755 | SGID);
}
