//! The translation of [`MountOptions`] into what fuser and fusermount3
//! take; the mounts themselves are tested by pktfs-tests (`fuse_*`).

use fuser::SessionACL;

use super::*;

#[test]
fn fusermount_options_escape_and_keep_the_rules() {
    let o = MountOptions {
        fsname: Some(r"a,b\c".into()),
        read_only: true,
        allow_root: true,
        flags: vec![MountOption::NoDev, MountOption::FSName("ignored".into())],
        ..Default::default()
    };
    assert_eq!(
        o.fusermount_options("unused"),
        r"fsname=a\,b\\c,subtype=pktfs,default_permissions,ro,nodev,allow_other"
    );
    // The image's path when no fsname is given.
    let d = MountOptions::default().fusermount_options("/dev/shm/x.img");
    assert_eq!(
        d,
        "fsname=/dev/shm/x.img,subtype=pktfs,default_permissions,rw"
    );
}

#[test]
fn later_flags_win_and_the_acl_follows_allow() {
    let o = MountOptions {
        flags: vec![
            MountOption::NoExec,
            MountOption::Sync,
            MountOption::Exec,
            MountOption::Sync,
        ],
        threads: 1,
        ..Default::default()
    };
    let c = o.fuser_config("img");
    assert_eq!(
        c.mount_options,
        [
            MountOption::FSName("img".into()),
            MountOption::CUSTOM("subtype=pktfs".into()),
            MountOption::DefaultPermissions,
            MountOption::RW,
            MountOption::Exec,
            MountOption::Sync,
        ]
    );
    assert_eq!(c.acl, SessionACL::Owner);
    assert_eq!((c.n_threads, c.clone_fd), (Some(1), false));
    let root = MountOptions {
        allow_root: true,
        ..Default::default()
    };
    assert_eq!(root.fuser_config("img").acl, SessionACL::RootAndOwner);
    let other = MountOptions {
        allow_other: true,
        allow_root: true,
        ..Default::default()
    };
    assert_eq!(other.fuser_config("img").acl, SessionACL::All);
}
