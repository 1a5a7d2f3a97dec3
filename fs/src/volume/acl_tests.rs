//! ACLs through the Volume's own API: an access ACL and the mode kept in
//! step, default ACLs inherited by new inodes, malformed ACLs refused, all
//! checked against the media (`check_invariants`) and across a reopen.

use super::tests::{fresh, ok, reopen};
use super::*;

const ACCESS: &[u8] = ACL_ACCESS_XATTR.as_bytes();
const DEFAULT: &[u8] = ACL_DEFAULT_XATTR.as_bytes();

const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
const NONE: u32 = u32::MAX;

fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for &(t, p, id) in entries {
        v.extend_from_slice(&t.to_le_bytes());
        v.extend_from_slice(&p.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

fn entries(v: &[u8]) -> Vec<(u16, u16, u32)> {
    Acl::parse(v)
        .unwrap()
        .unwrap()
        .entries()
        .iter()
        .map(|e| (e.tag, e.perm, e.id))
        .collect()
}

#[test]
fn access_acl_sets_the_mode_and_chmod_reads_back() {
    let v = fresh(8 << 20);
    let f = v.create(v.root(), b"f", 0o4600, 0, 0).unwrap().ino;
    // user:1001:rw-, group::r--, mask::rw-: the mode's group bits are the mask.
    let a = acl(&[
        (USER_OBJ, 6, NONE),
        (USER, 6, 1001),
        (GROUP_OBJ, 4, NONE),
        (MASK, 6, NONE),
        (OTHER, 0, NONE),
    ]);
    v.setxattr(f, ACCESS, &a, XattrFlags::default()).unwrap();
    ok(&v);
    assert_eq!(
        v.getattr(f).unwrap().perm,
        0o4660,
        "setuid kept, rwx from the ACL"
    );
    assert_eq!(v.getxattr(f, ACCESS).unwrap(), a);
    // chmod: the mask and the owner/other entries follow the mode; the
    // owning group's entry and the named entry stay.
    let s = SetAttr {
        mode: Some(0o750),
        ..SetAttr::default()
    };
    v.setattr(f, &s).unwrap();
    let got = entries(&v.getxattr(f, ACCESS).unwrap());
    assert_eq!(
        got,
        [
            (USER_OBJ, 7, NONE),
            (USER, 6, 1001),
            (GROUP_OBJ, 4, NONE),
            (MASK, 5, NONE),
            (OTHER, 0, NONE)
        ]
    );
    let v = reopen(v);
    ok(&v);
    assert_eq!(v.getattr(f).unwrap().perm, 0o750);
    assert_eq!(entries(&v.getxattr(f, ACCESS).unwrap()), got);
}

#[test]
fn an_acl_the_mode_says_is_not_stored() {
    let v = fresh(8 << 20);
    let f = v.create(v.root(), b"f", 0o600, 0, 0).unwrap().ino;
    // What `cp -p` sets after creating with 0600: the source's 0644.
    let a = acl(&[(USER_OBJ, 6, NONE), (GROUP_OBJ, 4, NONE), (OTHER, 4, NONE)]);
    v.setxattr(f, ACCESS, &a, XattrFlags::default()).unwrap();
    assert_eq!(v.getattr(f).unwrap().perm, 0o644);
    assert!(matches!(v.getxattr(f, ACCESS), Err(FsError::NoXattr)));
    assert!(v.listxattr(f).unwrap().is_empty());
    // Replacing an extended ACL by a plain one removes the stored one.
    let ext = acl(&[
        (USER_OBJ, 6, NONE),
        (GROUP, 4, 7),
        (GROUP_OBJ, 4, NONE),
        (MASK, 4, NONE),
        (OTHER, 0, NONE),
    ]);
    v.setxattr(f, ACCESS, &ext, XattrFlags::default()).unwrap();
    assert_eq!(v.listxattr(f).unwrap(), [ACCESS.to_vec()]);
    assert_eq!(v.getattr(f).unwrap().perm, 0o640);
    v.setxattr(f, ACCESS, &a, XattrFlags::default()).unwrap();
    assert!(v.listxattr(f).unwrap().is_empty());
    assert_eq!(v.getattr(f).unwrap().perm, 0o644);
    // A header alone means "no ACL".
    v.setxattr(f, ACCESS, &acl(&[]), XattrFlags::default())
        .unwrap();
    // Removing an ACL that is not stored succeeds (ext4, tmpfs); a plain
    // attribute that is not there is still ENODATA.
    v.removexattr(f, ACCESS).unwrap();
    assert!(matches!(
        v.removexattr(f, b"user.none"),
        Err(FsError::NoXattr)
    ));
    ok(&v);
}

#[test]
fn malformed_acls_are_einval_and_change_nothing() {
    let v = fresh(8 << 20);
    let d = v.mkdir(v.root(), b"d", 0o755, 0, 0).unwrap().ino;
    let f = v.create(d, b"f", 0o640, 0, 0).unwrap().ino;
    let mut bad = vec![
        vec![],
        vec![2, 0, 0, 0, 1],
        acl(&[(USER_OBJ, 6, NONE), (OTHER, 4, NONE)]),
        acl(&[
            (USER_OBJ, 6, NONE),
            (USER, 6, 3),
            (GROUP_OBJ, 4, NONE),
            (OTHER, 4, NONE),
        ]),
        acl(&[(USER_OBJ, 9, NONE), (GROUP_OBJ, 4, NONE), (OTHER, 4, NONE)]),
        acl(&[(0x80, 6, NONE), (GROUP_OBJ, 4, NONE), (OTHER, 4, NONE)]),
    ];
    let mut v1 = acl(&[(USER_OBJ, 6, NONE), (GROUP_OBJ, 4, NONE), (OTHER, 4, NONE)]);
    v1[0] = 1;
    bad.push(v1);
    // Every prefix of a good ACL that is not whole entries.
    let good = acl(&[(USER_OBJ, 6, NONE), (GROUP_OBJ, 4, NONE), (OTHER, 4, NONE)]);
    for n in 0..good.len() {
        if n < 4 || !(n - 4).is_multiple_of(8) {
            bad.push(good[..n].to_vec());
        }
    }
    for b in &bad {
        for (ino, name) in [(f, ACCESS), (d, DEFAULT)] {
            let r = v.setxattr(ino, name, b, XattrFlags::default());
            assert!(matches!(r, Err(FsError::Invalid(_))), "{b:?}: {r:?}");
            assert_eq!(r.unwrap_err().errno(), libc::EINVAL);
        }
    }
    assert_eq!(v.getattr(f).unwrap().perm, 0o640);
    assert!(v.listxattr(f).unwrap().is_empty());
    assert!(v.listxattr(d).unwrap().is_empty());
    // A default ACL is for directories only.
    assert!(matches!(
        v.setxattr(f, DEFAULT, &good, XattrFlags::default()),
        Err(FsError::NotPermitted(_))
    ));
    ok(&v);
}

#[test]
fn default_acl_is_inherited_and_replaces_the_umask() {
    let v = fresh(8 << 20);
    let d = v.mkdir(v.root(), b"d", 0o755, 0, 0).unwrap().ino;
    let m = |perm| NewMode {
        perm,
        umask: 0o022,
        uid: 5,
        gid: 6,
    };
    // No default ACL: the umask applies.
    let plain = v
        .create_node(d, b"plain", FileType::Regular, m(0o666), 0)
        .unwrap();
    assert_eq!(plain.perm, 0o644);
    let def = acl(&[
        (USER_OBJ, 7, NONE),
        (USER, 7, 1001),
        (GROUP_OBJ, 5, NONE),
        (MASK, 7, NONE),
        (OTHER, 0, NONE),
    ]);
    v.setxattr(d, DEFAULT, &def, XattrFlags::default()).unwrap();
    let f = v
        .create_node(d, b"f", FileType::Regular, m(0o666), 0)
        .unwrap();
    // Not 0644: the default ACL replaces the umask; the mask is rw-.
    assert_eq!(f.perm, 0o660);
    assert_eq!(
        entries(&v.getxattr(f.ino, ACCESS).unwrap()),
        [
            (USER_OBJ, 6, NONE),
            (USER, 7, 1001),
            (GROUP_OBJ, 5, NONE),
            (MASK, 6, NONE),
            (OTHER, 0, NONE)
        ]
    );
    assert!(matches!(v.getxattr(f.ino, DEFAULT), Err(FsError::NoXattr)));
    let sub = v
        .create_node(d, b"sub", FileType::Directory, m(0o2777), 0)
        .unwrap();
    assert_eq!(sub.perm, 0o2770);
    assert_eq!(v.getxattr(sub.ino, DEFAULT).unwrap(), def);
    // ... and passes it on.
    let deeper = v
        .create_node(sub.ino, b"deeper", FileType::Fifo, m(0o644), 0)
        .unwrap();
    assert_eq!(deeper.perm, 0o640);
    let link = v.symlink(d, b"l", b"f", 5, 6).unwrap();
    assert_eq!(link.perm, 0o777);
    assert!(v.listxattr(link.ino).unwrap().is_empty());
    ok(&v);
    let v = reopen(v);
    ok(&v);
    assert_eq!(v.getxattr(sub.ino, DEFAULT).unwrap(), def);
    assert_eq!(v.getattr(f.ino).unwrap().perm, 0o660);
    assert_eq!(
        entries(&v.getxattr(f.ino, ACCESS).unwrap())[1],
        (USER, 7, 1001)
    );
    // The inherited attributes are ordinary ones: they can be removed,
    // and the inode freed with them.
    v.removexattr(sub.ino, DEFAULT).unwrap();
    v.unlink(d, b"f").unwrap();
    ok(&v);
}

#[test]
fn an_access_acl_set_by_a_non_member_clears_setgid() {
    let v = fresh(8 << 20);
    let f = v.create(v.root(), b"f", 0o2775, 5, 100).unwrap().ino;
    let a = acl(&[
        (USER_OBJ, 7, NONE),
        (USER, 4, 9),
        (GROUP_OBJ, 5, NONE),
        (MASK, 5, NONE),
        (OTHER, 5, NONE),
    ]);
    v.setxattr_as(f, ACCESS, &a, XattrFlags::default(), |g| g == 100)
        .unwrap();
    assert_eq!(v.getattr(f).unwrap().perm, 0o2755, "a member keeps it");
    v.setxattr_as(f, ACCESS, &a, XattrFlags::default(), |_| false)
        .unwrap();
    assert_eq!(v.getattr(f).unwrap().perm, 0o755, "a non-member does not");
    ok(&v);
}

#[test]
fn kill_suidgid_follows_the_kernel_rule() {
    let v = fresh(8 << 20);
    let r = v.root();
    let mk = |name: &[u8], perm| v.create(r, name, perm, 0, 100).unwrap().ino;
    let cases = [
        (0o6777, true, 0o777),
        (0o6777, false, 0o777),
        (0o6767, true, 0o2767), // setgid without g+x, writer in the group: kept
        (0o6767, false, 0o767), // writer not in the group: cleared
        (0o0755, false, 0o755),
    ];
    for (k, (mode, in_group, want)) in cases.into_iter().enumerate() {
        let f = mk(format!("f{k}").as_bytes(), mode);
        let changed = v.kill_suidgid(f, |g| in_group && g == 100).unwrap();
        assert_eq!(v.getattr(f).unwrap().perm, want, "case {k}");
        assert_eq!(changed, mode != want, "case {k}");
    }
    // Directories keep theirs.
    let d = v.mkdir(r, b"d", 0o2775, 0, 0).unwrap().ino;
    assert!(!v.kill_suidgid(d, |_| false).unwrap());
    assert_eq!(v.getattr(d).unwrap().perm, 0o2775);
    ok(&v);
}

#[test]
fn unnamed_files_inherit_the_default_acl_when_linked() {
    let v = fresh(8 << 20);
    let d = v.mkdir(v.root(), b"d", 0o755, 0, 0).unwrap().ino;
    // No default ACL: the mode the server chose stays, no ACL.
    let t = v.create_tmpfile(0o644, 0, 0).unwrap().ino;
    v.link_tmpfile(t, d, b"plain", true).unwrap();
    assert_eq!(v.getattr(t).unwrap().perm, 0o644);
    assert!(matches!(v.getxattr(t, ACCESS), Err(FsError::NoXattr)));
    let def = acl(&[
        (USER_OBJ, 7, NONE),
        (USER, 7, 1001),
        (GROUP_OBJ, 5, NONE),
        (MASK, 7, NONE),
        (OTHER, 0, NONE),
    ]);
    v.setxattr(d, DEFAULT, &def, XattrFlags::default()).unwrap();
    // As a file created in `d` with 0644: the ACL masked by the mode.
    let t = v.create_tmpfile(0o644, 0, 0).unwrap().ino;
    v.link_tmpfile(t, d, b"got", true).unwrap();
    assert_eq!(v.getattr(t).unwrap().perm, 0o640);
    let want = [
        (USER_OBJ, 6, NONE),
        (USER, 7, 1001),
        (GROUP_OBJ, 5, NONE),
        (MASK, 4, NONE),
        (OTHER, 0, NONE),
    ];
    assert_eq!(entries(&v.getxattr(t, ACCESS).unwrap()), want);
    // Replacing a file inherits too; a refused link (create-only onto an
    // existing name) leaves nothing visible and nothing behind.
    let t2 = v.create_tmpfile(0o644, 0, 0).unwrap().ino;
    assert!(matches!(
        v.link_tmpfile(t2, d, b"got", false),
        Err(FsError::Exists)
    ));
    v.unpin(t2, 1);
    ok(&v);
    let v = reopen(v);
    let got = v.lookup(d, b"got").unwrap().ino;
    assert_eq!(entries(&v.getxattr(got, ACCESS).unwrap()), want);
    assert_eq!(v.getattr(got).unwrap().perm, 0o640);
    ok(&v);
}
