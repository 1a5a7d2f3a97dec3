//! The ACE-style workload set (OSDI'18): a small seeded tree and every
//! operation, in all its forms, over it. Shared by the crash tests and by
//! the fsck fuzzer (which needs real images made by running workloads).

use std::sync::{Arc, OnceLock};

use pktfs_fs::FileType;

use super::{format_image, seed_image, Model, Op};

pub const IMAGE: u64 = 2 << 20;

fn p(s: &str) -> String {
    s.to_string()
}

/// The seeded tree every workload starts from.
pub fn seed_ops() -> Vec<Op> {
    vec![
        Op::Mkdir {
            path: p("/A"),
            perm: 0o755,
        },
        Op::Mkdir {
            path: p("/B"),
            perm: 0o755,
        },
        Op::Mkdir {
            path: p("/C"),
            perm: 0o755,
        },
        Op::Mkdir {
            path: p("/C/D"),
            perm: 0o755,
        },
        Op::Mkdir {
            path: p("/E"),
            perm: 0o755,
        },
        Op::Create {
            path: p("/A/foo"),
            perm: 0o644,
        },
        Op::Write {
            path: p("/A/foo"),
            off: 0,
            len: 6000,
            seed: 1,
        },
        Op::Create {
            path: p("/A/bar"),
            perm: 0o644,
        },
        Op::Write {
            path: p("/A/bar"),
            off: 0,
            len: 100,
            seed: 2,
        },
        Op::SetXattr {
            path: p("/A/bar"),
            name: p("user.x"),
            len: 10,
            seed: 3,
            create: true,
            replace: false,
        },
        Op::Create {
            path: p("/B/baz"),
            perm: 0o640,
        },
        Op::Write {
            path: p("/B/baz"),
            off: 0,
            len: 3000,
            seed: 4,
        },
        Op::Link {
            src: p("/A/foo"),
            dst: p("/B/foolink"),
        },
        Op::Symlink {
            path: p("/C/sym"),
            target: p("../A/foo"),
        },
        Op::Mknod {
            path: p("/C/D/fifo"),
            kind: FileType::Fifo,
            perm: 0o600,
            rdev: 0,
        },
        Op::Create {
            path: p("/C/D/e"),
            perm: 0o600,
        },
    ]
}

/// Every operation, in all its forms, over the seeded tree.
pub fn ace_ops() -> Vec<Op> {
    let rn = |s: &str, d: &str, noreplace: bool, exchange: bool| Op::Rename {
        src: p(s),
        dst: p(d),
        noreplace,
        exchange,
    };
    let fa = |path: &str, off: u64, len: u64, keep_size: bool, punch: bool| Op::Fallocate {
        path: p(path),
        off,
        len,
        keep_size,
        punch,
    };
    vec![
        Op::Create {
            path: p("/A/new"),
            perm: 0o644,
        },
        Op::Create {
            path: p("/C/D/new2"),
            perm: 0o600,
        },
        Op::Mkdir {
            path: p("/B/newdir"),
            perm: 0o750,
        },
        Op::Symlink {
            path: p("/B/s2"),
            target: p("x"),
        },
        Op::Mknod {
            path: p("/A/dev"),
            kind: FileType::CharDevice,
            perm: 0o600,
            rdev: 0x0501,
        },
        Op::Write {
            path: p("/A/bar"),
            off: 0,
            len: 200,
            seed: 10,
        },
        Op::Write {
            path: p("/A/foo"),
            off: 1000,
            len: 2000,
            seed: 11,
        },
        Op::Write {
            path: p("/B/baz"),
            off: 5000,
            len: 4000,
            seed: 12,
        },
        Op::Write {
            path: p("/C/D/e"),
            off: 0,
            len: 40_000,
            seed: 13,
        },
        Op::Append {
            path: p("/A/foo"),
            len: 500,
            seed: 14,
        },
        Op::Truncate {
            path: p("/A/foo"),
            size: 2500,
        },
        Op::Truncate {
            path: p("/B/baz"),
            size: 10_000,
        },
        Op::Truncate {
            path: p("/A/bar"),
            size: 0,
        },
        fa("/B/baz", 0, 8192, false, false),
        fa("/A/foo", 1000, 2000, true, true),
        fa("/A/bar", 0, 4096, true, false),
        Op::CopyRange {
            src: p("/A/foo"),
            soff: 0,
            dst: p("/B/baz"),
            doff: 100,
            len: 4000,
        },
        Op::Link {
            src: p("/A/bar"),
            dst: p("/C/barlink"),
        },
        Op::Link {
            src: p("/B/baz"),
            dst: p("/B/baz2"),
        },
        Op::Unlink { path: p("/A/bar") },
        Op::Unlink { path: p("/A/foo") },
        Op::Unlink {
            path: p("/B/foolink"),
        },
        Op::Unlink { path: p("/C/sym") },
        Op::Unlink {
            path: p("/C/D/fifo"),
        },
        rn("/A/bar", "/A/bar2", false, false),
        rn("/A/bar", "/B/bar", false, false),
        rn("/A/bar", "/B/baz", false, false),
        rn("/A/bar", "/B/baz", true, false),
        rn("/A/bar", "/C/sym", false, true),
        rn("/A", "/C/D", false, true),
        rn("/C/D", "/A/D", false, false),
        rn("/E", "/C/E", false, false),
        rn("/A/foo", "/B/foolink", false, false),
        rn("/C/D", "/E", false, false),
        rn("/B/baz", "/E", false, false),
        Op::Mkdir {
            path: p("/A/sub"),
            perm: 0o700,
        },
        Op::Rmdir { path: p("/E") },
        Op::Rmdir { path: p("/B") },
        Op::Chmod {
            path: p("/A/foo"),
            perm: 0o600,
        },
        Op::Chown {
            path: p("/B/baz"),
            uid: 7,
            gid: 8,
        },
        Op::Chmod {
            path: p("/C"),
            perm: 0o700,
        },
        Op::SetXattr {
            path: p("/A/bar"),
            name: p("user.x"),
            len: 20,
            seed: 20,
            create: false,
            replace: true,
        },
        Op::SetXattr {
            path: p("/A/foo"),
            name: p("user.big"),
            len: 3000,
            seed: 21,
            create: false,
            replace: false,
        },
        Op::SetXattr {
            path: p("/C/D"),
            name: p("user.y"),
            len: 5,
            seed: 22,
            create: true,
            replace: false,
        },
        Op::RemoveXattr {
            path: p("/A/bar"),
            name: p("user.x"),
        },
        Op::Upload {
            path: p("/A/up"),
            len: 5000,
            segs: 3,
            seed: 30,
            replace: false,
        },
        Op::Upload {
            path: p("/A/bar"),
            len: 9000,
            segs: 2,
            seed: 31,
            replace: true,
        },
        Op::Upload {
            path: p("/B/baz"),
            len: 100,
            segs: 1,
            seed: 32,
            replace: false,
        },
        Op::Upload {
            path: p("/C/D"),
            len: 100,
            segs: 1,
            seed: 33,
            replace: true,
        },
        Op::Upload {
            path: p("/B/foolink"),
            len: 0,
            segs: 1,
            seed: 34,
            replace: true,
        },
    ]
}

/// The seeded image (2 MiB, 64 inodes) and its model.
pub fn seeded() -> &'static (Arc<Vec<u8>>, Model) {
    static S: OnceLock<(Arc<Vec<u8>>, Model)> = OnceLock::new();
    S.get_or_init(|| {
        let (img, m) = seed_image(format_image(IMAGE, Some(64)), &seed_ops()).expect("seed");
        (Arc::new(img), m)
    })
}

/// The inode at `path` in a Volume (panics if it is not there).
pub fn path_ino(v: &pktfs_fs::Volume, path: &str) -> u64 {
    super::vresolve(v, path).unwrap_or_else(|e| panic!("{path}: errno {e}"))
}
