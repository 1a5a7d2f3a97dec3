//! "This thread is inside the shim": while set, every interposer passes
//! straight to the C library, so the shim's own file operations (Rust's
//! std opening an image, reading /proc) never come back into it.

use std::cell::Cell;

thread_local! {
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is inside the shim (or its thread-local
/// state is gone: a thread exiting, when nothing should be done directly).
pub fn inside() -> bool {
    INSIDE.try_with(|c| c.get()).unwrap_or(true)
}

/// Marks the thread inside the shim until dropped.
#[derive(Debug)]
pub struct Inside {
    was: bool,
}

impl Inside {
    pub fn enter() -> Inside {
        let was = INSIDE.try_with(|c| c.replace(true)).unwrap_or(true);
        Inside { was }
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        let _ = INSIDE.try_with(|c| c.set(self.was));
    }
}
