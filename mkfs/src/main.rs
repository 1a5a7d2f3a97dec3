//! mkfs.pktfs: create (or re-create, with --force) a pktfs image.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use layout::{Geometry, GeometryParams};
use pktfs::media::space::human_bytes as human;
use pktfs::{FormatOptions, Volume};

#[derive(Parser, Debug)]
#[command(
    name = "mkfs.pktfs",
    version,
    about = "Create a pktfs image (a file, a file on /dev/shm, or a DAX device)"
)]
struct Args {
    /// Image file to create or format.
    image: PathBuf,
    /// Image size, e.g. 64M, 4G (default: the existing file's size, else 4G).
    #[arg(long, value_parser = parse_size)]
    size: Option<u64>,
    /// Packet buffer size in bytes (power of two, 512..1M).
    #[arg(long, default_value_t = 2048)]
    buffer_size: u32,
    /// Number of inodes (default: one per 16 KiB).
    #[arg(long)]
    inodes: Option<u32>,
    /// Number of packet-metadata records (default: one per buffer plus two per inode).
    #[arg(long)]
    records: Option<u64>,
    /// Volume label (up to 31 bytes).
    #[arg(long)]
    label: Option<String>,
    /// Format even if the file holds a pktfs image or other data.
    #[arg(short, long)]
    force: bool,
    /// Print only errors.
    #[arg(short, long)]
    quiet: bool,
}

fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => {
            let m = match s[i..]
                .to_ascii_uppercase()
                .trim_end_matches("IB")
                .trim_end_matches('B')
            {
                "" => 1u64,
                "K" => 1 << 10,
                "M" => 1 << 20,
                "G" => 1 << 30,
                "T" => 1 << 40,
                other => return Err(format!("unknown size suffix {other:?} (use K, M, G or T)")),
            };
            (&s[..i], m)
        }
        None => (s, 1),
    };
    let n: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s} is too large"))
}

/// Why the existing contents forbid formatting without --force, if they do.
fn existing_contents(path: &Path) -> Result<Option<String>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if meta.is_dir() {
        return Err(format!("{} is a directory", path.display()));
    }
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut head = vec![0u8; 1 << 16];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    head.truncate(n);
    if layout::superblock::has_magic(&head) {
        let what = match layout::Superblock::from_bytes(&head, 0, meta.len()) {
            Ok(sb) => format!(
                "a pktfs image ({} bytes, {} inodes, mounted {} times)",
                sb.geometry.image_len_bytes, sb.geometry.inode_count, sb.mount_count
            ),
            Err(_) => "what looks like a (damaged) pktfs image".to_string(),
        };
        return Ok(Some(what));
    }
    if head.iter().any(|&b| b != 0) {
        return Ok(Some(format!("{} bytes of other data", meta.len())));
    }
    Ok(None)
}

fn print_geometry(g: &Geometry) {
    println!(
        "image          {} ({} bytes)",
        human(g.image_len_bytes),
        g.image_len_bytes
    );
    println!(
        "packet buffers {} x {} B = {} at offset {}",
        g.buffer_count,
        g.buffer_size_bytes,
        human(g.buffer_region_bytes()),
        g.buffer_offset
    );
    println!(
        "records        {} x 64 B = {} at offset {}",
        g.record_count,
        human((g.record_count + 1) * 64),
        g.record_offset
    );
    println!(
        "inodes         {} x 192 B = {} at offset {}",
        g.inode_count,
        human((g.inode_count as u64 + 1) * 192),
        g.inode_offset
    );
    println!(
        "journal        {} slots x {} B at offset {}",
        g.journal_slots, g.journal_slot_bytes, g.journal_offset
    );
}

fn run(a: Args) -> Result<(), String> {
    if let Some(why) = existing_contents(&a.image)? {
        if !a.force {
            return Err(format!(
                "{} already holds {why}; refusing to format it (use --force to destroy its contents)",
                a.image.display()
            ));
        }
    }
    let existing_len = std::fs::metadata(&a.image).map(|m| m.len()).unwrap_or(0);
    let size = a.size.unwrap_or(if existing_len > 0 {
        existing_len
    } else {
        4 << 30
    });
    let params = GeometryParams {
        image_len_bytes: size,
        buffer_size_bytes: a.buffer_size,
        inode_count: a.inodes,
        record_count: a.records,
    };
    // Check the geometry before touching the file.
    Geometry::compute(&params).map_err(|e| format!("cannot lay out {}: {e}", a.image.display()))?;
    let bar = if !a.quiet && std::io::stderr().is_terminal() {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "formatting {bar:40} {bytes}/{total_bytes} ({eta})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    let mut progress = |done: u64, total: u64| {
        if let Some(b) = &bar {
            b.set_length(total);
            b.set_position(done);
        }
    };
    let g = Volume::format(
        &a.image,
        &FormatOptions {
            params,
            label: a.label.clone(),
        },
        &mut progress,
    )
    .map_err(|e| e.to_string())?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if !a.quiet {
        println!("formatted {}", a.image.display());
        print_geometry(&g);
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mkfs.pktfs: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("x").is_err());
        assert!(parse_size("99999999999T").is_err());
    }
}
