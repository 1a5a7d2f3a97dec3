//! Crash injection (as crash_ops) over the S3 access key store
//! (`Volume::set_s3_keys_blob`, a hidden xattr of the root: one record
//! written, then one publish, with no ctime change and so no attribute
//! slot): created, replaced by a larger value (whole buffers), replaced by
//! a small one, removed, and set again. Every crash state must pass fsck,
//! recover to the (unchanged) client-visible tree and survive the
//! usability pass, and its key store must be exactly the one before or
//! after the step in flight: never torn, never a mix, never lost.

use pktfs_fs::media::Pm;
use pktfs_fs::Volume;
use pktfs_tests::model::ace::seeded;
use pktfs_tests::model::crash::{
    for_each_point, full_mode, record_custom, subsets, Explore, Explorer,
};

fn blob(tag: u8, len: usize) -> Vec<u8> {
    let mut b = format!("{{\"version\":1,\"tag\":{tag},\"pad\":\"").into_bytes();
    b.extend((0..len).map(|k| b'a' + ((k as u8).wrapping_mul(7).wrapping_add(tag) % 26)));
    b.extend_from_slice(b"\"}");
    b
}

#[test]
fn crash_key_store_updates() {
    let (base, model) = seeded();
    // The store after each step: steps[k] is what step k sets.
    let steps: Vec<Option<Vec<u8>>> = vec![
        Some(blob(1, 100)),
        Some(blob(2, 5000)),
        Some(blob(3, 40)),
        None,
        Some(blob(4, 300)),
    ];
    // The client-visible tree never changes: the store is hidden.
    let trees = vec![model.tree(); steps.len() + 1];
    let w = record_custom("key store", base.clone(), trees, |v, step| {
        for (k, b) in steps.iter().enumerate() {
            step(k as u64);
            v.set_s3_keys_blob(b.as_deref())
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    })
    .unwrap();
    let mut ex = Explorer::new(Explore {
        small: if full_mode() { 48 } else { 16 },
        ..Explore::default()
    });
    ex.explore(&w);
    println!("{}", ex.stats.summary("crash_keys"));
    assert!(
        ex.stats.failures.is_empty(),
        "{} crash states failed; first: {}",
        ex.stats.failures.len(),
        ex.stats.failures[0]
    );

    // The store itself, at every crash state: before or after the step in
    // flight (`before[k]`: the store before step k).
    let mut before: Vec<Option<Vec<u8>>> = vec![None];
    before.extend(steps.iter().cloned());
    let n = steps.len() as u64;
    let (mut checked, mut saw_after) = (0u64, 0u64);
    let mut bad: Vec<String> = Vec::new();
    for_each_point(base, &w.events, |p| {
        let allowed: Vec<&Option<Vec<u8>>> = match p.last_mark {
            None => vec![&before[0]],
            Some(k) if k >= n => vec![&before[n as usize]],
            Some(k) => vec![&before[k as usize], &before[k as usize + 1]],
        };
        for chosen in subsets(p, w.buffer_offset, 16) {
            let v = match Volume::open_pm(Pm::from_bytes(p.image_with(&chosen)), false) {
                Ok(v) => v,
                Err(e) => {
                    bad.push(format!("mark {:?}: recovery failed: {e}", p.last_mark));
                    continue;
                }
            };
            checked += 1;
            match v.s3_keys_blob() {
                Ok(got) if allowed.iter().any(|a| **a == got) => {
                    if allowed.len() == 2 && got == *allowed[1] && allowed[0] != allowed[1] {
                        saw_after += 1;
                    }
                }
                Ok(got) => bad.push(format!(
                    "mark {:?}, fence {} ({}): the store is {:?}, neither before nor after",
                    p.last_mark,
                    p.fence,
                    if p.pre { "before it" } else { "after it" },
                    got.map(|b| String::from_utf8_lossy(&b[..b.len().min(40)]).into_owned())
                )),
                Err(e) => bad.push(format!("mark {:?}: reading the store: {e}", p.last_mark)),
            }
        }
        bad.len() < 10
    });
    println!("crash_keys: {checked} store states checked, {saw_after} with the step done");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(
        checked > 0 && saw_after > 0,
        "the walk saw no step complete"
    );
}
