//! fsck.pktfs as a library (filled in by the fsck issue).
