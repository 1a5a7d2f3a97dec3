//! The tier's threads (tier-out passes, the object store's runtime) run
//! below the threads that serve clients.

/// Tier-out is background work: its threads yield the CPU to the ones
/// serving clients (nice 10; Linux applies it per thread). On a small
/// machine ingest and tier-out compete for the same cores, and ingest is
/// what a client waits for.
pub fn background_priority() {
    let me = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(me), 10) {
        tracing::debug!("tier: cannot lower this thread's priority: {e}");
    }
}
