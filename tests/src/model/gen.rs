//! proptest strategies: abstract operations whose paths are chosen, when
//! they run, among what exists in the model (so most operations do
//! something), mixed with remounts and crashes for the model test.

use proptest::prelude::*;

use pktfs_fs::FileType;

use super::{Model, Op};

/// Names drawn from a small pool, so operations collide (EEXIST, replace).
pub const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
pub const XNAMES: [&str; 3] = ["user.a", "user.b", "trusted.c"];

#[derive(Clone, Debug)]
pub enum Name {
    Pool(u8),
    /// 256 bytes: ENAMETOOLONG.
    TooLong,
}

impl Name {
    fn get(&self) -> String {
        match self {
            Name::Pool(i) => NAMES[*i as usize % NAMES.len()].to_string(),
            Name::TooLong => "n".repeat(256),
        }
    }
}

/// An operation with its paths still abstract: `u8` selectors pick among
/// existing paths (any kind) or directories when the op runs.
#[derive(Clone, Debug)]
pub enum AOp {
    Create(u8, Name),
    Mkdir(u8, Name),
    Mknod(u8, Name, u8),
    Symlink(u8, Name, u8),
    Write(u8, u64, u32, u8),
    Append(u8, u32, u8),
    Truncate(u8, u64),
    TierOut(u8),
    Recall(u8),
    Fallocate(u8, u64, u64, u8),
    CopyRange(u8, u8, u64, u64, u64),
    Link(u8, u8, Name),
    Unlink(u8),
    Rmdir(u8),
    /// Move to a new name in some directory.
    Rename(u8, u8, Name, u8),
    /// Onto an existing path (replace, NOREPLACE, EXCHANGE).
    RenameOnto(u8, u8, u8),
    Chmod(u8, u16),
    Chown(u8, u8, u8),
    SetXattr(u8, u8, u32, u8, u8),
    RemoveXattr(u8, u8),
    /// Upload to a new name in a directory (or onto an existing path).
    Upload(u8, Name, u32, u8, u8, u8),
}

/// A step of a model-test case.
#[derive(Clone, Debug)]
pub enum Step {
    Op(AOp),
    /// Clean remount.
    Remount,
    /// Crash at the `point`-th crash instant (modulo their number) since the
    /// last open, with the `subset`-th in-flight subset there.
    Crash(u32, u32),
}

fn name() -> impl Strategy<Value = Name> {
    prop_oneof![30 => (0u8..6).prop_map(Name::Pool), 1 => Just(Name::TooLong)]
}

fn off() -> impl Strategy<Value = u64> {
    prop_oneof![4 => 0u64..5000, 2 => 0u64..70_000, 1 => 0u64..300_000]
}

fn len() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..3000, 6 => 0u32..20_000, 2 => 0u32..150_000, 3 => 300_000u32..900_000]
}

pub fn aop() -> impl Strategy<Value = AOp> {
    let s = any::<u8>;
    prop_oneof![
        6 => (s(), name()).prop_map(|(d, n)| AOp::Create(d, n)),
        4 => (s(), name()).prop_map(|(d, n)| AOp::Mkdir(d, n)),
        1 => (s(), name(), s()).prop_map(|(d, n, k)| AOp::Mknod(d, n, k)),
        2 => (s(), name(), s()).prop_map(|(d, n, t)| AOp::Symlink(d, n, t)),
        10 => (s(), off(), len(), s()).prop_map(|(p, o, l, x)| AOp::Write(p, o, l, x)),
        3 => (s(), len(), s()).prop_map(|(p, l, x)| AOp::Append(p, l, x)),
        3 => (s(), off()).prop_map(|(p, o)| AOp::Truncate(p, o)),
        2 => s().prop_map(AOp::TierOut),
        1 => s().prop_map(AOp::Recall),
        2 => (s(), off(), 1u64..40_000, s()).prop_map(|(p, o, l, m)| AOp::Fallocate(p, o, l, m)),
        2 => (s(), s(), off(), off(), 0u64..60_000).prop_map(|(a, b, x, y, l)| AOp::CopyRange(a, b, x, y, l)),
        3 => (s(), s(), name()).prop_map(|(a, d, n)| AOp::Link(a, d, n)),
        5 => s().prop_map(AOp::Unlink),
        2 => s().prop_map(AOp::Rmdir),
        4 => (s(), s(), name(), s()).prop_map(|(a, d, n, f)| AOp::Rename(a, d, n, f)),
        4 => (s(), s(), s()).prop_map(|(a, b, f)| AOp::RenameOnto(a, b, f)),
        2 => (s(), any::<u16>()).prop_map(|(p, m)| AOp::Chmod(p, m)),
        1 => (s(), s(), s()).prop_map(|(p, u, g)| AOp::Chown(p, u, g)),
        3 => (s(), s(), prop_oneof![3 => 0u32..200, 1 => 0u32..5000], s(), s()).prop_map(|(p, n, l, x, f)| AOp::SetXattr(p, n, l, x, f)),
        1 => (s(), s()).prop_map(|(p, n)| AOp::RemoveXattr(p, n)),
        3 => (s(), name(), len(), 1u8..6, s(), s()).prop_map(|(d, n, l, k, x, f)| AOp::Upload(d, n, l, k, x, f)),
    ]
}

/// Model-test steps: mostly operations, some remounts and crashes.
pub fn steps(max: usize) -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        prop_oneof![
            40 => aop().prop_map(Step::Op),
            2 => Just(Step::Remount),
            3 => (any::<u32>(), any::<u32>()).prop_map(|(p, s)| Step::Crash(p, s)),
        ],
        1..max,
    )
}

/// Operation sequences alone (crash exploration of whole sequences).
pub fn ops(max: usize) -> impl Strategy<Value = Vec<AOp>> {
    proptest::collection::vec(aop(), 1..max)
}

fn pick<T: Clone>(v: &[T], sel: u8) -> Option<T> {
    (!v.is_empty()).then(|| v[sel as usize % v.len()].clone())
}

/// Turn an abstract op into a concrete one against the model's current tree.
pub fn concretize(a: &AOp, m: &Model) -> Op {
    let dirs = m.dirs();
    let paths: Vec<String> = m.paths().into_iter().map(|p| p.0).collect();
    let files: Vec<String> = m
        .paths()
        .into_iter()
        .filter(|p| p.1 == FileType::Regular)
        .map(|p| p.0)
        .collect();
    let any = |s: u8| pick(&paths, s).unwrap_or_else(|| "/a".into());
    // Prefer regular files for data operations, but not always.
    let file = |s: u8| {
        if s % 8 == 7 {
            any(s / 8)
        } else {
            pick(&files, s).unwrap_or_else(|| any(s))
        }
    };
    let dir = |s: u8| pick(&dirs, s).unwrap_or_else(|| "/".into());
    let at = |d: u8, n: &Name| super::join(&dir(d), n.get().as_bytes());
    match a {
        AOp::Create(d, n) => Op::Create {
            path: at(*d, n),
            perm: 0o644,
        },
        AOp::Mkdir(d, n) => Op::Mkdir {
            path: at(*d, n),
            perm: 0o755,
        },
        AOp::Mknod(d, n, k) => {
            let (kind, rdev) = match k % 4 {
                0 => (FileType::Fifo, 0),
                1 => (FileType::Socket, 0),
                2 => (FileType::CharDevice, 0x0501 + *k as u32),
                _ => (FileType::BlockDevice, 0x0800 + *k as u32),
            };
            Op::Mknod {
                path: at(*d, n),
                kind,
                perm: 0o600,
                rdev,
            }
        }
        AOp::Symlink(d, n, t) => {
            let target = match t % 4 {
                0 => "a".to_string(),
                1 => "../d/e".to_string(),
                2 => "t".repeat(3000),
                _ => format!("/{}", "x".repeat(*t as usize)),
            };
            Op::Symlink {
                path: at(*d, n),
                target,
            }
        }
        AOp::Write(p, off, len, seed) => Op::Write {
            path: file(*p),
            off: *off,
            len: *len,
            seed: *seed,
        },
        AOp::Append(p, len, seed) => Op::Append {
            path: file(*p),
            len: *len,
            seed: *seed,
        },
        AOp::Truncate(p, size) => Op::Truncate {
            path: file(*p),
            size: *size,
        },
        AOp::TierOut(p) => Op::TierOut { path: file(*p) },
        AOp::Recall(p) => Op::Recall { path: file(*p) },
        AOp::Fallocate(p, off, len, mode) => {
            let (keep_size, punch) = match mode % 3 {
                0 => (false, false),
                1 => (true, false),
                _ => (true, true),
            };
            Op::Fallocate {
                path: file(*p),
                off: *off,
                len: *len,
                keep_size,
                punch,
            }
        }
        AOp::CopyRange(a, b, soff, doff, len) => Op::CopyRange {
            src: file(*a),
            soff: *soff,
            dst: file(*b),
            doff: *doff,
            len: *len,
        },
        AOp::Link(a, d, n) => Op::Link {
            src: any(*a),
            dst: at(*d, n),
        },
        AOp::Unlink(p) => Op::Unlink { path: any(*p) },
        AOp::Rmdir(p) => Op::Rmdir {
            path: pick(&dirs, *p)
                .filter(|d| d != "/")
                .unwrap_or_else(|| any(*p)),
        },
        AOp::Rename(a, d, n, f) => Op::Rename {
            src: any(*a),
            dst: at(*d, n),
            noreplace: f % 4 == 1,
            exchange: f % 4 == 2,
        },
        AOp::RenameOnto(a, b, f) => Op::Rename {
            src: any(*a),
            dst: any(*b),
            noreplace: f % 3 == 1,
            exchange: f % 3 == 2,
        },
        AOp::Chmod(p, m) => Op::Chmod {
            path: if m % 16 == 0 { "/".into() } else { any(*p) },
            perm: *m as u32 & 0o7777,
        },
        AOp::Chown(p, u, g) => Op::Chown {
            path: any(*p),
            uid: *u as u32,
            gid: *g as u32 * 1000,
        },
        AOp::SetXattr(p, n, len, seed, f) => Op::SetXattr {
            path: if f % 16 == 15 { "/".into() } else { any(*p) },
            name: XNAMES[*n as usize % XNAMES.len()].into(),
            len: *len,
            seed: *seed,
            create: f % 4 == 1,
            replace: f % 4 == 2,
        },
        AOp::RemoveXattr(p, n) => Op::RemoveXattr {
            path: any(*p),
            name: XNAMES[*n as usize % XNAMES.len()].into(),
        },
        AOp::Upload(d, n, len, segs, seed, f) => Op::Upload {
            path: if f % 2 == 0 { at(*d, n) } else { any(*d) },
            len: *len,
            segs: *segs,
            seed: *seed,
            replace: f % 4 != 3,
        },
    }
}
