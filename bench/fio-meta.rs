//! The metadata row of bench/fio.sh: create, stat and unlink N empty files
//! in one directory, one at a time (open(O_CREAT)+close, stat, unlink),
//! and print each phase's rate in files per second. fio's filecreate /
//! filestat / filedelete engines do the same calls, but fio's own per-file
//! bookkeeping grows with the file count and dominates at 100,000 files
//! (even on tmpfs, fio then measures itself), so this small program is
//! used instead. std only; built with rustc by bench/fio.sh.
//!
//!   fio-meta DIR N [MAX_SECONDS]
//!
//! MAX_SECONDS caps each phase (a slow file system creates fewer files;
//! stat and unlink then cover what was created).

use std::time::{Duration, Instant};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 3 {
        eprintln!("usage: fio-meta DIR N [MAX_SECONDS]");
        std::process::exit(2);
    }
    let dir = std::path::PathBuf::from(&a[1]);
    let n: usize = a[2].parse().expect("N");
    let cap = Duration::from_secs_f64(
        a.get(3)
            .map(|s| s.parse().expect("MAX_SECONDS"))
            .unwrap_or(1e9),
    );
    std::fs::create_dir_all(&dir).expect("directory");
    let name = |i: usize| dir.join(format!("f.{i}"));

    let t = Instant::now();
    let mut made = 0;
    while made < n && t.elapsed() < cap {
        drop(std::fs::File::create(name(made)).expect("create"));
        made += 1;
    }
    println!("create {:.0}", made as f64 / t.elapsed().as_secs_f64());

    let t = Instant::now();
    let mut done = 0;
    while done < made && t.elapsed() < cap {
        std::fs::metadata(name(done)).expect("stat");
        done += 1;
    }
    println!("stat {:.0}", done as f64 / t.elapsed().as_secs_f64());

    let t = Instant::now();
    let mut done = 0;
    while done < made && t.elapsed() < cap {
        std::fs::remove_file(name(done)).expect("unlink");
        done += 1;
    }
    println!("delete {:.0}", done as f64 / t.elapsed().as_secs_f64());
    // Whatever the cap left behind.
    for i in done..made {
        let _ = std::fs::remove_file(name(i));
    }
    eprintln!("{made} files");
}
