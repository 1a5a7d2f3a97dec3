//! Namespace changes from several threads at once, without sockets: what
//! the FUSE mount's worker threads and netpath's connections get when they
//! change different directories, or the same one.

use std::path::Path;
use std::time::Instant;

use pktfs_fs::media::PersistChoice;
use pktfs_fs::RenameFlags;

/// Rounds per layout (the median is reported), and create + rename +
/// unlink cycles per thread in each.
const ROUNDS: usize = 5;
const CYCLES: usize = 20_000;

/// Namespace changes per second (create, rename in the directory, unlink:
/// three changes a cycle, each a durable commit, clwb) by one thread, by
/// one thread per CPU each in a directory of its own, and by as many in
/// one shared directory. The layouts take turns within each round.
pub fn ns_scaling(dir: &Path, results: &mut crate::results::Results) {
    let p = dir.join("ns.img");
    let v = crate::volume_costs::new_volume(&p, PersistChoice::Clwb);
    let cpus = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    let dirs: Vec<u64> = (0..cpus)
        .map(|k| {
            v.mkdir(v.root(), format!("d{k}").as_bytes(), 0o755, 0, 0)
                .expect("mkdir")
                .ino
        })
        .collect();
    let layouts: [(&str, usize, bool); 3] = [
        ("1 thread", 1, false),
        ("threads in their own directories", cpus, false),
        ("threads in one directory", cpus, true),
    ];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); layouts.len()];
    for round in 0..ROUNDS {
        for k in 0..layouts.len() {
            let (_, threads, shared) = layouts[(k + round) % layouts.len()];
            let t0 = Instant::now();
            std::thread::scope(|sc| {
                for t in 0..threads {
                    let (v, d) = (&v, dirs[if shared { 0 } else { t }]);
                    sc.spawn(move || {
                        for i in 0..CYCLES {
                            let a = format!("t{t}.{i}");
                            let b = format!("t{t}.{i}.r");
                            v.create(d, a.as_bytes(), 0o644, 0, 0).expect("create");
                            v.rename(d, a.as_bytes(), d, b.as_bytes(), RenameFlags::default())
                                .expect("rename");
                            v.unlink(d, b.as_bytes()).expect("unlink");
                        }
                    });
                }
            });
            let changes = (3 * CYCLES * threads) as f64;
            rates[(k + round) % layouts.len()].push(changes / t0.elapsed().as_secs_f64());
        }
    }
    drop(v);
    let _ = std::fs::remove_file(&p);
    let mut median = Vec::new();
    for (k, (what, threads, _)) in layouts.iter().enumerate() {
        rates[k].sort_by(f64::total_cmp);
        median.push(rates[k][ROUNDS / 2]);
        results.push((
            format!("namespace changes/s (create, rename, unlink; clwb), {threads} x {what}"),
            "pktfs Volume".into(),
            median[k],
            "changes/s".into(),
        ));
    }
    for (k, what) in [(1, "own directories"), (2, "one directory")] {
        results.push((
            format!("namespace changes/s, {cpus} threads in {what} / 1 thread"),
            "pktfs Volume".into(),
            median[k] / median[0],
            "x".into(),
        ));
    }
}
