//! Lookups and creates that hand back a pinned inode: what a holder of
//! long-lived references to inodes by number (the FUSE kernel's lookup
//! count) needs. A pin taken *after* a plain lookup or create can land on
//! the wrong inode: between the two, another user of the Volume (an HTTP
//! DELETE in `pktfs up`, which serves and mounts one Volume) can unlink the
//! file, its number can be freed and reused by a new file, and the pin
//! would then hold the new file under the old name. These calls take the
//! pin together with the name's binding, so a caller never does.

use super::{FsError, NewMode, Result, Volume};
use crate::volume::Attr;
use crate::FileType;

/// How often [`Volume::lookup_pinned`] looks again when the name moved to
/// another inode between its lookup and its pin (each retry needs a
/// concurrent unlink or rename of that very name).
const LOOKUP_RETRIES: usize = 8;

impl Volume {
    /// [`Self::create_node`], returning with one pin on the new inode,
    /// taken before the name was published.
    pub fn create_node_pinned(
        &self,
        parent: u64,
        name: &[u8],
        kind: FileType,
        m: NewMode,
        rdev: u32,
    ) -> Result<Attr> {
        self.make_plain_node(parent, name, kind, m, rdev, 1)
    }

    /// [`Self::symlink`], returning with one pin on the new inode, taken
    /// before the name was published.
    pub fn symlink_pinned(
        &self,
        parent: u64,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Attr> {
        self.make_symlink(parent, name, target, uid, gid, 1)
    }

    /// [`Self::lookup`], returning with one pin on the inode `name` names.
    /// The pin is taken, then the name looked up again: it is returned
    /// only if the name still leads to the pinned inode (a number freed
    /// and reused in between would not), otherwise the pin is dropped and
    /// the lookup repeated. [`FsError::Contended`] only if the name kept
    /// moving for every retry.
    pub fn lookup_pinned(&self, parent: u64, name: &[u8]) -> Result<Attr> {
        for _ in 0..LOOKUP_RETRIES {
            let a = self.lookup(parent, name)?;
            #[cfg(test)]
            tests::between_lookup_and_pin();
            if self.pin(a.ino).is_err() {
                continue; // freed since: look again
            }
            match self.lookup(parent, name) {
                Ok(b) if b.ino == a.ino => return Ok(b),
                Ok(_) => self.unpin(a.ino, 1),
                Err(e) => {
                    self.unpin(a.ino, 1);
                    return Err(e);
                }
            }
        }
        Err(FsError::Contended("the name"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volume::tests::{fresh, fresh_with};
    use pktfs_layout::GeometryParams;

    /// Whether `ino` is still the live inode with `size` bytes.
    fn alive(v: &Volume, ino: u64) -> bool {
        v.getattr(ino).is_ok()
    }

    #[test]
    fn a_pinned_create_outlives_an_unlink_until_unpinned() {
        let v = fresh(16 << 20);
        let r = v.root();
        let f = v
            .create_node_pinned(r, b"f", FileType::Regular, NewMode::plain(0o644, 0, 0), 0)
            .unwrap()
            .ino;
        let s = v.symlink_pinned(r, b"s", b"f", 0, 0).unwrap().ino;
        v.unlink(r, b"f").unwrap();
        v.unlink(r, b"s").unwrap();
        // Unnamed but pinned: still there (a plain create would be gone).
        assert!(alive(&v, f) && alive(&v, s));
        assert_eq!(v.getattr(f).unwrap().nlink, 0);
        v.unpin(f, 1);
        v.unpin(s, 1);
        assert!(!alive(&v, f) && !alive(&v, s));
        v.check_invariants().unwrap();
        // The plain calls leave no pin behind.
        let g = v.create(r, b"g", 0o644, 0, 0).unwrap().ino;
        v.unlink(r, b"g").unwrap();
        assert!(!alive(&v, g));
        assert!(matches!(
            v.create_node_pinned(r, b"l", FileType::Symlink, NewMode::plain(0o777, 0, 0), 0),
            Err(FsError::Invalid(_))
        ));
    }

    /// The checker walks the inode table while other threads free inodes
    /// (an unpin frees under the inode's write lock and then takes the
    /// table's shard). It used to hold every shard while it locked each
    /// inode: the two waited for each other for ever (CI hung so, with a
    /// server dropping a closed connection's spare file under the check).
    #[test]
    fn the_checker_never_waits_for_a_free_in_progress() {
        let v = fresh(16 << 20);
        let r = v.root();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (done, wait) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            for t in 0..2u8 {
                let (v, stop) = (&v, &stop);
                s.spawn(move || {
                    let name = [b'f', b'0' + t];
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let f = v
                            .create_node_pinned(
                                r,
                                &name,
                                FileType::Regular,
                                NewMode::plain(0o644, 0, 0),
                                0,
                            )
                            .unwrap()
                            .ino;
                        v.write(f, 0, b"x").unwrap();
                        v.unlink(r, &name).unwrap();
                        v.unpin(f, 1);
                    }
                });
            }
            let (v, stop) = (&v, &stop);
            s.spawn(move || {
                // The workers stop however this thread ends (a panic here
                // must fail the test, not leave them running).
                struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
                impl Drop for Stop<'_> {
                    fn drop(&mut self) {
                        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                let _stop = Stop(stop);
                // Totals may disagree while files come and go; only the
                // walks ending matters here.
                for _ in 0..2000 {
                    let _ = v.check_invariants();
                    let _ = v.stray_buffer_refs();
                }
                drop(done);
            });
            // A deadline for a failure report, not a timing: the walks take
            // well under a second.
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                wait.recv_timeout(std::time::Duration::from_secs(60))
            {
                eprintln!("the checker and the frees are stuck on each other");
                std::process::abort();
            }
        });
        v.check_invariants().unwrap();
        assert_eq!(v.stray_buffer_refs(), 0);
    }

    #[test]
    fn lookup_pinned_pins_what_the_name_names() {
        let v = fresh(16 << 20);
        let r = v.root();
        let f = v.create(r, b"f", 0o644, 0, 0).unwrap().ino;
        let a = v.lookup_pinned(r, b"f").unwrap();
        assert_eq!(a.ino, f);
        v.unlink(r, b"f").unwrap();
        assert!(alive(&v, f));
        v.unpin(f, 1);
        assert!(!alive(&v, f));
        assert!(matches!(v.lookup_pinned(r, b"f"), Err(FsError::NotFound)));
        v.check_invariants().unwrap();
    }

    /// The hazard itself, made to happen: between the lookup and the pin
    /// the file is unlinked (and freed: nothing pins it) and its number
    /// taken by a new file under another name (the image has room for one
    /// inode besides the root, so the number must be reused). The name is
    /// gone: `NotFound`, and the new file is left unpinned. A pin after a
    /// plain lookup would have held the new file under the old name.
    #[test]
    fn lookup_pinned_never_hands_back_a_reused_number_under_a_stale_name() {
        let v = std::rc::Rc::new(fresh_with(GeometryParams {
            inode_count: Some(2),
            ..GeometryParams::for_size(16 << 20)
        }));
        let r = v.root();
        let x = v.create(r, b"x", 0o644, 0, 0).unwrap().ino;
        let y = std::rc::Rc::new(std::cell::Cell::new(0));
        {
            let (v, y) = (v.clone(), y.clone());
            BETWEEN.with(|b| {
                *b.borrow_mut() = Some(Box::new(move || {
                    v.unlink(r, b"x").unwrap();
                    y.set(v.create(r, b"y", 0o644, 0, 0).unwrap().ino);
                }))
            });
        }
        let got = v.lookup_pinned(r, b"x");
        assert!(matches!(got, Err(FsError::NotFound)), "{got:?}");
        assert_eq!(y.get(), x, "the number was reused");
        // "y" carries no pin: unlinking it frees it.
        v.unlink(r, b"y").unwrap();
        assert!(!alive(&v, x));
        v.check_invariants().unwrap();
    }

    type Hook = Box<dyn FnMut()>;
    thread_local! {
        static BETWEEN: std::cell::RefCell<Option<Hook>> = const { std::cell::RefCell::new(None) };
    }

    /// Runs (once) what a test put between `lookup_pinned`'s lookup and
    /// its pin.
    pub(super) fn between_lookup_and_pin() {
        if let Some(mut f) = BETWEEN.with(|b| b.borrow_mut().take()) {
            f();
        }
    }
}
