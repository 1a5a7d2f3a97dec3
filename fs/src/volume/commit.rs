//! Committing a change: the persistence idiom and the redo journal.
//!
//! A [`Commit`] collects what an operation will make durable:
//! - new payload bytes and new records, already written and flushed by the
//!   caller (they are unreachable, so their order does not matter);
//! - attribute changes, written into each inode's idle slot at commit;
//! - the link-word stores (`addr := value`) that make the new state reachable.
//!
//! (Changes to an object nothing reaches yet, such as an unnamed file the
//! commit names, may be marked with [`Commit::make_unreachable`]: they are
//! written in place with the payload instead of journalled.)
//!
//! [`Commit::apply`] then follows the idiom (NOVA's `nova_update_tail`, extended to
//! several links):
//! 1. write the idle attribute slots; **one fence** makes payload, records and
//!    slots durable (with the journal entries, when there are several stores);
//! 2. one store: `publish_u64` it (aligned 8-byte store + persist): done.
//!    Several stores: the entries went out with step 1; now write the
//!    checksummed header and persist it (the commit point: a torn header
//!    fails the CRC and the slot counts as never committed); apply every
//!    store and persist; publish `commit = 0`.
//! 3. only now return freed records and buffer space to the allocators.
//!
//! Around steps 1a-2 the change counters of the inodes the commit changes
//! go odd and then even again (live.rs), before step 3 can let anything
//! be reused: that is all direct readers need from a commit. Every store
//! names the inode whose chain it changes, so none can be missed.

use super::failstop::OrStop;
use pktfs_layout::inode::{SELECTOR_OFF, SLOTS_OFF, SLOT_SIZE};
use pktfs_layout::journal::{
    JournalEntryRaw, JournalHeaderRaw, JOURNAL_HEADER_BYTES, JOURNAL_MAX_ENTRIES,
};
use pktfs_layout::{AttrSlot, InodeHeader, RecordId};
use smallvec::SmallVec;
use std::sync::Condvar;

use super::lockrank::{Rank, RankedMutex};
use zerocopy::IntoBytes;

use super::alloc::Slice;
use super::Volume;

/// Free journal slots. Operations on disjoint inodes commit in parallel, each
/// in its own slot; a committed slot is cleared before its operation returns
/// (and before its inode locks are released), so at any crash the committed
/// slots touch disjoint words and replay order does not matter.
#[derive(Debug)]
pub struct JournalSlots {
    free: RankedMutex<FreeSlots>,
    cv: Condvar,
    seq: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct FreeSlots {
    slots: Vec<u32>,
    /// Threads waiting in `take`. `give` wakes one only when this is
    /// non-zero: std's `Condvar::notify_one` is a futex syscall even with
    /// nobody waiting, which was one syscall per commit.
    waiters: u32,
}

impl JournalSlots {
    pub fn new(n: u32) -> JournalSlots {
        JournalSlots {
            free: RankedMutex::new(
                Rank::JournalSlots,
                FreeSlots {
                    slots: (0..n).collect(),
                    waiters: 0,
                },
            ),
            cv: Condvar::new(),
            seq: 0.into(),
        }
    }
    fn take(&self) -> u32 {
        let mut g = self.free.lock().or_stop();
        loop {
            if let Some(s) = g.slots.pop() {
                return s;
            }
            g.waiters += 1;
            g = g.wait(&self.cv).or_stop();
            g.waiters -= 1;
        }
    }
    fn give(&self, s: u32) {
        let mut g = self.free.lock().or_stop();
        g.slots.push(s);
        let wake = g.waiters > 0;
        drop(g);
        if wake {
            self.cv.notify_one();
        }
    }
}

/// An attribute-slot switch prepared for commit.
#[derive(Debug)]
struct SlotSwitch {
    ino: u32,
    attr: AttrSlot,
    new_gen: u64,
    idle: u8,
}

/// The lists are inline for the common sizes (a create, a rename, a small
/// write's commit touch a handful of words): a commit on the small-request
/// path then allocates nothing on the heap.
#[derive(Debug, Default)]
pub struct Commit {
    stores: SmallVec<[(u64, u64); 4]>,
    slots: SmallVec<[SlotSwitch; 2]>,
    /// Ranges a store makes reachable: asserted durable before publishing.
    reaches: SmallVec<[(u64, u64); 4]>,
    freed_records: SmallVec<[RecordId; 4]>,
    freed_slices: SmallVec<[Slice; 4]>,
    /// Stores and slot switches of objects nothing on the media reaches
    /// yet (an unnamed file about to be named by this commit): written in
    /// place in step 1, durable with the payload, never journalled.
    early_stores: SmallVec<[(u64, u64); 2]>,
    early_slots: SmallVec<[SlotSwitch; 1]>,
    /// Remote slices whose records this commit unlinks: their objects'
    /// live counts drop only once that is durable (the tier engine may
    /// delete an object whose count reaches zero).
    freed_remote: SmallVec<[super::remote::RemoteSlice; 1]>,
    /// Inodes whose chains or attributes this commit changes (their change
    /// counters move around it: live.rs).
    changed: ChangedInodes,
}

/// The inodes a commit changes, each once. A commit changes one to four
/// (a 1 KiB PUT: the new file and its directory), kept inline; more go to
/// a Vec. Noted on every store and attribute switch, so it is kept plain:
/// SmallVec's general push cost about forty instructions a call there.
#[derive(Debug, Default)]
struct ChangedInodes {
    inline: [u32; 4],
    n: u8,
    more: Vec<u32>,
}

impl ChangedInodes {
    #[inline]
    fn note(&mut self, ino: u32) {
        let n = usize::from(self.n);
        if self.inline[..n].contains(&ino) || self.more.contains(&ino) {
            return;
        }
        if n < self.inline.len() {
            self.inline[n] = ino;
            self.n += 1;
        } else {
            self.more.push(ino);
        }
    }

    /// Every inode noted, in the order noted.
    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.inline[..usize::from(self.n)]
            .iter()
            .chain(self.more.iter())
            .copied()
    }
}

impl SlotSwitch {
    /// Write the idle slot and schedule its write-back; returns its image
    /// offset and the selector store `(addr, value)` that makes it live.
    fn write_idle(&self, vol: &Volume) -> (u64, (u64, u64)) {
        let inode = vol.geo.inode_pos(self.ino).0;
        let pos = inode + SLOTS_OFF + self.idle as u64 * SLOT_SIZE;
        vol.pm.write(pos, &self.attr.to_bytes(self.new_gen));
        vol.pm.flush(pos, SLOT_SIZE);
        let selector = (
            inode + SELECTOR_OFF,
            InodeHeader::selector(self.new_gen, self.idle),
        );
        (pos, selector)
    }
}

/// What a committed slot switch left behind, for the DRAM inode.
#[derive(Debug, Clone, Copy)]
pub struct SlotState {
    pub generation: u64,
    pub live_slot: u8,
}

impl Commit {
    pub fn new() -> Commit {
        Commit::default()
    }

    /// `addr := value` at commit, a link word of inode `ino`'s chains (or
    /// of the inode itself). `reaches` is the record (or slot) the new value
    /// makes reachable, checked durable first in debug builds.
    pub fn store(&mut self, ino: u32, addr: u64, value: u64, reaches: Option<(u64, u64)>) {
        self.note_change(ino);
        self.stores.push((addr, value));
        if let Some(r) = reaches {
            self.reaches.push(r);
        }
    }

    /// Assert, before the commit's publish, that `[off, off+len)` is durable
    /// (something a store makes reachable, besides the record it names).
    pub fn store_reach(&mut self, off: u64, len: u64) {
        self.reaches.push((off, len));
    }

    /// Switch inode `ino` (currently at `cur`) to attributes `attr`. Calling
    /// twice for one inode keeps the last attributes.
    pub fn set_attr(&mut self, ino: u32, cur: SlotState, attr: AttrSlot) -> SlotState {
        self.note_change(ino);
        if let Some(s) = self.slots.iter_mut().find(|s| s.ino == ino) {
            s.attr = attr;
            return SlotState {
                generation: s.new_gen,
                live_slot: s.idle,
            };
        }
        let sw = SlotSwitch {
            ino,
            attr,
            new_gen: cur.generation + 1,
            idle: cur.live_slot ^ 1,
        };
        let st = SlotState {
            generation: sw.new_gen,
            live_slot: sw.idle,
        };
        self.slots.push(sw);
        st
    }

    /// `ino` is among the inodes whose change counters this commit moves
    /// (docs/DIRECT.md).
    #[inline]
    fn note_change(&mut self, ino: u32) {
        self.changed.note(ino);
    }

    /// Declare every store and slot switch collected so far a change to
    /// objects no published link reaches yet (an unnamed file that the
    /// stores added after this will name). Those changes are written in
    /// place before fence 1, with the payload, instead of going through
    /// the journal: a crash before the commit point leaves them
    /// unreachable (recovery frees them), and after it they are durable.
    /// Fewer journal entries and fewer lines to write back after the
    /// commit point.
    pub fn make_unreachable(&mut self) {
        self.early_stores.extend(self.stores.drain(..));
        self.early_slots.extend(self.slots.drain(..));
    }

    /// Return this record to the allocator once the commit is durable.
    pub fn free_record(&mut self, id: RecordId, slice: Slice) {
        self.freed_records.push(id);
        self.freed_slices.push(slice);
    }

    /// Return this remote record once the commit is durable, and count
    /// its object slice dead then.
    pub fn free_remote(&mut self, id: RecordId, s: super::remote::RemoteSlice) {
        self.freed_records.push(id);
        self.freed_remote.push(s);
    }

    /// Return this record once the commit is durable, but not its
    /// payload reference: a new record took that over.
    pub fn free_record_keep_payload(&mut self, id: RecordId) {
        self.freed_records.push(id);
    }

    pub fn is_empty(&self) -> bool {
        self.stores.is_empty()
            && self.slots.is_empty()
            && self.freed_records.is_empty()
            && self.freed_slices.is_empty()
            && self.early_stores.is_empty()
            && self.early_slots.is_empty()
            && self.freed_remote.is_empty()
    }

    pub fn apply(mut self, vol: &Volume) {
        let pm = &vol.pm;
        let g = &vol.geo;
        vol.changes_begin(self.changed.iter());
        // Step 1a: changes to objects nothing reaches yet, in place: their
        // slots, then their selectors and links (same epoch as the payload:
        // the publish below is what makes them reachable).
        for s in &self.early_slots {
            let (_, selector) = s.write_idle(vol);
            self.early_stores.push(selector);
        }
        for &(addr, value) in &self.early_stores {
            pm.store_u64(addr, value);
            pm.flush(addr, 8);
        }
        // Step 1: idle slots (invisible until their selector is published).
        for s in &self.slots {
            let (slot_pos, selector) = s.write_idle(vol);
            self.stores.push(selector);
            self.reaches.push((slot_pos, SLOT_SIZE));
        }
        match self.stores.len() {
            0 => pm.fence(),
            1 => {
                pm.fence();
                for &(o, l) in &self.reaches {
                    pm.debug_assert_persisted(o, l);
                }
                let (addr, value) = self.stores[0];
                pm.publish_u64(addr, value);
            }
            n => {
                assert!(
                    n <= JOURNAL_MAX_ENTRIES,
                    "operation needs {n} journal entries"
                );
                let slot = vol.journal.take();
                let base = g.journal_slot_pos(slot).0;
                let entries: Vec<JournalEntryRaw> = self
                    .stores
                    .iter()
                    .map(|&(a, v)| JournalEntryRaw {
                        addr: a.into(),
                        value: v.into(),
                    })
                    .collect();
                let seq = vol
                    .journal
                    .seq
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    + 1;
                let header = JournalHeaderRaw::new(seq, &entries);
                let entries_len = (entries.len() * 16) as u64;
                pm.write(base + JOURNAL_HEADER_BYTES as u64, entries.as_bytes());
                pm.flush(base + JOURNAL_HEADER_BYTES as u64, entries_len);
                // Fence 1: payload, records, idle slots and the entries are
                // durable before the header exists. The header's CRC makes
                // header + entries all-or-nothing, but says nothing about the
                // records the entries link to: a cache line may be written
                // back at any moment after its store, so a header sharing
                // this epoch could reach the media before them.
                pm.fence();
                for &(o, l) in &self.reaches {
                    pm.debug_assert_persisted(o, l);
                }
                pm.debug_assert_persisted(base + JOURNAL_HEADER_BYTES as u64, entries_len);
                // Fence 2: the commit point.
                pm.write(base, header.as_bytes());
                pm.persist(base, JOURNAL_HEADER_BYTES as u64);
                // Apply and clear: the same code recovery replays with. The
                // stores came from this build's own link-word addresses.
                if let Err(e) = super::journal::replay_slot(pm, g, slot, &self.stores) {
                    unreachable!("a commit named a word that is not a link word: {e}");
                }
                vol.journal.give(slot);
            }
        }
        vol.changes_end(self.changed.iter());
        // Step 3: only now is the old space unreachable on the media.
        if !self.freed_records.is_empty() || !self.freed_slices.is_empty() {
            let mut a = vol.alloc.lock().or_stop();
            for r in self.freed_records.drain(..) {
                a.free_record(r.0);
            }
            for s in self.freed_slices.drain(..) {
                a.drop_ref(s);
            }
        }
        for s in self.freed_remote.drain(..) {
            vol.remote.drop_slice(s);
        }
    }
}
