//! Crash injection over the S3 endpoint's commits, through the real
//! endpoint on a recording image: PutObject (its metadata onto the unnamed
//! file, then the name with the last pieces), CopyObject (records sharing
//! the source's buffers, metadata, name), UploadPart and UploadPartCopy
//! (unnamed parts), CompleteMultipartUpload (the parts' records moved into
//! one file, metadata, name), a PutObject replacing an object and a
//! CreateBucket by a key that owns what it makes (the directory born with
//! its owner in the mkdir's commit). Every
//! crash state (Chipmunk-style: at every fence, subsets of the lines in
//! flight) must pass fsck, recover to the tree before or after the request
//! in flight (bytes, `user.s3` metadata and all), keep the Volume's
//! invariants (every buffer reference a record's: nothing shared and
//! unreferenced) and survive the usability pass.

use std::sync::Arc;

use pktfs_fs::Volume;
use pktfs_s3::keys::{Grant, KeyStore};
use pktfs_s3::sigv4::{PayloadMode, Signer};
use pktfs_testkit::net_common::{serve, Conn, Response};
use pktfs_testkit::s3_common::{now_s, signed};
use pktfs_tests::model::crash::{full_mode, record_shared, Explore, Explorer};
use pktfs_tests::model::{dump, Tree};

const REGION: &str = "us-east-1";

/// A fresh image with the bucket `bkt` and a key that may write it and
/// create buckets (with its id).
fn base() -> (Arc<Vec<u8>>, Signer, String) {
    let mut pm =
        Volume::format_in_memory(pktfs_layout::GeometryParams::for_size(16 << 20)).expect("format");
    let v = Volume::open_pm(pktfs_fs::media::Pm::from_bytes(pm.snapshot()), false).unwrap();
    v.mkdir(v.root(), b"bkt", 0o755, 0, 0).unwrap();
    let mut ks = KeyStore::default();
    let k = ks
        .add(
            "w",
            vec!["bkt=rw".parse::<Grant>().unwrap()],
            &[3u8; 64],
            now_s(),
        )
        .unwrap()
        .clone();
    ks.set_create_buckets(&k.id, true).unwrap();
    v.set_s3_keys_blob(Some(&ks.encode())).unwrap();
    let mut v = v;
    let img = v.snapshot();
    drop(v);
    (Arc::new(img), Signer::new(&k.id, &k.secret, REGION), k.id)
}

fn sha(body: &[u8]) -> PayloadMode {
    PayloadMode::Sha256(pktfs_s3::sigv4::sha256(body))
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

/// One request, answered.
fn ask(c: &mut Conn, req: Vec<u8>) -> Response {
    c.send(&req);
    c.response(false).expect("an answer")
}

fn ok(r: &Response, what: &str) -> String {
    assert!(
        r.status == 200,
        "{what}: {} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    String::from_utf8_lossy(&r.body).into_owned()
}

/// The requests, one step each; `step(k)` marks the image's log before
/// request `k`, and `after(k)` sees the Volume after it.
fn workload(
    vol: &Arc<Volume>,
    key: &Signer,
    step: &dyn Fn(u64),
    after: &mut dyn FnMut(&Volume),
) -> Result<(), String> {
    let tmp = tempfile::tempdir_in("/dev/shm").map_err(|e| e.to_string())?;
    let mut srv = serve(tmp, vol.clone(), |c| {
        c.http_listen = None;
        c.s3_listen = Some("127.0.0.1:0".parse().unwrap());
        if c.io == pktfs_netpath::IoMode::Threads {
            c.io = pktfs_netpath::IoMode::Auto;
        }
    });
    let addr = srv.svc.as_ref().unwrap().s3_addr().expect("an S3 listener");
    let mut c = Conn::new(addr);
    let k = Some(key);
    let put = |path: &str, body: &[u8], extra: &[(&str, &str)]| {
        signed(k, "PUT", path, "", extra, body, sha(body))
    };
    let empty = sha(b"");

    step(0);
    let o1 = bytes(100_000, 1);
    ok(
        &ask(
            &mut c,
            put("/bkt/obj1", &o1, &[("x-amz-meta-colour", "blue")]),
        ),
        "PutObject",
    );
    after(vol);

    step(1);
    let copy = signed(
        k,
        "PUT",
        "/bkt/obj2",
        "",
        &[("x-amz-copy-source", "/bkt/obj1")],
        b"",
        empty,
    );
    ok(&ask(&mut c, copy), "CopyObject");
    after(vol);

    step(2);
    let made = ok(
        &ask(
            &mut c,
            signed(k, "POST", "/bkt/big", "uploads=", &[], b"", empty),
        ),
        "Create",
    );
    let id = made
        .split("<UploadId>")
        .nth(1)
        .and_then(|r| r.split("</UploadId>").next())
        .expect("an upload id")
        .to_string();
    let mut etags = Vec::new();
    // One part of the least size S3 allows for a part that is not the
    // last, then the last one copied (below).
    for n in 1..=1u32 {
        let part = bytes(5 << 20, 10 + n as u8);
        let q = format!("partNumber={n}&uploadId={id}");
        let r = ask(
            &mut c,
            signed(k, "PUT", "/bkt/big", &q, &[], &part, sha(&part)),
        );
        ok(&r, "UploadPart");
        etags.push(r.header("etag").expect("a part's ETag").to_string());
    }
    after(vol);

    step(3);
    let q = format!("partNumber=2&uploadId={id}");
    let pc = signed(
        k,
        "PUT",
        "/bkt/big",
        &q,
        &[
            ("x-amz-copy-source", "/bkt/obj1"),
            ("x-amz-copy-source-range", "bytes=100-60099"),
        ],
        b"",
        empty,
    );
    let body = ok(&ask(&mut c, pc), "UploadPartCopy");
    let tag = body
        .split("<ETag>")
        .nth(1)
        .and_then(|r| r.split("</ETag>").next())
        .expect("the copied part's ETag")
        .replace("&quot;", "\"");
    etags.push(tag);
    after(vol);

    step(4);
    let mut xml = String::from("<CompleteMultipartUpload>");
    for (n, t) in etags.iter().enumerate() {
        xml.push_str(&format!(
            "<Part><PartNumber>{}</PartNumber><ETag>{t}</ETag></Part>",
            n + 1
        ));
    }
    xml.push_str("</CompleteMultipartUpload>");
    let q = format!("uploadId={id}");
    let r = ask(
        &mut c,
        signed(
            k,
            "POST",
            "/bkt/big",
            &q,
            &[],
            xml.as_bytes(),
            sha(xml.as_bytes()),
        ),
    );
    ok(&r, "CompleteMultipartUpload");
    after(vol);

    step(5);
    let o1b = bytes(70_000, 2);
    ok(
        &ask(
            &mut c,
            put("/bkt/obj1", &o1b, &[("content-type", "text/plain")]),
        ),
        "PutObject (replace)",
    );
    after(vol);

    step(6);
    ok(&ask(&mut c, put("/owned", b"", &[])), "CreateBucket");
    after(vol);

    drop(c);
    srv.stop();
    Ok(())
}

#[test]
fn crash_states_of_the_s3_commits_are_before_or_after_each_request() {
    let (base, key, key_id) = base();
    // The trees, from the same requests on a copy that does not record:
    // the tree before each request, and at the end.
    let plain =
        Arc::new(Volume::open_pm(pktfs_fs::media::Pm::from_bytes(base.to_vec()), false).unwrap());
    let mut trees: Vec<Tree> = vec![dump(&plain).unwrap()];
    workload(&plain, &key, &|_| {}, &mut |v| trees.push(dump(v).unwrap())).unwrap();
    drop(plain);
    assert_eq!(trees.len(), 8);
    assert_eq!(
        trees[7].0["/owned"]
            .xattrs
            .get(pktfs_fs::S3_OWNER_XATTR)
            .map(Vec::as_slice),
        Some(key_id.as_bytes()),
        "the bucket is born owned"
    );
    assert!(
        trees[5].0.contains_key("/bkt/big"),
        "the multipart object is made"
    );

    let w = record_shared("s3 commits", base, trees, |v, step| {
        workload(v, &key, step, &mut |_| {})
    })
    .unwrap();
    let mut ex = Explorer::new(Explore {
        small: if full_mode() { 32 } else { 8 },
        ..Explore::default()
    });
    ex.explore(&w);
    println!("{}", ex.stats.summary("crash_s3"));
    assert!(
        ex.stats.failures.is_empty(),
        "{} crash states failed; first: {}",
        ex.stats.failures.len(),
        ex.stats.failures[0]
    );
}
