//! A small ingest server on pktfs: every TCP connection becomes one file,
//! received straight into the image's packet buffers and durable before the
//! next chunk is read. Run it:
//!
//!     cargo run -p pktfs-netpath --example ingest -- /dev/shm/ingest.img 127.0.0.1:9000 3
//!     nc -N 127.0.0.1 9000 < somefile      # three times
//!
//! Arguments: IMAGE (created, 256 MiB, if missing), ADDR, and how many
//! connections to take before closing the image cleanly.

use std::net::TcpListener;
use std::sync::Arc;

use pktfs_fs::{FormatOptions, OpenOptions, Volume};
use pktfs_netpath::receive::to_file::{recv_to_file, CommitPolicy, RecvMode, RecvOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (image, addr) = (std::path::Path::new(&args[1]), &args[2]);
    let count: usize = args.get(3).map_or(Ok(1), |n| n.parse())?;
    if !image.exists() {
        let params = pktfs_layout::GeometryParams::for_size(256 << 20);
        Volume::format(
            image,
            &FormatOptions {
                params,
                label: None,
            },
            &mut |_, _| {},
        )?;
    }
    let vol = Arc::new(Volume::open(image, &OpenOptions::default())?);
    let listener = TcpListener::bind(addr)?;
    println!("ingest: listening on {}", listener.local_addr()?);
    let mut workers = Vec::new();
    for (n, conn) in listener.incoming().take(count).enumerate() {
        let (sock, vol) = (conn?, vol.clone());
        workers.push(std::thread::spawn(move || {
            let opts = RecvOptions {
                mode: RecvMode::CreateOnly,
                commit: CommitPolicy::EveryChunk,
                ..Default::default()
            };
            let path = format!("/conn-{n}");
            match recv_to_file(&vol, &sock, &path, &opts) {
                Ok(r) => println!(
                    "ingest: {path}: {} bytes, {} records, crc32c {:08x}",
                    r.bytes, r.records, r.crc32c
                ),
                Err(e) => eprintln!("ingest: {path}: {e}"),
            }
        }));
    }
    for w in workers {
        w.join().map_err(|_| "a worker panicked")?;
    }
    Arc::try_unwrap(vol).map_err(|_| "still shared")?.close()?;
    Ok(())
}
