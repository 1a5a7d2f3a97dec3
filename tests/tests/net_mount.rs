//! The servers inside the FUSE mount: files received over the network are
//! in the mount at once (the kernel's caches are told), and files written
//! through the mount can be fetched. Needs FUSE (`prereq::fuse`).

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::Duration;

use pktfs_fuse::{Invalidator, MountOptions};

use crate::net_common::*;
use crate::prereq;

/// How long a change may take to show in the mount: generous for a loaded
/// machine, yet far below the 60 s the kernel would otherwise cache.
const LIMIT: Duration = Duration::from_secs(10);

/// What `pktfs mount --listen` and `pktfs up` pass as the change callback.
pub fn invalidate_with(inv: Invalidator) -> pktfs_netpath::OnChange {
    Arc::new(move |c: pktfs_netpath::Change<'_>| match c {
        pktfs_netpath::Change::Entry { parent, name, .. }
        | pktfs_netpath::Change::Removed { parent, name, .. } => {
            let _ = inv.inval_entry(parent, OsStr::from_bytes(name));
            let _ = inv.inval_inode(parent);
        }
        pktfs_netpath::Change::Data { ino, .. } => {
            let _ = inv.inval_inode(ino);
        }
    })
}

#[test]
fn network_changes_show_in_the_mount_at_once() {
    require!(prereq::fuse());
    let (dir, vol) = image(64 << 20);
    let mnt = tempfile::tempdir().unwrap();
    // Long kernel cache lifetimes: without invalidation the mount would
    // keep showing stale names and sizes for a minute.
    let opts = MountOptions {
        attr_ttl: Duration::from_secs(60),
        entry_ttl: Duration::from_secs(60),
        ..MountOptions::default()
    };
    // /dev/fuse is usable, so a failing mount is a failure, not a skip.
    let h = pktfs_fuse::mount(vol.clone(), mnt.path(), &opts).expect("mount");
    let cfg = pktfs_netpath::Config {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        raw_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    };
    let svc =
        pktfs_netpath::Services::start(vol.clone(), cfg, Some(invalidate_with(h.invalidator())))
            .unwrap();
    let web = svc.http_addr().unwrap();
    let m = mnt.path();

    // A name the kernel has cached as missing appears once it is uploaded.
    assert!(std::fs::metadata(m.join("new.txt")).is_err());
    assert_eq!(http(web, "PUT", "/new.txt", &[], b"first").status, 201);
    assert_eq!(std::fs::read(m.join("new.txt")).unwrap(), b"first");
    // Replaced over the network: the mount shows the new contents.
    assert_eq!(
        http(web, "PUT", "/new.txt", &[], b"second version").status,
        204
    );
    assert_eq!(std::fs::read(m.join("new.txt")).unwrap(), b"second version");
    // In a directory the upload creates.
    assert_eq!(
        http(web, "PUT", "/d/e/f.bin", &[], &data(100_000, 1)).status,
        201
    );
    assert_eq!(
        std::fs::read(m.join("d/e/f.bin")).unwrap(),
        data(100_000, 1)
    );
    let names: Vec<_> = std::fs::read_dir(m)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        names.iter().any(|n| n == "d") && names.iter().any(|n| n == "new.txt"),
        "{names:?}"
    );
    // Deleted over the network: gone from the mount.
    assert_eq!(http(web, "DELETE", "/new.txt", &[], b"").status, 204);
    assert!(std::fs::metadata(m.join("new.txt")).is_err());
    // Written through the mount: fetched over the network.
    std::fs::write(m.join("local.txt"), b"written through FUSE").unwrap();
    assert_eq!(
        http(web, "GET", "/local.txt", &[], b"").body,
        b"written through FUSE"
    );
    // The chain of a received file through the xattr.
    let mut buf = vec![0u8; 1 << 16];
    let n = rustix::fs::getxattr(m.join("d/e/f.bin"), "user.pktfs.chain", &mut buf[..])
        .expect("a received file has the user.pktfs.chain xattr");
    let chain = String::from_utf8_lossy(&buf[..n]);
    assert!(
        chain.contains("\"crc32c\""),
        "the chain lists records: {chain}"
    );
    // A raw stream grows a file the mount sees growing. The waits below are
    // far shorter than the 60 s attribute lifetime, so a size seen changing
    // within them was told to the kernel, not timed out of its cache.
    let mut c = std::net::TcpStream::connect(svc.raw_addr().unwrap()).unwrap();
    c.write_all(&data(50_000, 2)).unwrap();
    let raw_dir = m.join("raw");
    let mut f = None;
    wait_until("the raw stream's file in the mount", LIMIT, || {
        f = std::fs::read_dir(&raw_dir)
            .ok()
            .and_then(|mut d| d.next())
            .map(|e| e.unwrap().path());
        f.is_some()
    });
    let f = f.unwrap();
    let size = || std::fs::metadata(&f).unwrap().len();
    wait_until("the first 50,000 bytes in the mount", LIMIT, || {
        size() == 50_000
    });
    c.write_all(&data(70_000, 3)).unwrap();
    // The sender stays connected and quiet: the growth is still told.
    wait_until("all 120,000 bytes in the mount", LIMIT, || {
        size() == 120_000
    });
    drop(c);

    svc.shutdown();
    h.unmount().unwrap();
    h.join().unwrap();
    drop(dir);
}
