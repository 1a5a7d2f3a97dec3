//! Fail-stop: when an invariant breaks, the Volume stops serving and says
//! why, instead of going on from DRAM state that may disagree with the
//! media (TigerBeetle's and ZFS's rule).
//!
//! What stops a Volume:
//! - a panic inside an operation run through [`Volume::guard`] (the FUSE
//!   adapter and the network servers run every request that way), or one
//!   that poisoned an inode lock;
//! - a failed persist ([`crate::media::Pm::persist_failure`]: msync said the
//!   device lost writes);
//! - an explicit [`Volume::fail`].
//!
//! After that, every call that reaches an inode fails with
//! [`FsError::Failed`] (EIO at the POSIX boundary, 500 over HTTP), the cause
//! is logged once at error level, and nothing more is written: the
//! superblock is not even marked clean at close. Nothing acknowledged is
//! lost, because every operation is durable before it returns; an operation
//! cut short by the fault never reached its commit point or is rolled
//! forward by the journal. The next open recovers the image as after a
//! crash.
//!
//! A fault on the mapping itself (SIGBUS: a page the host cannot back, a
//! media error) cannot be unwound from safely; the media module's handler
//! logs it and lets the process die, which is the same stop, one level up.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use super::Volume;
use crate::error::{FsError, Result};

/// Whether the Volume has stopped, and why.
#[derive(Debug, Default)]
pub(crate) struct FailState {
    failed: AtomicBool,
    why: OnceLock<String>,
}

/// A panic payload as text.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with no message".to_string()
    }
}

impl Volume {
    /// Stop serving: every later call fails with [`FsError::Failed`]. The
    /// first cause is kept and logged; later ones are logged at debug level.
    pub fn fail(&self, why: impl Into<String>) {
        let why = why.into();
        if self.fail_state.why.set(why.clone()).is_ok() {
            self.fail_state.failed.store(true, Ordering::SeqCst);
            tracing::error!(
                "pktfs volume stopped: {why}. Every further request fails with EIO; \
                 nothing acknowledged is lost. Unmount it: the next open recovers the image."
            );
        } else {
            tracing::debug!("further fault after the volume stopped: {why}");
        }
    }

    /// Stop serving because `what` panicked with payload `p` (for callers
    /// that catch panics themselves: the FUSE adapter, the servers).
    pub fn fail_after_panic(&self, what: &str, p: &(dyn std::any::Any + Send)) {
        self.fail(format!("{what} panicked: {}", panic_message(p)));
    }

    /// Why the Volume stopped, if it did.
    pub fn failure(&self) -> Option<String> {
        if let Some(w) = self.pm.persist_failure() {
            // A persist failed inside the media layer: make it the Volume's
            // state too (the first call to notice logs it).
            self.fail(format!("persisting to the image failed: {w}"));
        }
        self.fail_state
            .failed
            .load(Ordering::Acquire)
            .then(|| self.fail_state.why.get().cloned().unwrap_or_default())
    }

    /// Ok while the Volume serves; [`FsError::Failed`] once it stopped.
    #[inline]
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.fail_state.failed.load(Ordering::Relaxed) || self.pm.persist_failure().is_some() {
            return Err(FsError::Failed(self.failure().unwrap_or_default()));
        }
        Ok(())
    }

    /// Run one operation so that a panic inside it stops the Volume instead
    /// of leaving later operations to run on state the panic may have left
    /// half-changed. The panic becomes [`FsError::Failed`].
    pub fn guard<T>(&self, op: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.check_live()?;
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => r,
            Err(p) => {
                let msg = panic_message(&*p);
                self.fail(format!("{op} panicked: {msg}"));
                Err(FsError::Failed(self.failure().unwrap_or(msg)))
            }
        }
    }
}

/// Taking a lock of the Volume whose holder panicked: the state it guards
/// may be half-changed, so nothing may go on from it. The panic this
/// raises is caught by [`Volume::guard`] (the FUSE adapter and the
/// servers run every request through one), which stops the Volume.
pub(crate) trait OrStop<G> {
    fn or_stop(self) -> G;
}

impl<G> OrStop<G> for std::sync::LockResult<G> {
    #[inline]
    #[track_caller]
    fn or_stop(self) -> G {
        match self {
            Ok(g) => g,
            Err(_) => panic!(
                "a lock of the volume was poisoned by an earlier panic: \
                 its state may disagree with the media, so the volume stops"
            ),
        }
    }
}
