//! Where does open time go?
//!   cargo run --release -p pktfs-fs --example open_profile IMAGE [make N]
use std::time::Instant;
fn main() {
    let p = std::path::PathBuf::from(std::env::args().nth(1).expect("IMAGE"));
    if std::env::args().nth(2).as_deref() == Some("make") {
        let n: u64 = std::env::args()
            .nth(3)
            .map(|s| s.parse().unwrap())
            .unwrap_or(1_000_000);
        let params = pktfs_layout::GeometryParams {
            image_len_bytes: 512 << 20,
            buffer_size_bytes: 2048,
            inode_count: Some(4096),
            record_count: Some(n + 10_000),
        };
        pktfs_fs::Volume::format(
            &p,
            &pktfs_fs::FormatOptions {
                params,
                label: None,
            },
            &mut |_, _| {},
        )
        .unwrap();
        let v = pktfs_fs::Volume::open(&p, &Default::default()).unwrap();
        for i in 0..1000u64 {
            let f = v
                .create(v.root(), format!("r{i}").as_bytes(), 0o644, 0, 0)
                .unwrap();
            for k in 0..n / 1000 - 1 {
                v.write(f.ino, k * 64, &[k as u8; 64]).unwrap();
            }
        }
        v.close().unwrap();
    }
    for _ in 0..3 {
        let t = Instant::now();
        let pm = pktfs_fs::media::Pm::open(&p, &Default::default()).unwrap();
        let t_map = t.elapsed();
        let v = pktfs_fs::Volume::open_pm(pm, false).unwrap();
        println!(
            "map+populate {:?}  total {:?}  records {}",
            t_map,
            t.elapsed(),
            v.open_report().records
        );
    }
}
