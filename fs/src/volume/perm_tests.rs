//! Permission checks (perm.rs): every branch of `generic_permission` and
//! `posix_acl_permission`, first on the pure function, then through the
//! Volume (ACLs stored as xattrs, lookups as a caller, the sticky rule).
//! The same decisions are compared with the kernel's through a mount in
//! pktfs/tests/fuse_posix_acl.rs.

use super::tests::fresh;
use super::*;

const R: Access = Access::READ;
const W: Access = Access::WRITE;
const X: Access = Access::EXEC;

const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
const NONE: u32 = u32::MAX;

fn acl_bytes(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for &(t, p, id) in entries {
        v.extend_from_slice(&t.to_le_bytes());
        v.extend_from_slice(&p.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

/// The effective ACL for `mode` (mask and owner/other from the mode, as
/// the Volume reads it).
fn acl(entries: &[(u16, u16, u32)], mode: u32) -> Acl {
    Acl::parse(&acl_bytes(entries))
        .unwrap()
        .unwrap()
        .with_mode(mode)
}

/// A file of uid 100, gid 200.
fn file(mode: u32, a: Option<&Acl>, who: &Cred, want: Access) -> bool {
    let view = || match a {
        Some(a) => AclView::Acl(a.clone()),
        None => AclView::None,
    };
    permitted(FileType::Regular, mode, 100, 200, view, who, want)
}

fn dir(mode: u32, who: &Cred, want: Access) -> bool {
    permitted(
        FileType::Directory,
        mode,
        100,
        200,
        || AclView::None,
        who,
        want,
    )
}

#[test]
fn owner_gets_the_owner_bits_only() {
    let owner = Cred::new(100, 200, []);
    assert!(file(0o600, None, &owner, R | W));
    assert!(!file(0o600, None, &owner, X));
    // The owner's bits decide even when group or other would give more.
    assert!(!file(0o077, None, &owner, R));
    assert!(!file(0o477, None, &owner, W));
    assert!(file(0o700, None, &owner, R | W | X));
    // Nothing asked: granted.
    assert!(file(0o000, None, &owner, Access::from_bits(0)));
}

#[test]
fn group_by_primary_or_supplementary_group() {
    let primary = Cred::new(1, 200, []);
    let supplementary = Cred::new(1, 5, [9, 200, 7]);
    let outsider = Cred::new(1, 5, [9]);
    for who in [&primary, &supplementary] {
        assert!(file(0o640, None, who, R));
        assert!(!file(0o640, None, who, W));
        // The group bits apply even when other's would give more.
        assert!(!file(0o604, None, who, R));
    }
    assert!(!file(0o640, None, &outsider, R));
    assert!(file(0o604, None, &outsider, R));
    assert!(!file(0o604, None, &outsider, W));
    assert!(!file(0o006, None, &outsider, X));
    assert!(file(0o001, None, &outsider, X));
}

#[test]
fn root_overrides_reads_writes_and_directory_search() {
    let root = Cred::root();
    // Files: read and write whatever the mode.
    assert!(file(0o000, None, &root, R | W));
    // Execute only when some execute bit is set (anyone's).
    assert!(!file(0o666, None, &root, X));
    assert!(!file(0o666, None, &root, R | X));
    assert!(file(0o001, None, &root, X));
    assert!(file(0o010, None, &root, R | W | X));
    assert!(file(0o100, None, &root, X));
    // Directories: everything.
    assert!(dir(0o000, &root, R | W | X));
    // A non-root caller gets no override.
    let u = Cred::new(5, 5, []);
    assert!(!dir(0o000, &u, R));
    assert!(!dir(0o700, &u, X));
    assert!(dir(0o701, &u, X));
    assert!(!dir(0o705, &u, W));
}

#[test]
fn named_user_entries_are_masked() {
    let e = [
        (USER_OBJ, 6, NONE),
        (USER, 6, 7),
        (GROUP_OBJ, 0, NONE),
        (MASK, 6, NONE),
        (OTHER, 0, NONE),
    ];
    let u7 = Cred::new(7, 7, []);
    // Mask rw: user 7 reads and writes, does not execute.
    let a = acl(&e, 0o660);
    assert!(file(0o660, Some(&a), &u7, R | W));
    assert!(!file(0o660, Some(&a), &u7, X));
    // Mask r--: writing refused though the entry grants it.
    let a = acl(&e, 0o640);
    assert!(file(0o640, Some(&a), &u7, R));
    assert!(!file(0o640, Some(&a), &u7, W));
    // A named user entry wins over other, which would give more.
    let e2 = [
        (USER_OBJ, 6, NONE),
        (USER, 0, 7),
        (GROUP_OBJ, 0, NONE),
        (MASK, 4, NONE),
        (OTHER, 4, NONE),
    ];
    let a = acl(&e2, 0o644);
    assert!(!file(0o644, Some(&a), &u7, R));
    // Someone not named gets other.
    let u8_ = Cred::new(8, 8, []);
    assert!(file(0o644, Some(&a), &u8_, R));
    // The owner is never looked up in the ACL.
    let owner = Cred::new(100, 1, []);
    assert!(file(0o644, Some(&a), &owner, R | W));
}

#[test]
fn group_entries_first_grant_masked_and_matching_without_grant_denies() {
    let e = [
        (USER_OBJ, 7, NONE),
        (GROUP_OBJ, 4, NONE),
        (GROUP, 6, 300),
        (GROUP, 1, 400),
        (MASK, 7, NONE),
        (OTHER, 7, NONE),
    ];
    let mode = 0o777;
    let a = acl(&e, mode);
    // In the owning group: r from GROUP_OBJ.
    let g200 = Cred::new(1, 200, []);
    assert!(file(mode, Some(&a), &g200, R));
    // In the owning group and 300: rw through group 300 (any group that
    // grants all that is asked).
    let g200_300 = Cred::new(1, 200, [300]);
    assert!(file(mode, Some(&a), &g200_300, R | W));
    // In group 400 only: x; asking for r matches a group that does not
    // grant it: refused, although other has rwx.
    let g400 = Cred::new(1, 5, [400]);
    assert!(file(mode, Some(&a), &g400, X));
    assert!(!file(mode, Some(&a), &g400, R));
    // In none of them: other.
    let nobody = Cred::new(1, 5, [6]);
    assert!(file(mode, Some(&a), &nobody, R | W | X));
    // The mask limits the granting group: mask r-x.
    let a = acl(&e, 0o757);
    assert!(file(0o757, Some(&a), &g200_300, R));
    assert!(!file(0o757, Some(&a), &g200_300, W));
    // GROUP_OBJ grants r, but the mask (--x) denies it: refused at once.
    let a = acl(&e, 0o717);
    assert!(!file(0o717, Some(&a), &g200, R));
}

#[test]
fn acl_is_skipped_when_the_mask_is_empty() {
    // As the kernel: group bits (the mask) all clear, so the ACL is not
    // consulted and a named user falls to the mode's other bits.
    let e = [
        (USER_OBJ, 6, NONE),
        (USER, 6, 7),
        (GROUP_OBJ, 4, NONE),
        (MASK, 0, NONE),
        (OTHER, 4, NONE),
    ];
    let a = acl(&e, 0o604);
    let u7 = Cred::new(7, 7, []);
    assert!(file(0o604, Some(&a), &u7, R));
    assert!(!file(0o604, Some(&a), &u7, W));
    // And the ACL function is not even called.
    let called = std::cell::Cell::new(false);
    let view = || {
        called.set(true);
        AclView::None
    };
    permitted(FileType::Regular, 0o604, 100, 200, view, &u7, R);
    assert!(!called.get(), "no ACL read when the mask is empty");
    let owner = Cred::new(100, 200, []);
    permitted(
        FileType::Regular,
        0o664,
        100,
        200,
        || {
            called.set(true);
            AclView::None
        },
        &owner,
        R,
    );
    assert!(!called.get(), "no ACL read for the owner");
}

#[test]
fn malformed_acl_grants_nothing_but_owner_and_root_still_pass() {
    let bad = || AclView::Malformed;
    let other = Cred::new(5, 5, []);
    assert!(!permitted(
        FileType::Regular,
        0o666,
        100,
        200,
        bad,
        &other,
        R
    ));
    let owner = Cred::new(100, 5, []);
    assert!(permitted(
        FileType::Regular,
        0o666,
        100,
        200,
        bad,
        &owner,
        R
    ));
    assert!(permitted(
        FileType::Regular,
        0o666,
        100,
        200,
        bad,
        &Cred::root(),
        R
    ));
}

#[test]
fn access_letters_and_cred() {
    assert_eq!((R | W | X).letters(), "rwx");
    assert_eq!(Access::WRITE_SEARCH.letters(), "wx");
    assert_eq!(Access::from_bits(0o17).bits(), 7);
    let c = Cred::new(3, 4, [9, 1, 9]);
    assert_eq!(c.groups(), &[1, 9]);
    assert!(c.in_group(4) && c.in_group(1) && !c.in_group(3));
}

#[test]
fn volume_checks_stored_acls_and_modes() {
    let v = fresh(16 << 20);
    let r = v.root();
    let f = v.create(r, b"f", 0o640, 100, 200).unwrap().ino;
    let u7 = Cred::new(7, 7, []);
    assert!(!v.permits(f, &u7, R).unwrap());
    v.setxattr(
        f,
        ACL_ACCESS_XATTR.as_bytes(),
        &acl_bytes(&[
            (USER_OBJ, 6, NONE),
            (USER, 4, 7),
            (GROUP_OBJ, 4, NONE),
            (MASK, 4, NONE),
            (OTHER, 0, NONE),
        ]),
        XattrFlags::default(),
    )
    .unwrap();
    assert!(v.permits(f, &u7, R).unwrap());
    assert!(!v.permits(f, &u7, W).unwrap());
    assert_eq!(v.missing(f, &u7, R | W).unwrap(), W);
    // chmod g-r: the mask follows the mode; user 7 loses read.
    v.setattr(
        f,
        &SetAttr {
            mode: Some(0o600),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(!v.permits(f, &u7, R).unwrap());
    assert!(v.permits(f, &Cred::root(), R | W).unwrap());
    assert!(matches!(v.permits(999_999, &u7, R), Err(FsError::NotFound)));
}

#[test]
fn lookups_as_a_caller_need_search_on_the_directory() {
    let v = fresh(16 << 20);
    let r = v.root();
    let d = v.mkdir(r, b"d", 0o700, 100, 100).unwrap().ino;
    v.create(d, b"f", 0o644, 100, 100).unwrap();
    let u = Cred::new(5, 5, []);
    let owner = Cred::new(100, 100, []);
    assert!(matches!(
        v.lookup_kind_as(d, b"f", &u),
        Err(FsError::Access)
    ));
    // Refused whether or not the name exists.
    assert!(matches!(
        v.lookup_kind_as(d, b"absent", &u),
        Err(FsError::Access)
    ));
    assert!(matches!(v.lookup_as(d, b"f", &u), Err(FsError::Access)));
    assert_eq!(FsError::Access.errno(), libc::EACCES);
    assert_eq!(
        v.lookup_kind_as(d, b"f", &owner).unwrap().1,
        FileType::Regular
    );
    assert!(v.lookup_as(d, b"f", &owner).is_ok());
    assert!(v.lookup_as(d, b"f", &Cred::root()).is_ok());
    assert!(matches!(
        v.lookup_kind_as(d, b"absent", &owner),
        Err(FsError::NotFound)
    ));
    let f = v.lookup(d, b"f").unwrap().ino;
    assert!(matches!(
        v.lookup_kind_as(f, b"x", &owner),
        Err(FsError::NotDir)
    ));
    // x without r is enough to look up.
    v.setattr(
        d,
        &SetAttr {
            mode: Some(0o711),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(v.lookup_kind_as(d, b"f", &u).is_ok());
}

#[test]
fn changing_entries_needs_write_and_search_and_the_sticky_rule() {
    let v = fresh(16 << 20);
    let r = v.root();
    let alice = Cred::new(10, 10, []);
    let bob = Cred::new(11, 11, []);
    let owner = Cred::new(12, 12, []);
    // A read-only directory.
    let ro = v.mkdir(r, b"ro", 0o555, 12, 12).unwrap().ino;
    assert_eq!(
        v.may_change_entry(ro, b"new", &alice).unwrap(),
        Some(Denial::Missing(W))
    );
    let wo = v.mkdir(r, b"wo", 0o333, 12, 12).unwrap().ino;
    assert_eq!(v.may_change_entry(wo, b"new", &alice).unwrap(), None);
    let none = v.mkdir(r, b"none", 0o700, 12, 12).unwrap().ino;
    assert_eq!(
        v.may_change_entry(none, b"new", &alice).unwrap(),
        Some(Denial::Missing(Access::WRITE_SEARCH))
    );
    assert_eq!(v.may_change_entry(ro, b"new", &Cred::root()).unwrap(), None);
    // /tmp-like: 1777, owned by `owner`.
    let tmp = v.mkdir(r, b"tmp", 0o777, 12, 12).unwrap().ino;
    v.setattr(
        tmp,
        &SetAttr {
            mode: Some(0o1777),
            ..Default::default()
        },
    )
    .unwrap();
    v.create(tmp, b"alices", 0o666, 10, 10).unwrap();
    // Bob may create, but not remove or replace Alice's file.
    assert_eq!(v.may_change_entry(tmp, b"bobs", &bob).unwrap(), None);
    assert_eq!(
        v.may_change_entry(tmp, b"alices", &bob).unwrap(),
        Some(Denial::Sticky)
    );
    // Alice, the directory's owner and root may.
    for who in [&alice, &owner, &Cred::root()] {
        assert_eq!(v.may_change_entry(tmp, b"alices", who).unwrap(), None);
    }
    // Not sticky: anyone with w+x may.
    let open = v.mkdir(r, b"open", 0o777, 12, 12).unwrap().ino;
    v.create(open, b"alices", 0o600, 10, 10).unwrap();
    assert_eq!(v.may_change_entry(open, b"alices", &bob).unwrap(), None);
    let f = v.lookup(open, b"alices").unwrap().ino;
    assert!(matches!(
        v.may_change_entry(f, b"x", &bob),
        Err(FsError::NotDir)
    ));
}

#[test]
fn make_dirs_walks_makes_and_checks_as_the_caller() {
    let v = fresh(16 << 20);
    let r = v.root();
    let parts = |p: &'static str| p.split('/').filter(|s| !s.is_empty()).map(str::as_bytes);
    // As the owner: every missing directory made, owned as asked, each
    // one heard of once with its parent.
    let mut heard = Vec::new();
    let mut made = |p: u64, n: &[u8], i: u64| heard.push((p, n.to_vec(), i));
    let c = v
        .make_dirs(parts("/a//b/c/"), (0o750, 7, 8), None, &mut made)
        .unwrap();
    let a = v.lookup(r, b"a").unwrap();
    let b = v.lookup(a.ino, b"b").unwrap();
    assert_eq!(v.resolve_path("a/b/c").unwrap().ino, c);
    assert_eq!(
        heard,
        vec![
            (r, b"a".to_vec(), a.ino),
            (a.ino, b"b".to_vec(), b.ino),
            (b.ino, b"c".to_vec(), c)
        ]
    );
    let ca = v.getattr(c).unwrap();
    assert_eq!(
        (ca.kind, ca.perm, ca.uid, ca.gid),
        (FileType::Directory, 0o750, 7, 8)
    );
    // Again: found, nothing made; the empty path is the root.
    let mut none = |_: u64, _: &[u8], _: u64| panic!("made a directory that existed");
    assert_eq!(
        v.make_dirs(parts("a/b/c"), (0o755, 0, 0), None, &mut none)
            .unwrap(),
        c
    );
    assert_eq!(
        v.make_dirs(parts("/"), (0o755, 0, 0), None, &mut none)
            .unwrap(),
        r
    );
    // A file in the way.
    v.create(c, b"f", 0o644, 7, 8).unwrap();
    assert!(matches!(
        v.make_dirs(parts("a/b/c/f/g"), (0o755, 0, 0), None, &mut none),
        Err(FsError::NotDir)
    ));
    // As user 9 (neither owner nor in group 8): a and b opened to 0o755,
    // c left 0o750.
    let u9 = Cred::new(9, 9, []);
    for d in [a.ino, b.ino] {
        v.setattr(
            d,
            &SetAttr {
                mode: Some(0o755),
                ..Default::default()
            },
        )
        .unwrap();
    }
    // No search on c.
    assert!(matches!(
        v.make_dirs(parts("a/b/c/d"), (0o755, 9, 9), Some(&u9), &mut none),
        Err(FsError::Access)
    ));
    // Search but no write on b: x is not made.
    assert!(matches!(
        v.make_dirs(parts("a/b/x"), (0o755, 9, 9), Some(&u9), &mut none),
        Err(FsError::Access)
    ));
    assert!(matches!(v.lookup(b.ino, b"x"), Err(FsError::NotFound)));
    // c's owner has write and search on it: made, owned as asked.
    let owner = Cred::new(7, 8, []);
    let x = v
        .make_dirs(
            parts("a/b/c/x/y"),
            (0o755, 7, 8),
            Some(&owner),
            &mut |_, _, _| {},
        )
        .unwrap();
    assert_eq!(v.getattr(x).unwrap().uid, 7);
    assert_eq!(v.resolve_path("a/b/c/x/y").unwrap().ino, x);
}
