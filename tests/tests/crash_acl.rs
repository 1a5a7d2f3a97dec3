//! Crash injection (as crash_ops) over ACL operations: setting a default
//! ACL, creating files and directories that inherit it (their ACL records
//! are written before the commit that names them), setting an access ACL
//! with the mode change it implies, chmod under an ACL, and an ACL the
//! mode expresses replacing a stored one. Every crash state must recover
//! to the model before or after the operation in flight: a new inode
//! never appears without its inherited ACL, and a mode never without the
//! ACL it was set with.

use pktfs_tests::model::ace::seeded;
use pktfs_tests::model::crash::{full_mode, record, Explore, Explorer};
use pktfs_tests::model::Op;

const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
const NONE: u32 = u32::MAX;

fn p(s: &str) -> String {
    s.to_string()
}

#[test]
fn crash_acl_ops() {
    let (base, model) = seeded();
    let default = Op::SetAcl {
        path: p("/A"),
        default: true,
        entries: vec![
            (USER_OBJ, 7, NONE),
            (USER, 7, 1001),
            (GROUP_OBJ, 5, NONE),
            (MASK, 7, NONE),
            (OTHER, 0, NONE),
        ],
    };
    let workloads: Vec<(&str, Vec<Op>)> = vec![
        (
            "inherit",
            vec![
                default.clone(),
                Op::Create {
                    path: p("/A/inherits"),
                    perm: 0o666,
                },
                Op::Mkdir {
                    path: p("/A/subdir"),
                    perm: 0o777,
                },
                Op::Create {
                    path: p("/A/subdir/deeper"),
                    perm: 0o640,
                },
                Op::Symlink {
                    path: p("/A/link"),
                    target: p("inherits"),
                },
            ],
        ),
        (
            "access",
            vec![
                Op::SetAcl {
                    path: p("/A/foo"),
                    default: false,
                    entries: vec![
                        (USER_OBJ, 6, NONE),
                        (GROUP, 6, 50),
                        (GROUP_OBJ, 4, NONE),
                        (MASK, 6, NONE),
                        (OTHER, 0, NONE),
                    ],
                },
                Op::Chmod {
                    path: p("/A/foo"),
                    perm: 0o4750,
                },
                // The mode says all of this one: the stored ACL goes.
                Op::SetAcl {
                    path: p("/A/foo"),
                    default: false,
                    entries: vec![(USER_OBJ, 6, NONE), (GROUP_OBJ, 4, NONE), (OTHER, 4, NONE)],
                },
                // Removing a default ACL with an empty one.
                default,
                Op::SetAcl {
                    path: p("/A"),
                    default: true,
                    entries: vec![],
                },
            ],
        ),
    ];
    let mut ex = Explorer::new(Explore {
        small: if full_mode() { 48 } else { 16 },
        ..Explore::default()
    });
    for (name, ops) in &workloads {
        let w = record(name, base.clone(), model, ops).unwrap_or_else(|e| panic!("{e}"));
        ex.explore(&w);
    }
    println!("{}", ex.stats.summary("crash_acl"));
    for f in ex.stats.failures.iter().take(5) {
        println!("FAILURE: {f}\n");
    }
    assert!(
        ex.stats.failures.is_empty(),
        "{} crash states failed (first shown above)",
        ex.stats.failures.len()
    );
    assert!(
        ex.stats.images_checked > 0 && ex.stats.matched_after > 0,
        "no crash state was checked"
    );
}
