//! The mapping's own tests: opening, copying in every mode, the publish
//! tracker, the heap backend, refusals.

use super::*;

#[test]
fn waiting_for_the_prefault_ends_and_can_be_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("img");
    std::fs::write(&p, vec![0u8; 8 << 20]).unwrap();
    let pm = Pm::open(&p, &MapOptions::default()).unwrap();
    pm.wait_populated();
    assert!(pm.populate.lock().unwrap().is_none(), "joined");
    pm.wait_populated();
    pm.write(4096, b"after");
    assert_eq!(pm.slice(4096, 5), b"after");
    let quiet = Pm::open(
        &dir.path().join("img"),
        &MapOptions {
            no_populate: true,
            read_only: true,
            no_lock: true,
            ..Default::default()
        },
    )
    .unwrap();
    quiet.wait_populated();
}

#[test]
fn write_read_publish_roundtrip_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("img");
    std::fs::write(&p, vec![0u8; 1 << 20]).unwrap();
    let pm = Pm::open(&p, &MapOptions::default()).unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    pm.write_nt(4096 + 3, &data);
    pm.fence();
    pm.debug_assert_persisted(4096 + 3, data.len() as u64);
    pm.publish_u64(64, 0xdead_beef);
    assert_eq!(pm.read_u64(64), 0xdead_beef);
    assert_eq!(pm.slice(4096 + 3, data.len()), &data[..]);
    // A second writable open is refused while the first holds the lock.
    assert!(matches!(
        Pm::open(&p, &MapOptions::default()),
        Err(MediaError::Locked { .. })
    ));
    drop(pm);
    let pm = Pm::open(
        &p,
        &MapOptions {
            persist: PersistChoice::Msync,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(pm.read_u64(64), 0xdead_beef);
    assert_eq!(pm.mode(), PersistMode::Msync);
}

#[test]
fn every_mode_copies_correctly() {
    for mode in [
        PersistChoice::Clwb,
        PersistChoice::Clflushopt,
        PersistChoice::Clflush,
        PersistChoice::Msync,
        PersistChoice::Eadr,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");
        std::fs::write(&p, vec![0u8; 1 << 20]).unwrap();
        if !mode.write_back_insn().is_none_or(FlushInsn::available) {
            // A CPU without the instruction: the open is refused.
            let r = Pm::open(
                &p,
                &MapOptions {
                    persist: mode,
                    ..Default::default()
                },
            );
            assert!(
                matches!(r, Err(MediaError::FlushUnavailable(_))),
                "{mode:?}"
            );
            continue;
        }
        let pm = Pm::open(
            &p,
            &MapOptions {
                persist: mode,
                ..Default::default()
            },
        )
        .unwrap();
        if let Some(i) = mode.write_back_insn() {
            assert_eq!(pm.flush_insn(), i);
            assert_eq!(pm.persistence().to_string(), i.name());
        }
        for (off, len) in [(0u64, 1usize), (17, 5000), (64, 64), (4095, 70_000)] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + off as usize) as u8).collect();
            pm.write_nt(off, &data);
            pm.persist(off, len as u64);
            assert_eq!(pm.slice(off, len), &data[..]);
        }
    }
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "not durable")]
fn tracker_catches_publish_before_persist() {
    let pm = Pm::from_bytes(vec![0; 1 << 16]);
    pm.write(128, &[1; 64]);
    pm.debug_assert_persisted(128, 64);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "no fence yet on the flushing thread")]
fn tracker_a_fence_on_another_thread_does_not_complete_a_flush() {
    let pm = Pm::from_bytes(vec![0; 1 << 16]);
    std::thread::scope(|s| {
        s.spawn(|| {
            pm.write(128, &[1; 64]);
            pm.flush(128, 64);
        });
    });
    // Another thread's fence: on hardware it orders only its own core's
    // write-backs, and Pm::fence issues only its own thread's queue.
    pm.fence();
    pm.debug_assert_persisted(128, 64);
}

#[test]
#[cfg(debug_assertions)]
fn tracker_durable_bytes_stay_durable_when_a_neighbour_flushes_their_line() {
    let pm = Pm::from_bytes(vec![0; 1 << 16]);
    pm.write(128, &[1; 32]);
    pm.persist(128, 32);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Another thread writes the rest of the line and flushes it,
            // not yet fenced: the bytes above were durable already.
            pm.write(160, &[2; 32]);
            pm.flush(160, 32);
            pm.debug_assert_persisted(128, 32);
            pm.fence();
            pm.debug_assert_persisted(128, 64);
        });
    });
}

#[test]
#[cfg(debug_assertions)]
fn tracker_a_fence_completes_lines_other_threads_also_flushed() {
    let pm = Pm::from_bytes(vec![0; 1 << 16]);
    std::thread::scope(|s| {
        s.spawn(|| {
            pm.write(128, &[1; 64]);
            pm.flush(128, 64);
        });
    });
    // This thread writes the same line again and persists it: the line's
    // write-back carries both writes.
    pm.write(128, &[3; 8]);
    pm.persist(128, 8);
    pm.debug_assert_persisted(128, 64);
}

#[test]
#[cfg(target_arch = "x86_64")]
fn small_flushes_wait_for_the_fence_on_a_write_back_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("img");
    std::fs::write(&p, vec![0u8; 1 << 20]).unwrap();
    // clflush: every x86-64 CPU has it, and it is written back the same way
    // as clwb and clflushopt (the mode is the same; only the instruction
    // differs).
    let pm = Pm::open(
        &p,
        &MapOptions {
            persist: PersistChoice::Clflush,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(pm.mode(), PersistMode::Clwb);
    pm.write(4096, &[7; 100]);
    pm.flush(4096, 100);
    pm.write(8192, &[8; 64]);
    pm.flush(8192, 64);
    pm.flush(1 << 19, 64 << 10);
    assert_eq!(
        pm.writebacks.mine(),
        vec![(4096, 100), (8192, 64)],
        "the small ranges are queued, the large one went at once"
    );
    pm.fence();
    assert!(
        pm.writebacks.mine().is_empty(),
        "the fence issued the queue"
    );
    pm.debug_assert_persisted(4096, 100);
    pm.debug_assert_persisted(8192, 64);
    pm.write(12288, &[9; 64]);
    pm.flush(12288, 64);
    // Dropping the mapping writes back what was queued and not fenced.
    drop(pm);
    assert_eq!(std::fs::read(&p).unwrap()[12288], 9);
}

#[test]
fn heap_backend_is_page_aligned() {
    for len in [8192usize, 1 << 16, (1 << 20) + 64] {
        let img: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let mut pm = Pm::from_bytes(img.clone());
        assert_eq!(
            pm.base as usize % HEAP_ALIGN,
            0,
            "heap image of {len} bytes"
        );
        assert_eq!(pm.snapshot(), img);
        let rec = Pm::recording(img);
        assert_eq!(rec.base as usize % HEAP_ALIGN, 0);
    }
}

#[test]
fn refuses_tiny_and_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("small");
    std::fs::write(&p, [0u8; 100]).unwrap();
    assert!(matches!(
        Pm::open(&p, &MapOptions::default()),
        Err(MediaError::TooSmall { .. })
    ));
    assert!(matches!(
        Pm::open(&dir.path().join("nope"), &MapOptions::default()),
        Err(MediaError::Io { .. })
    ));
}

#[test]
fn refuses_what_cannot_be_an_image_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let ro = MapOptions {
        read_only: true,
        ..Default::default()
    };
    let kind = |r: Result<Pm, MediaError>| match r {
        Err(MediaError::NotAnImage { kind, .. }) => kind,
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("mapped"),
    };
    assert_eq!(kind(Pm::open(dir.path(), &ro)), "a directory");
    assert_eq!(
        kind(Pm::open(dir.path(), &MapOptions::default())),
        "a directory"
    );
    assert_eq!(kind(Pm::create(dir.path(), 1 << 20)), "a directory");
    // Opening a FIFO for reading would wait for a writer forever.
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {fifo:?}");
    assert_eq!(kind(Pm::open(&fifo, &ro)), "a FIFO");
    assert_eq!(kind(Pm::create(&fifo, 1 << 20)), "a FIFO");
    assert!(fifo.exists(), "an existing FIFO is left alone");
    let null = Path::new("/dev/null");
    if null.exists() {
        assert_eq!(
            kind(Pm::open(null, &ro)),
            "a character device that is not a DAX device"
        );
    }
}
