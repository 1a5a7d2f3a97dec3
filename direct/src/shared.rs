//! What every handle of one image shares: the [`Base`] (mapping, geometry,
//! verification), the image file and its path, a cache of indexes, and the
//! count of holderless lends.

use std::collections::HashMap;
use std::fs::File as StdFile;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::base::Base;
use crate::error::Result;
use crate::index::Index;
use crate::section::Section;

/// Most indexes [`Shared::index_cached`] keeps: it is emptied when full
/// (directories of a path walk and recently stat'ed files are what it is
/// for; a handle keeps its file's index itself).
const CACHE_MAX: usize = 4096;

/// What every handle of one image shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub base: Base,
    pub path: PathBuf,
    /// The open file the mapping came from (None for a snapshot).
    pub file: Option<StdFile>,
    /// Holderless zero-copy lends in flight (`lend`): the image's shared
    /// lock is taken for the first and given back after the last (flock
    /// is per open file: one lock for all of them).
    pub lends: Mutex<usize>,
    /// Indexes of inodes looked up by name or stat'ed, by the section that
    /// made them (handles keep their own).
    cache: Mutex<HashMap<u32, Arc<Index>>>,
}

impl std::ops::Deref for Shared {
    type Target = Base;
    fn deref(&self) -> &Base {
        &self.base
    }
}

impl Shared {
    pub fn new(base: Base, path: PathBuf, file: Option<StdFile>) -> Shared {
        Shared {
            base,
            path,
            file,
            lends: Mutex::new(0),
            cache: Default::default(),
        }
    }

    /// Inode `ino`'s index as of section `s`: the cached one if it was made
    /// in a section with the same words, else a new one.
    pub(crate) fn index_cached(&self, ino: u32, s: &Section) -> Result<Arc<Index>> {
        {
            let c = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(ix) = c.get(&ino).filter(|ix| ix.section == *s) {
                return Ok(ix.clone());
            }
        }
        let ix = Arc::new(self.index(ino, s)?);
        // Kept even if `s` turns out torn: its words never come back (the
        // counters only grow), so it is never taken for another section's.
        let mut c = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if c.len() >= CACHE_MAX {
            c.clear();
        }
        c.insert(ino, ix.clone());
        Ok(ix)
    }
}
