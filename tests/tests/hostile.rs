//! Hostile clients against the servers, in process (issue "safe to
//! expose"): each module tries one family of attacks and asserts the attack
//! gets nothing, stores nothing, and the server's memory, threads, records
//! and connections stay within their stated bounds (docs/SECURITY.md).
//! A submodule per family.

use crate::prereq;

/// io_uring can be used by this process (a prerequisite of the loops' runs).
fn uring() -> prereq::Check {
    let r = pktfs_netpath::loops::choose(pktfs_netpath::IoMode::Uring, 1);
    prereq::holds(r.is_ok(), || format!("io_uring is not usable here: {r:?}"))
}

/// A test function of one `IoMode` argument, as a test on each transport:
/// the io_uring loops, the loops on epoll, and a thread per connection.
macro_rules! on_every_transport {
    ($($f:ident),+ $(,)?) => {
        mod on_uring {
            $(
                #[test]
                fn $f() {
                    crate::require!(crate::hostile::uring());
                    super::$f(pktfs_netpath::IoMode::Uring);
                }
            )+
        }
        mod on_epoll {
            $(
                #[test]
                fn $f() {
                    super::$f(pktfs_netpath::IoMode::Epoll);
                }
            )+
        }
        mod on_threads {
            $(
                #[test]
                fn $f() {
                    super::$f(pktfs_netpath::IoMode::Threads);
                }
            )+
        }
    };
}

mod access;
mod as_user;
mod bounds;
mod floods;
mod tiered_get;
mod trickle;
