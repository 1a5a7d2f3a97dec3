//! The in-memory inode table: inode number -> inode.

use super::failstop::OrStop;
use std::sync::{Arc, RwLock, RwLockReadGuard};

use rustc_hash::FxHashMap;

use super::Inode;

/// Shard count (a power of two). Every operation looks inodes up here
/// several times; with one lock for the whole table, each lookup moved
/// that lock's cache line between the cores serving different requests
/// (`perf`: the table was the largest user-space cost of 16 concurrent
/// uploads). By number, the shards spread unrelated files apart.
const SHARDS: usize = 64;

type Map = FxHashMap<u32, Arc<RwLock<Inode>>>;

/// One shard, on its own cache line (its lock word shares no line with
/// another shard's).
#[repr(align(64))]
#[derive(Debug, Default)]
struct Shard(RwLock<Map>);

/// Inode number -> in-memory inode. Fx hashing: the keys are numbers
/// this volume's allocator hands out, not input an attacker chooses.
///
/// Lock order: a shard lock is held only inside these methods, never
/// while taking an inode lock (except `lock_all`, used by the checker,
/// which takes inode read locks under all shard read locks and so must
/// not run while the caller holds an inode lock).
#[derive(Debug)]
pub(crate) struct InodeTable {
    shards: Box<[Shard]>,
}

fn shard_of(ino: u32) -> usize {
    ino as usize & (SHARDS - 1)
}

impl InodeTable {
    pub fn new(inodes: impl IntoIterator<Item = (u32, Arc<RwLock<Inode>>)>) -> InodeTable {
        let shards: Box<[Shard]> = (0..SHARDS).map(|_| Shard::default()).collect();
        let t = InodeTable { shards };
        for (n, a) in inodes {
            t.insert(n, a);
        }
        t
    }

    fn shard(&self, ino: u32) -> &RwLock<Map> {
        &self.shards[shard_of(ino)].0
    }

    pub fn get(&self, ino: u32) -> Option<Arc<RwLock<Inode>>> {
        self.shard(ino).read().or_stop().get(&ino).cloned()
    }

    pub fn insert(&self, ino: u32, a: Arc<RwLock<Inode>>) {
        self.shard(ino).write().or_stop().insert(ino, a);
    }

    pub fn remove(&self, ino: u32) {
        self.shard(ino).write().or_stop().remove(&ino);
    }

    /// Every shard read-locked: a consistent view (no insert or remove
    /// until the guard drops), for the invariant checker.
    pub fn lock_all(&self) -> AllShards<'_> {
        AllShards {
            guards: self.shards.iter().map(|s| s.0.read().or_stop()).collect(),
        }
    }
}

/// See [`InodeTable::lock_all`].
pub(crate) struct AllShards<'a> {
    guards: Vec<RwLockReadGuard<'a, Map>>,
}

impl AllShards<'_> {
    pub fn len(&self) -> usize {
        self.guards.iter().map(|g| g.len()).sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&u32, &Arc<RwLock<Inode>>)> {
        self.guards.iter().flat_map(|g| g.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_on_their_own_lines() {
        assert_eq!(std::mem::align_of::<Shard>(), 64);
        assert!(std::mem::size_of::<Shard>() >= 64);
        assert!(SHARDS.is_power_of_two());
    }
}
