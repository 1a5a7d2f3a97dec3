//! UploadPartCopy: a part that is a range of another object, made of
//! records naming the source's buffers (no byte copied), with the MD5 of
//! its bytes as its ETag and, when the upload declared one, its checksum;
//! ListParts and CompleteMultipartUpload take it as an uploaded part. And
//! the regression it replaces: an UploadPart carrying x-amz-copy-source
//! was answered 200 with a 0-byte part.

use pktfs_s3::checksum::{multipart_etag, Value};
use pktfs_s3::keys::{Grant, KeyStore};
use pktfs_s3::sigv4::Signer;

use super::{
    code, complete_body, create_upload, list_parts, md5, md5_etag, now_s, ok, xml_field, REGION, S3,
};

const MIB: usize = 1 << 20;

/// UploadPartCopy of `src` into part `n` of upload `id` of `path`.
fn part_copy(
    s: &S3,
    who: &Signer,
    path: &str,
    id: &str,
    n: u32,
    src: &str,
    extra: &[(&str, &str)],
) -> super::Response {
    let mut h = vec![("x-amz-copy-source", src)];
    h.extend_from_slice(extra);
    s.req_with(
        who,
        "PUT",
        path,
        &format!("partNumber={n}&uploadId={id}"),
        &h,
        b"",
    )
}

/// The image byte ranges a file's records name, with their receive
/// times: (image offset, length, received, time).
fn slices(s: &S3, path: &str) -> Vec<(u64, u64, bool, u64)> {
    let ino = s.srv.lookup(path).unwrap().ino;
    s.srv
        .vol
        .chain(ino)
        .unwrap()
        .iter()
        .map(|e| (e.image_off, e.len as u64, e.from_network, e.timestamp_ns))
        .collect()
}

/// Every record of `copy` names bytes some record of `src` names, and is
/// one of its received records (its time is before `before`): no byte
/// was copied, no record written anew.
#[track_caller]
fn shares_buffers(s: &S3, copy: &str, src: &str, before: u64) {
    let src = slices(s, src);
    let copy = slices(s, copy);
    assert!(!copy.is_empty());
    for (off, len, received, at) in &copy {
        assert!(
            src.iter()
                .any(|(o, l, _, _)| o <= off && off + len <= o + l),
            "a record of the copy ({off}, {len}) names bytes outside the source's"
        );
        assert!(
            *received && *at < before,
            "a record of the copy was made anew"
        );
    }
}

#[test]
fn part_copy_ranges_complete_into_the_source_bytes_sharing_its_buffers() {
    let s = super::s3_server();
    ok(&s.put("/pcb", b""));
    let data = super::super::net_common::data(12 * MIB + 12_345, 41);
    ok(&s.put("/pcb/src", &data));
    let t_copy = super::wall_ns();
    let id = create_upload(&s, "/pcb/dst", &[]);
    let ranges = [
        (0usize, 5 * MIB),
        (5 * MIB, 10 * MIB),
        (10 * MIB, data.len()),
    ];
    let mut tags = Vec::new();
    for (k, (a, b)) in ranges.iter().enumerate() {
        let range = format!("bytes={a}-{}", b - 1);
        let r = part_copy(
            &s,
            &s.rw,
            "/pcb/dst",
            &id,
            k as u32 + 1,
            "/pcb/src",
            &[("x-amz-copy-source-range", &range)],
        );
        ok(&r);
        let body = String::from_utf8_lossy(&r.body).to_string();
        assert!(body.contains("<CopyPartResult"), "{body}");
        assert!(xml_field(&r, "LastModified").is_some(), "{body}");
        let tag = xml_field(&r, "ETag").unwrap().replace("&quot;", "\"");
        assert_eq!(tag, md5_etag(&data[*a..*b]), "part {}'s ETag", k + 1);
        tags.push(tag);
    }
    // ListParts: as uploaded parts would be.
    let listed = list_parts(&s, "/pcb/dst", &id);
    let want: Vec<(u32, String, u64)> = ranges
        .iter()
        .zip(&tags)
        .enumerate()
        .map(|(k, ((a, b), t))| (k as u32 + 1, t.clone(), (b - a) as u64))
        .collect();
    assert_eq!(listed, want);
    let parts: Vec<(u32, String, String)> = tags
        .iter()
        .enumerate()
        .map(|(k, t)| (k as u32 + 1, t.clone(), String::new()))
        .collect();
    let r = s.req(
        &s.rw,
        "POST",
        "/pcb/dst",
        &format!("uploadId={id}"),
        complete_body(&parts).as_bytes(),
    );
    ok(&r);
    assert_eq!(s.srv.read("/pcb/dst").unwrap(), data, "the copy's bytes");
    let md5s: Vec<[u8; 16]> = ranges.iter().map(|(a, b)| md5(&data[*a..*b])).collect();
    let g = s.get("/pcb/dst");
    assert_eq!(g.body, data);
    assert_eq!(g.header("etag"), Some(multipart_etag(&md5s).as_str()));
    // No byte was copied: every record of the object names bytes of the
    // source's records, and is one of them.
    shares_buffers(&s, "/pcb/dst", "/pcb/src", t_copy);
    // A whole-object copy as one part (no range), completed alone.
    let id = create_upload(&s, "/pcb/whole", &[]);
    let r = part_copy(&s, &s.rw, "/pcb/whole", &id, 1, "pcb/src", &[]);
    ok(&r);
    let tag = xml_field(&r, "ETag").unwrap().replace("&quot;", "\"");
    assert_eq!(tag, md5_etag(&data));
    ok(&s.req(
        &s.rw,
        "POST",
        "/pcb/whole",
        &format!("uploadId={id}"),
        complete_body(&[(1, tag, String::new())]).as_bytes(),
    ));
    assert_eq!(s.srv.read("/pcb/whole").unwrap(), data);
    shares_buffers(&s, "/pcb/whole", "/pcb/src", t_copy);
    s.srv.check();
}

/// The silent loss this replaces: an UploadPart with x-amz-copy-source
/// answered 200 and kept a 0-byte part, and Complete made a short object.
#[test]
fn part_copy_never_yields_a_zero_byte_part() {
    let s = super::s3_server();
    ok(&s.put("/zpb", b""));
    let data = super::super::net_common::data(300_000, 7);
    ok(&s.put("/zpb/src", &data));
    let id = create_upload(&s, "/zpb/dst", &[]);
    // Every form of the source S3 and CopyObject accept.
    for (n, src) in [
        (1, "/zpb/src"),
        (2, "zpb/src"),
        (3, "/zpb/%73rc"),
        (4, "zpb/src?versionId=null"),
    ] {
        let r = part_copy(&s, &s.rw, "/zpb/dst", &id, n, src, &[]);
        ok(&r);
        assert_eq!(
            xml_field(&r, "ETag").unwrap().replace("&quot;", "\""),
            md5_etag(&data),
            "{src}"
        );
    }
    let listed = list_parts(&s, "/zpb/dst", &id);
    assert_eq!(listed.len(), 4);
    for (n, tag, size) in &listed {
        assert_eq!(
            *size,
            data.len() as u64,
            "part {n} is not the source's size"
        );
        assert_ne!(tag, &md5_etag(b""), "part {n} is the empty part's ETag");
    }
    // A copy that is refused records no part (and the one there stays).
    let before = list_parts(&s, "/zpb/dst", &id);
    for (src, want) in [
        ("/zpb/nope", "NoSuchKey"),
        ("/nobucket/x", "NoSuchBucket"),
        ("zpb", "InvalidArgument"),
        ("/zpb/src?versionId=abc", "NotImplemented"),
    ] {
        let r = part_copy(&s, &s.rw, "/zpb/dst", &id, 9, src, &[]);
        assert_eq!(
            code(&r),
            want,
            "{src}: {}",
            String::from_utf8_lossy(&r.body)
        );
        let r = part_copy(&s, &s.rw, "/zpb/dst", &id, 1, src, &[]);
        assert_eq!(code(&r), want, "{src}");
    }
    assert_eq!(list_parts(&s, "/zpb/dst", &id), before);
    // Completed: the object is the parts, none of them short.
    let parts: Vec<(u32, String, String)> = listed
        .iter()
        .filter(|p| p.0 == 4)
        .map(|(n, t, _)| (*n, t.clone(), String::new()))
        .collect();
    ok(&s.req(
        &s.rw,
        "POST",
        "/zpb/dst",
        &format!("uploadId={id}"),
        complete_body(&parts).as_bytes(),
    ));
    assert_eq!(s.srv.read("/zpb/dst").unwrap(), data);
    // The copy needs an upload: no upload, no part.
    let r = part_copy(&s, &s.rw, "/zpb/dst", "0123", 1, "/zpb/src", &[]);
    assert_eq!(code(&r), "NoSuchUpload");
    s.srv.check();
}

#[test]
fn part_copy_range_errors_as_s3_answers_them() {
    let s = super::s3_server();
    ok(&s.put("/rgb", b""));
    let data = super::super::net_common::data(1000, 3);
    ok(&s.put("/rgb/src", &data));
    let id = create_upload(&s, "/rgb/dst", &[]);
    for range in [
        "byte=100-200",
        "bytes=invalid-range",
        "bytes=200-100",
        "bytes=-2-300",
        "bytes=aa-12",
        "bytes=12-aa",
        "bytes=bb-",
        "bytes=100-",
        "bytes=-100",
        "100-200",
    ] {
        let r = part_copy(
            &s,
            &s.rw,
            "/rgb/dst",
            &id,
            1,
            "/rgb/src",
            &[("x-amz-copy-source-range", range)],
        );
        assert_eq!(
            (r.status, code(&r).as_str()),
            (400, "InvalidArgument"),
            "{range}"
        );
        assert!(
            String::from_utf8_lossy(&r.body).contains("bytes=first-last"),
            "{range}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    for range in ["bytes=100-1005", "bytes=1250-3000", "bytes=100-1000"] {
        let r = part_copy(
            &s,
            &s.rw,
            "/rgb/dst",
            &id,
            1,
            "/rgb/src",
            &[("x-amz-copy-source-range", range)],
        );
        assert_eq!(
            (r.status, code(&r).as_str()),
            (416, "InvalidRange"),
            "{range}"
        );
        assert!(
            String::from_utf8_lossy(&r.body)
                .contains("Range specified is not valid for source object of size: 1000"),
            "{range}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    assert!(
        list_parts(&s, "/rgb/dst", &id).is_empty(),
        "a refused range left a part"
    );
    // The last byte is within the source; one byte is a part.
    let r = part_copy(
        &s,
        &s.rw,
        "/rgb/dst",
        &id,
        1,
        "/rgb/src",
        &[("x-amz-copy-source-range", "bytes=999-999")],
    );
    ok(&r);
    assert_eq!(
        list_parts(&s, "/rgb/dst", &id),
        vec![(1, md5_etag(&data[999..]), 1)]
    );
    // A body is not a part copy's.
    let r = s.req_with(
        &s.rw,
        "PUT",
        "/rgb/dst",
        &format!("partNumber=2&uploadId={id}"),
        &[("x-amz-copy-source", "/rgb/src")],
        b"a body",
    );
    assert_eq!(code(&r), "InvalidRequest");
    assert_eq!(list_parts(&s, "/rgb/dst", &id).len(), 1);
    s.srv.check();
}

/// The copy source's conditions, against its S3 ETag (the MD5), with
/// AWS's documented combinations; every failure 412, and no part kept.
#[test]
fn part_copy_source_conditions_use_the_s3_etag() {
    let s = super::s3_server();
    ok(&s.put("/cnb", b""));
    let data = super::super::net_common::data(10_000, 5);
    ok(&s.put("/cnb/src", &data));
    let etag = md5_etag(&data);
    let bare = etag.trim_matches('"').to_string();
    let id = create_upload(&s, "/cnb/dst", &[]);
    let past = "Mon, 01 Jan 2001 00:00:00 GMT";
    let future = "Fri, 01 Jan 2100 00:00:00 GMT";
    let cases: &[(&[(&str, &str)], bool)] = &[
        (&[("x-amz-copy-source-if-match", &etag)], true),
        (&[("x-amz-copy-source-if-match", &bare)], true),
        (&[("x-amz-copy-source-if-match", "*")], true),
        (&[("x-amz-copy-source-if-match", "\"0123\"")], false),
        (&[("x-amz-copy-source-if-none-match", &etag)], false),
        (&[("x-amz-copy-source-if-none-match", &bare)], false),
        (&[("x-amz-copy-source-if-none-match", "\"0123\"")], true),
        (&[("x-amz-copy-source-if-modified-since", past)], true),
        (&[("x-amz-copy-source-if-modified-since", future)], false),
        (&[("x-amz-copy-source-if-unmodified-since", future)], true),
        (&[("x-amz-copy-source-if-unmodified-since", past)], false),
        // If-Match true, If-Unmodified-Since false: copied.
        (
            &[
                ("x-amz-copy-source-if-match", &etag),
                ("x-amz-copy-source-if-unmodified-since", past),
            ],
            true,
        ),
        // If-None-Match false, If-Modified-Since true: 412.
        (
            &[
                ("x-amz-copy-source-if-none-match", &etag),
                ("x-amz-copy-source-if-modified-since", past),
            ],
            false,
        ),
        // If-None-Match true, If-Modified-Since false: copied.
        (
            &[
                ("x-amz-copy-source-if-none-match", "\"0123\""),
                ("x-amz-copy-source-if-modified-since", future),
            ],
            true,
        ),
    ];
    for (k, (headers, copies)) in cases.iter().enumerate() {
        let n = k as u32 + 1;
        let r = part_copy(&s, &s.rw, "/cnb/dst", &id, n, "/cnb/src", headers);
        let listed = list_parts(&s, "/cnb/dst", &id);
        if *copies {
            ok(&r);
            assert!(listed.iter().any(|p| p.0 == n), "{headers:?}");
        } else {
            assert_eq!(
                (r.status, code(&r).as_str()),
                (412, "PreconditionFailed"),
                "{headers:?}"
            );
            assert!(!listed.iter().any(|p| p.0 == n), "{headers:?} left a part");
        }
    }
    s.srv.check();
}

/// An upload with a checksum algorithm: a copied part carries its
/// checksum of the copied bytes, answered, listed and combined by
/// Complete as an uploaded part's is.
#[test]
fn part_copy_checksums_are_the_uploads() {
    let s = super::s3_server();
    ok(&s.put("/ckb", b""));
    let data = super::super::net_common::data(6 * MIB + 77, 13);
    ok(&s.put("/ckb/src", &data));
    let (a, b) = (5 * MIB, data.len());
    // COMPOSITE SHA-256: the part's SHA-256 is computed from its bytes.
    let id = create_upload(&s, "/ckb/sha", &[("x-amz-checksum-algorithm", "SHA256")]);
    let r = part_copy(
        &s,
        &s.rw,
        "/ckb/sha",
        &id,
        1,
        "/ckb/src",
        &[("x-amz-copy-source-range", &format!("bytes=0-{}", a - 1))],
    );
    ok(&r);
    let sha = |d: &[u8]| Value::Sha256(pktfs_s3::sigv4::sha256(d)).to_base64();
    assert_eq!(xml_field(&r, "ChecksumSHA256"), Some(sha(&data[..a])));
    // The second part uploaded, with its checksum as a client sends it.
    let r = s.req_with(
        &s.rw,
        "PUT",
        "/ckb/sha",
        &format!("partNumber=2&uploadId={id}"),
        &[("x-amz-checksum-sha256", &sha(&data[a..b]))],
        &data[a..b],
    );
    ok(&r);
    let listed = list_parts(&s, "/ckb/sha", &id);
    let parts: Vec<(u32, String, String)> = listed
        .iter()
        .map(|(n, t, _)| {
            let d = if *n == 1 { &data[..a] } else { &data[a..b] };
            (
                *n,
                t.clone(),
                format!("<ChecksumSHA256>{}</ChecksumSHA256>", sha(d)),
            )
        })
        .collect();
    // A listed checksum that is not the part's is refused.
    let mut wrong = parts.clone();
    wrong[0].2 = format!("<ChecksumSHA256>{}</ChecksumSHA256>", sha(b"x"));
    let r = s.req(
        &s.rw,
        "POST",
        "/ckb/sha",
        &format!("uploadId={id}"),
        complete_body(&wrong).as_bytes(),
    );
    assert_eq!(code(&r), "InvalidPart");
    assert!(s.srv.lookup("/ckb/sha").is_none());
    let r = s.req(
        &s.rw,
        "POST",
        "/ckb/sha",
        &format!("uploadId={id}"),
        complete_body(&parts).as_bytes(),
    );
    ok(&r);
    let want = pktfs_s3::checksum::composite(&[
        Value::Sha256(pktfs_s3::sigv4::sha256(&data[..a])),
        Value::Sha256(pktfs_s3::sigv4::sha256(&data[a..b])),
    ])
    .unwrap();
    assert_eq!(xml_field(&r, "ChecksumSHA256"), Some(want));
    assert_eq!(s.srv.read("/ckb/sha").unwrap(), data);
    // FULL_OBJECT CRC32C: the copied part's CRC32C from its records.
    let id = create_upload(
        &s,
        "/ckb/crc",
        &[
            ("x-amz-checksum-algorithm", "CRC32C"),
            ("x-amz-checksum-type", "FULL_OBJECT"),
        ],
    );
    let crc = |d: &[u8]| Value::Crc32c(crc32c::crc32c(d)).to_base64();
    let r = part_copy(
        &s,
        &s.rw,
        "/ckb/crc",
        &id,
        1,
        "/ckb/src",
        &[("x-amz-copy-source-range", &format!("bytes=0-{}", a - 1))],
    );
    ok(&r);
    assert_eq!(xml_field(&r, "ChecksumCRC32C"), Some(crc(&data[..a])));
    let r = part_copy(
        &s,
        &s.rw,
        "/ckb/crc",
        &id,
        2,
        "/ckb/src",
        &[("x-amz-copy-source-range", &format!("bytes={a}-{}", b - 1))],
    );
    ok(&r);
    let listed = list_parts(&s, "/ckb/crc", &id);
    let parts: Vec<(u32, String, String)> = listed
        .iter()
        .map(|(n, t, _)| (*n, t.clone(), String::new()))
        .collect();
    // The whole object's checksum, given with the Complete, is checked.
    let r = s.req_with(
        &s.rw,
        "POST",
        "/ckb/crc",
        &format!("uploadId={id}"),
        &[("x-amz-checksum-crc32c", &crc(b"not the object"))],
        complete_body(&parts).as_bytes(),
    );
    assert_eq!(code(&r), "BadDigest");
    assert!(s.srv.lookup("/ckb/crc").is_none());
    let r = s.req_with(
        &s.rw,
        "POST",
        "/ckb/crc",
        &format!("uploadId={id}"),
        &[
            ("x-amz-checksum-crc32c", &crc(&data)),
            ("x-amz-mp-object-size", &data.len().to_string()),
        ],
        complete_body(&parts).as_bytes(),
    );
    ok(&r);
    assert_eq!(xml_field(&r, "ChecksumCRC32C"), Some(crc(&data)));
    assert_eq!(s.srv.read("/ckb/crc").unwrap(), data);
    s.srv.check();
}

/// The source needs the key's read grant on its bucket (the destination
/// its write grant), as CopyObject's does.
#[test]
fn part_copy_needs_a_read_grant_on_the_source() {
    let s = super::s3_server();
    ok(&s.put("/gsrc", b""));
    ok(&s.put("/gdst", b""));
    ok(&s.put("/gsrc/o", b"secret bytes"));
    // A key that may write gdst and nothing else.
    let mut ks = KeyStore::default();
    for (name, grant, seed, signer) in [("rw", "*=rw", 7u8, &s.rw), ("ro", "*=r", 9u8, &s.ro)] {
        let k = ks
            .add(
                name,
                vec![grant.parse::<Grant>().unwrap()],
                &[seed; 64],
                now_s(),
            )
            .unwrap();
        assert_eq!(k.id, signer.access_key_id);
    }
    let k = ks
        .add(
            "dst-only",
            vec!["gdst=rw".parse::<Grant>().unwrap()],
            &[11u8; 64],
            now_s(),
        )
        .unwrap();
    let dst_only = Signer::new(&k.id, &k.secret, REGION);
    s.srv.vol.set_s3_keys_blob(Some(&ks.encode())).unwrap();
    let r = s.req(&dst_only, "POST", "/gdst/o", "uploads=", b"");
    ok(&r);
    let id = xml_field(&r, "UploadId").unwrap();
    let r = part_copy(&s, &dst_only, "/gdst/o", &id, 1, "/gsrc/o", &[]);
    assert_eq!((r.status, code(&r).as_str()), (403, "AccessDenied"));
    assert!(list_parts(&s, "/gdst/o", &id).is_empty());
    // The read-only key may not write the part at all.
    let r = part_copy(&s, &s.ro, "/gdst/o", &id, 1, "/gsrc/o", &[]);
    assert_eq!((r.status, code(&r).as_str()), (403, "AccessDenied"));
    assert!(list_parts(&s, "/gdst/o", &id).is_empty());
    s.srv.check();
}
