//! The in-memory inode table: inode number -> inode.

use super::failstop::OrStop;

use rustc_hash::FxHashMap;

use super::lockrank::RankedRwLock;
use super::InodeRef;

/// Shard count (a power of two). Every operation looks inodes up here
/// several times; with one lock for the whole table, each lookup moved
/// that lock's cache line between the cores serving different requests
/// (`perf`: the table was the largest user-space cost of 16 concurrent
/// uploads). By number, the shards spread unrelated files apart.
const SHARDS: usize = 64;

type Map = FxHashMap<u32, InodeRef>;

/// One shard, on its own cache line (its lock word shares no line with
/// another shard's).
#[repr(align(64))]
#[derive(Debug, Default)]
struct Shard(RankedRwLock<Map>);

/// Inode number -> in-memory inode. Fx hashing: the keys are numbers
/// this volume's allocator hands out, not input an attacker chooses.
///
/// Lock order: inode, then shard (`lockrank::Rank::InodeTable`, a leaf). A
/// shard lock is held only inside these methods and never while an inode
/// lock is taken: freeing an inode removes it from its shard under the
/// inode's write lock, so a walker that held shards while it locked inodes
/// deadlocked against it (CI once hung so). Walkers take a
/// [`InodeTable::snapshot`] and lock its inodes after.
#[derive(Debug)]
pub(crate) struct InodeTable {
    shards: Box<[Shard]>,
}

fn shard_of(ino: u32) -> usize {
    ino as usize & (SHARDS - 1)
}

impl InodeTable {
    pub fn new(inodes: impl IntoIterator<Item = (u32, InodeRef)>) -> InodeTable {
        let shards: Box<[Shard]> = (0..SHARDS).map(|_| Shard::default()).collect();
        let t = InodeTable { shards };
        for (n, a) in inodes {
            t.insert(n, a);
        }
        t
    }

    fn shard(&self, ino: u32) -> &RankedRwLock<Map> {
        &self.shards[shard_of(ino)].0
    }

    pub fn get(&self, ino: u32) -> Option<InodeRef> {
        self.shard(ino).read().or_stop().get(&ino).cloned()
    }

    pub fn insert(&self, ino: u32, a: InodeRef) {
        self.shard(ino).write().or_stop().insert(ino, a);
    }

    pub fn remove(&self, ino: u32) {
        self.shard(ino).write().or_stop().remove(&ino);
    }

    /// Every inode in the table now, by number, in number order. The
    /// shards are released before this returns: an inode in the list may
    /// be freed (`dead`) by the time it is locked, and one created since is
    /// missing. Walks over a quiescent volume see exactly the table.
    pub fn snapshot(&self) -> Vec<(u32, InodeRef)> {
        let mut v: Vec<(u32, InodeRef)> = Vec::new();
        for s in self.shards.iter() {
            let g = s.0.read().or_stop();
            v.extend(g.iter().map(|(&n, a)| (n, a.clone())));
        }
        v.sort_unstable_by_key(|&(n, _)| n);
        v
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
