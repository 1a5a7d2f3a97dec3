//! The S3 access key store kept in the image (`system_blob.rs`): durable,
//! and out of reach of the xattr API every client uses.

use super::tests::{fresh, ok, reopen};
use super::*;
use crate::media::Pm;

const BLOB: &[u8] = b"{\"version\":1,\"keys\":[\"a secret marker 1f3c\"]}";

#[test]
fn absent_then_set_then_replaced_then_removed() {
    let v = fresh(8 << 20);
    assert_eq!(v.s3_keys_blob().unwrap(), None);
    assert_eq!(v.s3_keys_version(), 0);
    v.set_s3_keys_blob(Some(BLOB)).unwrap();
    ok(&v);
    assert_eq!(v.s3_keys_blob().unwrap().as_deref(), Some(BLOB));
    assert_eq!(v.s3_keys_version(), 1);
    v.set_s3_keys_blob(Some(b"second")).unwrap();
    ok(&v);
    assert_eq!(v.s3_keys_blob().unwrap().as_deref(), Some(&b"second"[..]));
    assert_eq!(v.s3_keys_version(), 2);
    // The same value again changes nothing, so the version stays.
    v.set_s3_keys_blob(Some(b"second")).unwrap();
    assert_eq!(v.s3_keys_version(), 2);
    v.set_s3_keys_blob(None).unwrap();
    ok(&v);
    assert_eq!(v.s3_keys_blob().unwrap(), None);
    assert_eq!(v.s3_keys_version(), 3);
    // Removing what is not there is no change either.
    v.set_s3_keys_blob(None).unwrap();
    assert_eq!(v.s3_keys_version(), 3);
}

#[test]
fn the_blob_survives_reopen_and_replacing_frees_the_old_record() {
    let v = fresh(8 << 20);
    let free0 = v.statfs();
    v.set_s3_keys_blob(Some(BLOB)).unwrap();
    for k in 0..50u32 {
        v.set_s3_keys_blob(Some(format!("value {k}").as_bytes()))
            .unwrap();
    }
    v.set_s3_keys_blob(Some(BLOB)).unwrap();
    let v = reopen(v);
    ok(&v);
    assert_eq!(v.s3_keys_blob().unwrap().as_deref(), Some(BLOB));
    v.set_s3_keys_blob(None).unwrap();
    let v = reopen(v);
    assert_eq!(v.s3_keys_blob().unwrap(), None);
    let free1 = v.statfs();
    assert_eq!(free0.records_free, free1.records_free, "records leaked");
    assert_eq!(free0.blocks_free, free1.blocks_free, "buffer space leaked");
}

#[test]
fn no_xattr_call_reaches_it_even_on_the_root() {
    let v = fresh(8 << 20);
    let r = v.root();
    v.setxattr(r, b"user.mine", b"v", XattrFlags::default())
        .unwrap();
    let ctime = v.getattr(r).unwrap().ctime_ns;
    v.set_s3_keys_blob(Some(BLOB)).unwrap();
    // Invisible: not listed, not readable, not removable, as if absent.
    assert_eq!(v.listxattr(r).unwrap(), vec![b"user.mine".to_vec()]);
    for name in [S3_KEYS_XATTR, b"pktfs.other", b"pktfs."] {
        assert!(matches!(v.getxattr(r, name), Err(FsError::NoXattr)));
        assert!(matches!(v.removexattr(r, name), Err(FsError::NoXattr)));
        // Not settable, whatever the flags, nor by a restore.
        for flags in [
            XattrFlags::default(),
            XattrFlags {
                create: true,
                replace: false,
            },
            XattrFlags {
                create: false,
                replace: true,
            },
        ] {
            let e = v.setxattr(r, name, b"x", flags).unwrap_err();
            assert!(matches!(e, FsError::NotSupported(_)), "{e}");
        }
        let e = v.restore_xattr(r, name, b"x").unwrap_err();
        assert!(matches!(e, FsError::NotSupported(_)), "{e}");
    }
    assert_eq!(v.s3_keys_blob().unwrap().as_deref(), Some(BLOB));
    // Clients see no change to the root for it.
    assert_eq!(v.getattr(r).unwrap().ctime_ns, ctime);
    // The client's own attribute works beside it.
    v.removexattr(r, b"user.mine").unwrap();
    assert!(v.listxattr(r).unwrap().is_empty());
    assert_eq!(v.s3_keys_blob().unwrap().as_deref(), Some(BLOB));
    ok(&v);
}

#[test]
fn update_sees_the_stored_blob_and_an_error_changes_nothing() {
    let v = fresh(8 << 20);
    v.update_s3_keys_blob(|now| {
        assert_eq!(now, None);
        Ok::<_, FsError>(Some(b"one".to_vec()))
    })
    .unwrap();
    let e = v
        .update_s3_keys_blob(|now| {
            assert_eq!(now, Some(&b"one"[..]));
            Err::<Option<Vec<u8>>, _>(FsError::Invalid("refused by the caller"))
        })
        .unwrap_err();
    assert!(matches!(e, FsError::Invalid(_)));
    assert_eq!(v.s3_keys_blob().unwrap().as_deref(), Some(&b"one"[..]));
    assert_eq!(v.s3_keys_version(), 1);
}

#[test]
fn concurrent_updates_all_land() {
    let v = std::sync::Arc::new(fresh(8 << 20));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let v = v.clone();
            std::thread::spawn(move || {
                for k in 0..25 {
                    v.update_s3_keys_blob(|now| {
                        let mut b = now.map(<[u8]>::to_vec).unwrap_or_default();
                        b.extend_from_slice(format!("{t}.{k};").as_bytes());
                        Ok::<_, FsError>(Some(b))
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let b = v.s3_keys_blob().unwrap().unwrap();
    let parts = String::from_utf8(b).unwrap();
    assert_eq!(parts.split_terminator(';').count(), 100, "{parts}");
    assert_eq!(v.s3_keys_version(), 100);
    ok(&v);
}

#[test]
fn the_size_bound_and_read_only_are_refused() {
    let v = fresh(8 << 20);
    let e = v
        .set_s3_keys_blob(Some(&vec![b'x'; MAX_XATTR_VALUE + 1]))
        .unwrap_err();
    assert!(matches!(e, FsError::TooBig), "{e}");
    v.set_s3_keys_blob(Some(&vec![b'x'; MAX_XATTR_VALUE]))
        .unwrap();
    v.set_s3_keys_blob(Some(BLOB)).unwrap();
    let img = v.pm.slice(0, v.pm.len() as usize).to_vec();
    drop(v);
    let ro = Volume::open_pm(Pm::from_bytes(img), true).unwrap();
    assert_eq!(ro.s3_keys_blob().unwrap().as_deref(), Some(BLOB));
    assert!(matches!(ro.set_s3_keys_blob(None), Err(FsError::ReadOnly)));
}

#[test]
fn a_damaged_blob_is_an_error_whatever_the_verify_mode() {
    let mut v = fresh(8 << 20);
    v.set_s3_keys_blob(Some(BLOB)).unwrap();
    v.set_verify_mode(VerifyMode::Off);
    // Damage that appears while the image is open (opening an image
    // checks every xattr's checksum and refuses a damaged one: fsck).
    let img = v.pm.slice(0, v.pm.len() as usize).to_vec();
    let at = img
        .windows(BLOB.len())
        .position(|w| w == BLOB)
        .expect("the blob is in the image") as u64;
    let mut flipped = img[at as usize + 20];
    flipped ^= 0x01;
    v.pm_exclusive().write(at + 20, &[flipped]);
    let e = v.s3_keys_blob().unwrap_err();
    assert!(matches!(e, FsError::Damaged { .. }), "{e}");
    let e = v
        .update_s3_keys_blob(|_| Ok::<_, FsError>(None))
        .unwrap_err();
    assert!(matches!(e, FsError::Damaged { .. }), "{e}");
    // It can still be replaced (`pktfs keys rm --all` starts a new store).
    v.set_s3_keys_blob(Some(b"new")).unwrap();
    assert_eq!(v.s3_keys_blob().unwrap().as_deref(), Some(&b"new"[..]));
    // An image damaged at rest is refused at open, as any damaged xattr.
    let mut img = img;
    img[at as usize + 20] ^= 0x01;
    let e = Volume::open_pm(Pm::from_bytes(img), false).unwrap_err();
    assert!(e.to_string().contains("xattr"), "{e}");
}

#[test]
fn a_directory_born_with_its_owner_keeps_it_hidden_and_across_reopen() {
    let v = fresh(8 << 20);
    let root = v.root();
    let before = v.statfs();
    let d = v
        .mkdir_with_system_xattr(
            root,
            b"logs",
            0o755,
            0,
            0,
            S3_OWNER_XATTR,
            b"PKOWNER0000000000001",
        )
        .unwrap();
    ok(&v);
    assert_eq!(
        v.system_xattr(d.ino, S3_OWNER_XATTR).unwrap().as_deref(),
        Some(&b"PKOWNER0000000000001"[..])
    );
    // Out of every client's reach, as the key store is.
    assert!(v.listxattr(d.ino).unwrap().is_empty());
    assert!(v.getxattr(d.ino, S3_OWNER_XATTR).is_err());
    assert!(v
        .setxattr(d.ino, S3_OWNER_XATTR, b"PKTHIEF", XattrFlags::default())
        .is_err());
    assert!(v.removexattr(d.ino, S3_OWNER_XATTR).is_err());
    // Changed and removed here, and a name outside the namespace refused.
    v.set_system_xattr(d.ino, S3_OWNER_XATTR, Some(b"PKOTHER"))
        .unwrap();
    let v = reopen(v);
    ok(&v);
    let d = v.lookup(v.root(), b"logs").unwrap();
    assert_eq!(
        v.system_xattr(d.ino, S3_OWNER_XATTR).unwrap().as_deref(),
        Some(&b"PKOTHER"[..])
    );
    assert!(v.system_xattr(d.ino, b"user.x").is_err());
    assert!(v.set_system_xattr(d.ino, b"user.x", Some(b"1")).is_err());
    assert!(v
        .set_system_xattr(d.ino, S3_KEYS_XATTR, Some(b"1"))
        .is_err());
    assert!(matches!(
        v.set_system_xattr(
            d.ino,
            S3_OWNER_XATTR,
            Some(&[b'x'; MAX_SYSTEM_XATTR_BYTES + 1])
        ),
        Err(FsError::TooBig)
    ));
    // rmdir gives everything back.
    v.rmdir(v.root(), b"logs").unwrap();
    let v = reopen(v);
    ok(&v);
    let after = v.statfs();
    assert_eq!(before.records_free, after.records_free, "records leaked");
    assert_eq!(before.blocks_free, after.blocks_free, "buffer space leaked");
    // An existing name is refused and nothing is left behind.
    v.mkdir(v.root(), b"taken", 0o755, 0, 0).unwrap();
    let mid = v.statfs();
    assert!(v
        .mkdir_with_system_xattr(v.root(), b"taken", 0o755, 0, 0, S3_OWNER_XATTR, b"PK1")
        .is_err());
    assert_eq!(mid.records_free, v.statfs().records_free);
}
