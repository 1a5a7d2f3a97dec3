//! The servers inside the FUSE mount: files received over the network are
//! in the mount at once (the kernel's caches are told), and files written
//! through the mount can be fetched. Skipped where FUSE cannot be used.

mod net_common;

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::Duration;

use net_common::*;
use pktfs::fuse::{Invalidator, MountOptions};

fn fuse_unusable() -> Option<String> {
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return Some(format!("/dev/fuse: {e}"));
    }
    if !rustix::process::geteuid().is_root() && !have("fusermount3") {
        return Some("not root and no fusermount3".into());
    }
    None
}

/// What `pktfs mount --listen` and `pktfs up` pass as the change callback.
fn invalidate_with(inv: Invalidator) -> netpath::OnChange {
    Arc::new(move |c: netpath::Change<'_>| match c {
        netpath::Change::Entry { parent, name, .. }
        | netpath::Change::Removed { parent, name, .. } => {
            let _ = inv.inval_entry(parent, OsStr::from_bytes(name));
            let _ = inv.inval_inode(parent);
        }
        netpath::Change::Data { ino, .. } => {
            let _ = inv.inval_inode(ino);
        }
    })
}

#[test]
fn network_changes_show_in_the_mount_at_once() {
    if let Some(why) = fuse_unusable() {
        eprintln!("skipped: {why}");
        return;
    }
    let (dir, vol) = image(64 << 20);
    let mnt = tempfile::tempdir().unwrap();
    // Long kernel cache lifetimes: without invalidation the mount would
    // keep showing stale names and sizes for a minute.
    let opts = MountOptions {
        attr_ttl: Duration::from_secs(60),
        entry_ttl: Duration::from_secs(60),
        ..MountOptions::default()
    };
    let h = match pktfs::fuse::mount(vol.clone(), mnt.path(), &opts) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("skipped: cannot mount here: {e}");
            return;
        }
    };
    let cfg = netpath::Config {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        raw_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    };
    let svc =
        netpath::Services::start(vol.clone(), cfg, Some(invalidate_with(h.invalidator()))).unwrap();
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
    let chain = rustix::fs::getxattr(
        m.join("d/e/f.bin"),
        "user.pktfs.chain",
        &mut vec![0u8; 1 << 16],
    );
    if let Ok(n) = chain {
        assert!(n > 0);
    }
    // A raw stream grows a file the mount sees growing.
    let mut c = std::net::TcpStream::connect(svc.raw_addr().unwrap()).unwrap();
    c.write_all(&data(50_000, 2)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let raw_dir = m.join("raw");
    let f = std::fs::read_dir(&raw_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let s1 = std::fs::metadata(&f).unwrap().len();
    c.write_all(&data(70_000, 3)).unwrap();
    // The sender stays connected and quiet: the growth is still told.
    std::thread::sleep(Duration::from_millis(400));
    let s2 = std::fs::metadata(&f).unwrap().len();
    assert_eq!((s1, s2), (50_000, 120_000));
    drop(c);

    svc.shutdown();
    h.unmount().unwrap();
    h.join().unwrap();
    drop(dir);
}
