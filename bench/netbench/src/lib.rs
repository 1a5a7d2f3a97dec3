//! What netbench shares with s3bench (bench/s3bench): servers as child
//! processes, their CPU time read from /proc, the descriptor limit raised.
//! The rest of netbench is its binary.

pub mod child;
