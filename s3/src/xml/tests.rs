//! Writers are checked by reading what they write back with quick-xml
//! (independently of this module's reader); readers with the example
//! bodies of S3's API reference, the SDKs' spellings, and malformed or
//! oversized bodies.

use proptest::prelude::*;
use quick_xml::events::Event;

use super::*;
use crate::checksum::Algorithm;
use crate::error::{Code, S3Error};
use crate::names::percent_decode;

/// A document read back: the root's `xmlns` (if any) and every leaf
/// element as (`/`-joined path from the root, text).
#[derive(Debug)]
struct ReadBack {
    xmlns: Option<String>,
    leaves: Vec<(String, String)>,
}

impl ReadBack {
    fn all(&self, path: &str) -> Vec<&str> {
        self.leaves
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, t)| t.as_str())
            .collect()
    }

    fn one(&self, path: &str) -> &str {
        let all = self.all(path);
        assert_eq!(all.len(), 1, "{path} in {self:?}");
        all[0]
    }

    fn has(&self, path: &str) -> bool {
        !self.all(path).is_empty()
    }
}

fn read_back(doc: &str) -> ReadBack {
    assert!(doc.starts_with(DECLARATION), "{doc}");
    let mut r = quick_xml::Reader::from_str(doc);
    let mut stack: Vec<String> = Vec::new();
    let mut text = String::new();
    let mut leaf = true;
    let mut xmlns = None;
    let mut leaves = Vec::new();
    loop {
        match r.read_event().expect("well-formed") {
            Event::Start(e) | Event::Empty(e) if stack.is_empty() && xmlns.is_none() => {
                xmlns = e
                    .try_get_attribute("xmlns")
                    .unwrap()
                    .map(|a| String::from_utf8(a.value.to_vec()).unwrap());
                stack.push(String::from_utf8(e.name().as_ref().to_vec()).unwrap());
                if doc.trim_end().ends_with("/>") && stack.len() == 1 && !doc.contains("</") {
                    leaves.push((stack[0].clone(), String::new()));
                    break;
                }
                text.clear();
                leaf = true;
            }
            Event::Start(e) => {
                stack.push(String::from_utf8(e.name().as_ref().to_vec()).unwrap());
                text.clear();
                leaf = true;
            }
            Event::Empty(e) => {
                stack.push(String::from_utf8(e.name().as_ref().to_vec()).unwrap());
                leaves.push((stack.join("/"), String::new()));
                stack.pop();
                leaf = false;
            }
            Event::End(_) => {
                if leaf {
                    leaves.push((stack.join("/"), std::mem::take(&mut text)));
                }
                stack.pop();
                leaf = false;
            }
            Event::Text(t) => text.push_str(&t.xml10_content().unwrap()),
            Event::GeneralRef(g) => match g.resolve_char_ref().unwrap() {
                Some(c) => text.push(c),
                None => text.push_str(
                    &quick_xml::escape::unescape(&format!("&{};", g.decode().unwrap())).unwrap(),
                ),
            },
            Event::Eof => break,
            _ => {}
        }
    }
    ReadBack { xmlns, leaves }
}

const NASTY_KEY: &str = "a<b>&c\"d'e/\u{1}\t\r\n f+g%20é";

#[test]
fn iso8601_times() {
    assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
    // The time of S3's ListObjectsV2 example.
    assert_eq!(
        iso8601(1_255_369_830_000_000_000),
        "2009-10-12T17:50:30.000Z"
    );
    assert_eq!(
        iso8601(1_255_369_830_123_999_999),
        "2009-10-12T17:50:30.123Z"
    );
    assert_eq!(
        iso8601(1_709_164_800_000_000_000),
        "2024-02-29T00:00:00.000Z"
    );
    assert_eq!(iso8601(-1), "1969-12-31T23:59:59.999Z");
    assert_eq!(iso8601(i64::MAX), "2262-04-11T23:47:16.854Z");
    assert_eq!(iso8601(i64::MIN), "1677-09-21T00:12:43.145Z");
}

#[test]
fn error_body() {
    let x = error(
        "NoSuchKey",
        "no <key> & \"quotes\"",
        "/b/a&b",
        "4442587FB7D0A2F9",
    );
    let r = read_back(&x);
    assert_eq!(r.xmlns, None, "S3's <Error> has no namespace");
    assert_eq!(r.one("Error/Code"), "NoSuchKey");
    assert_eq!(r.one("Error/Message"), "no <key> & \"quotes\"");
    assert_eq!(r.one("Error/Resource"), "/b/a&b");
    assert_eq!(r.one("Error/RequestId"), "4442587FB7D0A2F9");
    assert!(x.contains("&lt;key&gt; &amp; &quot;quotes&quot;"), "{x}");
}

#[test]
fn an_s3_error_as_its_body() {
    let e = S3Error::new(Code::NoSuchKey, "no object \"a<b\" in bucket logs");
    let x = e.to_xml("/logs/a<b", "4442587FB7D0A2F9");
    let r = read_back(&x);
    assert_eq!(r.one("Error/Code"), "NoSuchKey");
    assert_eq!(r.one("Error/Message"), "no object \"a<b\" in bucket logs");
    assert_eq!(r.one("Error/Resource"), "/logs/a<b");
    assert!(x.contains("a&lt;b"), "{x}");
}

#[test]
fn buckets_and_location() {
    let me = Owner {
        id: "PK0123",
        display_name: "ingest",
    };
    let buckets = [
        Bucket {
            name: "logs".into(),
            created_unix_ns: 1_255_369_830_000_000_000,
        },
        Bucket {
            name: "blobs".into(),
            created_unix_ns: 0,
        },
    ];
    let page = BucketsPage {
        buckets: &buckets,
        prefix: None,
        continuation_token: None,
    };
    let x = list_buckets(me, &page);
    let r = read_back(&x);
    assert_eq!(r.xmlns.as_deref(), Some(S3_NS));
    assert_eq!(r.one("ListAllMyBucketsResult/Owner/ID"), "PK0123");
    assert_eq!(r.one("ListAllMyBucketsResult/Owner/DisplayName"), "ingest");
    assert!(!r.has("ListAllMyBucketsResult/ContinuationToken"));
    assert!(!r.has("ListAllMyBucketsResult/Prefix"));
    let more = BucketsPage {
        buckets: &buckets[..1],
        prefix: Some("l"),
        continuation_token: Some("logs"),
    };
    let m = read_back(&list_buckets(me, &more));
    assert_eq!(m.one("ListAllMyBucketsResult/ContinuationToken"), "logs");
    assert_eq!(m.one("ListAllMyBucketsResult/Prefix"), "l");
    assert_eq!(
        r.all("ListAllMyBucketsResult/Buckets/Bucket/Name"),
        ["logs", "blobs"]
    );
    assert_eq!(
        r.all("ListAllMyBucketsResult/Buckets/Bucket/CreationDate"),
        ["2009-10-12T17:50:30.000Z", "1970-01-01T00:00:00.000Z"]
    );
    let none = BucketsPage {
        buckets: &[],
        prefix: None,
        continuation_token: None,
    };
    let empty = read_back(&list_buckets(me, &none));
    assert!(!empty.has("ListAllMyBucketsResult/Buckets/Bucket/Name"));

    let us = location("us-east-1");
    assert!(
        us.ends_with(&format!("<LocationConstraint xmlns=\"{S3_NS}\"/>")),
        "{us}"
    );
    assert_eq!(read_back(&location("")).one("LocationConstraint"), "");
    let eu = read_back(&location("eu-west-1"));
    assert_eq!(eu.one("LocationConstraint"), "eu-west-1");
    assert_eq!(eu.xmlns.as_deref(), Some(S3_NS));
}

fn objects() -> Vec<Object> {
    vec![
        Object {
            key: NASTY_KEY.into(),
            last_modified_unix_ns: 1_255_369_830_000_000_000,
            etag: "\"fba9dede5f27731c9771645a39863328\"".into(),
            size: 434_234,
            storage_class: "STANDARD",
        },
        Object {
            key: "plain.txt".into(),
            last_modified_unix_ns: 0,
            etag: "\"d41d8cd98f00b204e9800998ecf8427e-2\"".into(),
            size: 0,
            storage_class: "STANDARD",
        },
    ]
}

#[test]
fn list_v2_escapes_keys() {
    let objs = objects();
    let prefixes = vec!["photos/".to_string(), "x&y/".to_string()];
    let l = ListV2 {
        bucket: "bucket",
        prefix: "",
        delimiter: Some("/"),
        max_keys: 1000,
        is_truncated: true,
        continuation_token: Some("tok<1>"),
        next_continuation_token: Some("tok2"),
        start_after: None,
        encoding_url: false,
        contents: &objs,
        common_prefixes: &prefixes,
        owner: None,
    };
    let x = list_objects_v2(&l);
    let r = read_back(&x);
    assert_eq!(r.xmlns.as_deref(), Some(S3_NS));
    let p = "ListBucketResult";
    assert_eq!(r.one(&format!("{p}/Name")), "bucket");
    assert_eq!(r.one(&format!("{p}/Prefix")), "");
    assert_eq!(r.one(&format!("{p}/KeyCount")), "4");
    assert_eq!(r.one(&format!("{p}/MaxKeys")), "1000");
    assert_eq!(r.one(&format!("{p}/Delimiter")), "/");
    assert_eq!(r.one(&format!("{p}/IsTruncated")), "true");
    assert_eq!(r.one(&format!("{p}/ContinuationToken")), "tok<1>");
    assert_eq!(r.one(&format!("{p}/NextContinuationToken")), "tok2");
    assert!(!r.has(&format!("{p}/StartAfter")));
    assert!(!r.has(&format!("{p}/EncodingType")));
    assert_eq!(
        r.all(&format!("{p}/Contents/Key")),
        [NASTY_KEY, "plain.txt"]
    );
    assert_eq!(
        r.all(&format!("{p}/Contents/ETag")),
        [objs[0].etag.as_str(), objs[1].etag.as_str()]
    );
    assert_eq!(
        r.all(&format!("{p}/Contents/LastModified")),
        ["2009-10-12T17:50:30.000Z", "1970-01-01T00:00:00.000Z"]
    );
    assert_eq!(r.all(&format!("{p}/Contents/Size")), ["434234", "0"]);
    assert_eq!(
        r.all(&format!("{p}/Contents/StorageClass")),
        ["STANDARD"; 2]
    );
    assert_eq!(
        r.all(&format!("{p}/CommonPrefixes/Prefix")),
        ["photos/", "x&y/"]
    );
    // The raw text has no control character and no bare markup.
    assert!(
        !x.contains('\u{1}') && !x.contains('\r') && !x.contains('\t'),
        "{x}"
    );
    assert!(
        x.contains("a&lt;b&gt;&amp;c&quot;d&apos;e/&#x1;&#x9;&#xD;&#xA; f+g%20é"),
        "{x}"
    );
}

#[test]
fn list_v2_url_encoding() {
    let objs = objects();
    let prefixes = vec!["quux ab/".to_string(), "foo+1/".to_string()];
    let l = ListV2 {
        bucket: "bucket",
        prefix: "a b",
        delimiter: Some("/"),
        max_keys: 2,
        is_truncated: false,
        continuation_token: None,
        next_continuation_token: None,
        start_after: Some("x y"),
        encoding_url: true,
        contents: &objs,
        common_prefixes: &prefixes,
        owner: Some(Owner {
            id: "PK2",
            display_name: "two",
        }),
    };
    let r = read_back(&list_objects_v2(&l));
    let p = "ListBucketResult";
    assert_eq!(r.all(&format!("{p}/Contents/Owner/ID")).len(), objs.len());
    assert_eq!(r.one(&format!("{p}/EncodingType")), "url");
    assert_eq!(r.one(&format!("{p}/Prefix")), "a%20b");
    assert_eq!(r.one(&format!("{p}/StartAfter")), "x%20y");
    assert_eq!(r.one(&format!("{p}/IsTruncated")), "false");
    assert!(!r.has(&format!("{p}/NextContinuationToken")));
    // s3-tests' test_bucket_list_encoding_basic expectations.
    assert_eq!(
        r.all(&format!("{p}/CommonPrefixes/Prefix")),
        ["quux%20ab/", "foo%2B1/"]
    );
    let keys = r.all(&format!("{p}/Contents/Key"));
    assert!(keys[0].bytes().all(|b| b.is_ascii_graphic()), "{}", keys[0]);
    assert_eq!(percent_decode(keys[0]).unwrap(), NASTY_KEY);
    // An empty delimiter writes no element, as S3 does.
    let none = ListV2 {
        delimiter: Some(""),
        ..l
    };
    assert!(!read_back(&list_objects_v2(&none)).has(&format!("{p}/Delimiter")));
}

#[test]
fn list_v1() {
    let objs = objects();
    let l = ListV1 {
        bucket: "b",
        prefix: "p/",
        delimiter: Some("/"),
        marker: "m k",
        next_marker: Some("plain.txt"),
        max_keys: 2,
        is_truncated: true,
        encoding_url: false,
        contents: &objs,
        common_prefixes: &[],
        owner: Owner {
            id: "PK1",
            display_name: "k",
        },
    };
    let r = read_back(&list_objects_v1(&l));
    assert_eq!(r.all("ListBucketResult/Contents/Owner/ID"), ["PK1", "PK1"]);
    assert_eq!(
        r.all("ListBucketResult/Contents/Owner/DisplayName"),
        ["k", "k"]
    );
    let p = "ListBucketResult";
    assert_eq!(r.one(&format!("{p}/Marker")), "m k");
    assert_eq!(r.one(&format!("{p}/NextMarker")), "plain.txt");
    assert_eq!(r.one(&format!("{p}/Prefix")), "p/");
    assert!(!r.has(&format!("{p}/KeyCount")), "V1 has no KeyCount");
    assert_eq!(
        r.all(&format!("{p}/Contents/Key")),
        [NASTY_KEY, "plain.txt"]
    );
    let url = read_back(&list_objects_v1(&ListV1 {
        encoding_url: true,
        next_marker: None,
        ..l
    }));
    assert_eq!(url.one(&format!("{p}/Marker")), "m%20k");
    assert!(!url.has(&format!("{p}/NextMarker")));
    assert_eq!(url.one(&format!("{p}/EncodingType")), "url");
}

#[test]
fn multipart_answers() {
    let r = read_back(&initiate_multipart("b", "k&1", "VXBsb2FkIElE"));
    assert_eq!(r.one("InitiateMultipartUploadResult/Bucket"), "b");
    assert_eq!(r.one("InitiateMultipartUploadResult/Key"), "k&1");
    assert_eq!(
        r.one("InitiateMultipartUploadResult/UploadId"),
        "VXBsb2FkIElE"
    );

    let sums = vec![
        (Algorithm::Crc32c, "TfIQGQ==-3".to_string()),
        (
            Algorithm::Sha256,
            "uLXNhocVBFPbjjbVnRiJqEJy27lCvETKJzKYvlaWvyY=-3".to_string(),
        ),
    ];
    let c = read_back(&complete_multipart(
        "http://h/b/k",
        "b",
        "k",
        "\"3a54b4664de20510445c8d2a210269d4-3\"",
        &sums,
        Some("COMPOSITE"),
    ));
    let p = "CompleteMultipartUploadResult";
    assert_eq!(c.xmlns.as_deref(), Some(S3_NS));
    assert_eq!(c.one(&format!("{p}/Location")), "http://h/b/k");
    assert_eq!(
        c.one(&format!("{p}/ETag")),
        "\"3a54b4664de20510445c8d2a210269d4-3\""
    );
    assert_eq!(c.one(&format!("{p}/ChecksumCRC32C")), "TfIQGQ==-3");
    assert_eq!(
        c.one(&format!("{p}/ChecksumSHA256")),
        "uLXNhocVBFPbjjbVnRiJqEJy27lCvETKJzKYvlaWvyY=-3"
    );
    assert_eq!(c.one(&format!("{p}/ChecksumType")), "COMPOSITE");
    let bare = read_back(&complete_multipart("l", "b", "k", "\"e\"", &[], None));
    assert!(!bare.has(&format!("{p}/ChecksumType")));

    let parts = vec![
        Part {
            number: 2,
            etag: "\"7778aef83f66abc1fa1e8477f296d394\"".into(),
            size: 10_485_760,
            last_modified_unix_ns: 1_255_369_830_000_000_000,
            checksums: vec![(Algorithm::Crc32c, "4waSgw==".into())],
        },
        Part {
            number: 3,
            etag: "\"aaaa18db4cc2f85cedef654fccc4a4x8\"".into(),
            size: 5,
            last_modified_unix_ns: 0,
            checksums: vec![],
        },
    ];
    let l = read_back(&list_parts("b", "k", "id", 1, Some(3), 2, true, &parts));
    let p = "ListPartsResult";
    assert_eq!(l.one(&format!("{p}/PartNumberMarker")), "1");
    assert_eq!(l.one(&format!("{p}/NextPartNumberMarker")), "3");
    assert_eq!(l.one(&format!("{p}/MaxParts")), "2");
    assert_eq!(l.one(&format!("{p}/IsTruncated")), "true");
    assert_eq!(l.all(&format!("{p}/Part/PartNumber")), ["2", "3"]);
    assert_eq!(l.all(&format!("{p}/Part/Size")), ["10485760", "5"]);
    assert_eq!(l.all(&format!("{p}/Part/ChecksumCRC32C")), ["4waSgw=="]);
    assert_eq!(
        l.all(&format!("{p}/Part/LastModified")),
        ["2009-10-12T17:50:30.000Z", "1970-01-01T00:00:00.000Z"]
    );
    let last = read_back(&list_parts("b", "k", "id", 0, None, 1000, false, &[]));
    assert!(!last.has(&format!("{p}/NextPartNumberMarker")));

    let ups = vec![Upload {
        key: "my-movie.m2ts".into(),
        upload_id: "VXBsb2FkIElEIGZvciBlbHZpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA".into(),
        initiated_unix_ns: 1_255_369_830_000_000_000,
    }];
    let u = read_back(&list_multipart_uploads(
        "b",
        "",
        "",
        "",
        Some("my-movie.m2ts"),
        Some("VXBsb2FkIElEIGZvciBlbHZpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA"),
        3,
        true,
        &ups,
        Some("/"),
        &["photos/".to_string()],
    ));
    let p = "ListMultipartUploadsResult";
    assert_eq!(u.one(&format!("{p}/Bucket")), "b");
    assert_eq!(u.one(&format!("{p}/KeyMarker")), "");
    assert_eq!(u.one(&format!("{p}/NextKeyMarker")), "my-movie.m2ts");
    assert_eq!(u.one(&format!("{p}/Delimiter")), "/");
    assert_eq!(u.one(&format!("{p}/MaxUploads")), "3");
    assert_eq!(u.one(&format!("{p}/Upload/Key")), "my-movie.m2ts");
    assert_eq!(
        u.one(&format!("{p}/Upload/Initiated")),
        "2009-10-12T17:50:30.000Z"
    );
    assert_eq!(u.one(&format!("{p}/CommonPrefixes/Prefix")), "photos/");
}

#[test]
fn copy_and_delete_answers() {
    let c = read_back(&copy_object(
        "\"9b2cf535f27731c974343645a3985328\"",
        1_255_369_830_000_000_000,
        &[(Algorithm::Crc32, "y/Q5Jg==".into())],
    ));
    assert_eq!(
        c.one("CopyObjectResult/ETag"),
        "\"9b2cf535f27731c974343645a3985328\""
    );
    assert_eq!(
        c.one("CopyObjectResult/LastModified"),
        "2009-10-12T17:50:30.000Z"
    );
    assert_eq!(c.one("CopyObjectResult/ChecksumCRC32"), "y/Q5Jg==");
    let cp = read_back(&copy_part("\"e\"", 0, &[]));
    assert_eq!(cp.one("CopyPartResult/ETag"), "\"e\"");

    let deleted = vec!["sample1.txt".to_string(), NASTY_KEY.to_string()];
    let errors = vec![(
        "sample2.txt".to_string(),
        Code::AccessDenied,
        "Access Denied".to_string(),
    )];
    let d = read_back(&delete_result(&deleted, &errors, false));
    assert_eq!(
        d.all("DeleteResult/Deleted/Key"),
        ["sample1.txt", NASTY_KEY]
    );
    assert_eq!(d.one("DeleteResult/Error/Key"), "sample2.txt");
    assert_eq!(d.one("DeleteResult/Error/Code"), "AccessDenied");
    assert_eq!(d.one("DeleteResult/Error/Message"), "Access Denied");
    let q = read_back(&delete_result(&deleted, &errors, true));
    assert!(
        !q.has("DeleteResult/Deleted/Key"),
        "quiet answers only errors"
    );
    assert_eq!(q.one("DeleteResult/Error/Code"), "AccessDenied");
}

/// CompleteMultipartUpload's request example in S3's API reference.
const COMPLETE_EXAMPLE: &str = r#"<CompleteMultipartUpload>
  <Part>
    <PartNumber>1</PartNumber>
    <ETag>"a54357aff0632cce46d942af68356b38"</ETag>
  </Part>
  <Part>
    <PartNumber>2</PartNumber>
    <ETag>"0c78aef83f66abc1fa1e8477f296d394"</ETag>
  </Part>
  <Part>
    <PartNumber>3</PartNumber>
    <ETag>"acbd18db4cc2f85cedef654fccc4a4d8"</ETag>
  </Part>
</CompleteMultipartUpload>"#;

#[test]
fn parse_complete_examples() {
    let parts = parse_complete(COMPLETE_EXAMPLE.as_bytes()).unwrap();
    assert_eq!(parts.len(), 3);
    assert_eq!(
        parts.iter().map(|p| p.number).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(parts[0].etag, "\"a54357aff0632cce46d942af68356b38\"");
    assert!(parts.iter().all(|p| p.checksums.is_empty()));

    // As botocore writes it: namespace, declaration, &quot;, checksums,
    // elements in another order, and an element S3 does not define.
    let sdk = concat!(
        r#"<?xml version="1.0" encoding="UTF-8"?>"#,
        r#"<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">"#,
        "<Part><ChecksumCRC32C>4waSgw==</ChecksumCRC32C>",
        "<ETag>&quot;a54357aff0632cce46d942af68356b38&quot;</ETag>",
        "<PartNumber>1</PartNumber><Unknown><Deeper>x</Deeper></Unknown></Part>",
        "<Part><PartNumber> 10000 </PartNumber><ETag>e2</ETag>",
        "<ChecksumSHA256>47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=</ChecksumSHA256></Part>",
        "</CompleteMultipartUpload>"
    );
    let parts = parse_complete(sdk.as_bytes()).unwrap();
    assert_eq!(
        parts[0],
        CompletePart {
            number: 1,
            etag: "\"a54357aff0632cce46d942af68356b38\"".into(),
            checksums: vec![(Algorithm::Crc32c, "4waSgw==".into())],
        }
    );
    assert_eq!(parts[1].number, 10_000);
    assert_eq!(parts[1].checksums[0].0, Algorithm::Sha256);
    // A prefixed namespace is matched by local name.
    let prefixed = r#"<s3:CompleteMultipartUpload xmlns:s3="http://s3.amazonaws.com/doc/2006-03-01/"><s3:Part><s3:PartNumber>7</s3:PartNumber><s3:ETag>x</s3:ETag></s3:Part></s3:CompleteMultipartUpload>"#;
    assert_eq!(parse_complete(prefixed.as_bytes()).unwrap()[0].number, 7);
}

fn malformed<T: std::fmt::Debug>(r: Result<T, XmlError>, needle: &str) {
    let e = r.expect_err(needle);
    assert_eq!(e.code(), Code::MalformedXML);
    assert!(e.to_string().contains(needle), "{e} lacks {needle:?}");
}

#[test]
fn parse_complete_refusals() {
    let part = |inner: &str| {
        format!("<CompleteMultipartUpload><Part>{inner}</Part></CompleteMultipartUpload>")
    };
    malformed(parse_complete(b""), "empty");
    malformed(parse_complete(b"<CompleteMultipartUpload/>"), "no <Part>");
    malformed(
        parse_complete(b"<Delete></Delete>"),
        "root element is <Delete>",
    );
    malformed(
        parse_complete(part("<ETag>e</ETag>").as_bytes()),
        "no <PartNumber>",
    );
    malformed(
        parse_complete(part("<PartNumber>1</PartNumber>").as_bytes()),
        "no <ETag>",
    );
    for n in ["0", "10001", "-1", "abc", "", "4294967296"] {
        let b = part(&format!("<PartNumber>{n}</PartNumber><ETag>e</ETag>"));
        malformed(parse_complete(b.as_bytes()), "part number is 1 to 10000");
    }
    let two = part("<PartNumber>1</PartNumber><ETag>e</ETag><ChecksumCRC32>a</ChecksumCRC32><ChecksumCRC32>b</ChecksumCRC32>");
    malformed(parse_complete(two.as_bytes()), "two <ChecksumCRC32>");
    malformed(
        parse_complete(b"<CompleteMultipartUpload><Part></CompleteMultipartUpload>"),
        "not well-formed",
    );
    malformed(
        parse_complete(b"<CompleteMultipartUpload><Part>"),
        "never closed",
    );
    malformed(
        parse_complete(
            b"<CompleteMultipartUpload></CompleteMultipartUpload><CompleteMultipartUpload/>",
        ),
        "more than one root",
    );
    malformed(
        parse_complete(b"junk<CompleteMultipartUpload/>"),
        "outside the root",
    );
    let bomb = r#"<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaa">]><CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&a;</ETag></Part></CompleteMultipartUpload>"#;
    malformed(parse_complete(bomb.as_bytes()), "DOCTYPE");
    let ent = part("<PartNumber>1</PartNumber><ETag>&a;</ETag>");
    malformed(parse_complete(ent.as_bytes()), "unknown entity");
    let nul = part("<PartNumber>1</PartNumber><ETag>&#0;</ETag>");
    malformed(parse_complete(nul.as_bytes()), "not well-formed");
    let deep = format!(
        "<CompleteMultipartUpload>{}{}</CompleteMultipartUpload>",
        "<a>".repeat(MAX_DEPTH),
        "</a>".repeat(MAX_DEPTH)
    );
    malformed(parse_complete(deep.as_bytes()), "nest deeper");
    let one = "<Part><PartNumber>1</PartNumber><ETag>e</ETag></Part>";
    let many = format!(
        "<CompleteMultipartUpload>{}</CompleteMultipartUpload>",
        one.repeat(10_001)
    );
    malformed(parse_complete(many.as_bytes()), "more than 10000 <Part>");
    let max = format!(
        "<CompleteMultipartUpload>{}</CompleteMultipartUpload>",
        one.repeat(10_000)
    );
    assert_eq!(parse_complete(max.as_bytes()).unwrap().len(), 10_000);
    let big = vec![b' '; MAX_BODY_BYTES + 1];
    malformed(parse_complete(&big), "at most 4194304");
}

#[test]
fn parse_delete_examples() {
    // The two request examples of DeleteObjects in S3's API reference.
    let plain = r#"<Delete>
  <Object>
    <Key>sample1.txt</Key>
  </Object>
  <Object>
    <Key>sample2.txt</Key>
  </Object>
</Delete>"#;
    assert_eq!(
        parse_delete(plain.as_bytes()).unwrap(),
        DeleteRequest {
            keys: vec!["sample1.txt".into(), "sample2.txt".into()],
            quiet: false
        }
    );
    let quiet = r#"<Delete>
   <Quiet>true</Quiet>
   <Object>
     <Key>SampleDocument.txt</Key>
     <VersionId>OYcLXagmS.WaD..oyH4KRguB95_YhLs7</VersionId>
   </Object>
</Delete>"#;
    assert_eq!(
        parse_delete(quiet.as_bytes()).unwrap(),
        DeleteRequest {
            keys: vec!["SampleDocument.txt".into()],
            quiet: true
        }
    );
    // Keys keep their spaces; references and CDATA are resolved.
    let odd = r#"<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Object><Key> a&amp;b&#x9;&#13;</Key></Object><Object><Key><![CDATA[<c>]]></Key></Object><Quiet>False</Quiet></Delete>"#;
    let d = parse_delete(odd.as_bytes()).unwrap();
    assert_eq!(d.keys, [" a&b\t\r", "<c>"]);
    assert!(!d.quiet);
    // A UTF-8 byte order mark, as some .NET clients send, is not content.
    let bom = "\u{feff}<Delete><Object><Key>k</Key></Object></Delete>";
    assert_eq!(parse_delete(bom.as_bytes()).unwrap().keys, ["k"]);
}

#[test]
fn parse_delete_refusals() {
    malformed(parse_delete(b"<Delete></Delete>"), "no <Object>");
    malformed(
        parse_delete(b"<Delete><Object></Object></Delete>"),
        "no <Key>",
    );
    malformed(
        parse_delete(b"<Delete><Quiet>yes</Quiet><Object><Key>a</Key></Object></Delete>"),
        "Quiet is true or false",
    );
    malformed(parse_delete(b"<Remove/>"), "root element is <Remove>");
    let one = "<Object><Key>k</Key></Object>";
    let many = format!("<Delete>{}</Delete>", one.repeat(MAX_DELETE_KEYS + 1));
    malformed(parse_delete(many.as_bytes()), "more than 1000 <Object>");
    let max = format!("<Delete>{}</Delete>", one.repeat(MAX_DELETE_KEYS));
    assert_eq!(
        parse_delete(max.as_bytes()).unwrap().keys.len(),
        MAX_DELETE_KEYS
    );
}

#[test]
fn parse_create_bucket_examples() {
    // S3's CreateBucket request example (note the space in the end tag).
    let ex = r#"<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"> 
  <LocationConstraint>Europe</LocationConstraint> 
</CreateBucketConfiguration >"#;
    assert_eq!(
        parse_create_bucket(ex.as_bytes()).unwrap().as_deref(),
        Some("Europe")
    );
    assert_eq!(parse_create_bucket(b"").unwrap(), None);
    assert_eq!(parse_create_bucket(b" \r\n").unwrap(), None);
    assert_eq!(
        parse_create_bucket(
            b"<CreateBucketConfiguration><LocationConstraint/></CreateBucketConfiguration>"
        )
        .unwrap(),
        None
    );
    assert_eq!(
        parse_create_bucket(b"<CreateBucketConfiguration></CreateBucketConfiguration>").unwrap(),
        None
    );
    malformed(parse_create_bucket(b"<Bucket/>"), "root element");
    malformed(parse_create_bucket(b"not xml"), "outside the root");
}

/// Keys with every kind of character but NUL (which XML cannot carry).
fn key_strategy() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            4 => proptest::char::range('\u{1}', '\u{7f}'),
            1 => any::<char>().prop_filter("not NUL", |c| *c != '\0'),
        ],
        1..64,
    )
    .prop_map(|v| v.into_iter().collect())
}

proptest! {
    #[test]
    fn written_keys_read_back(keys in proptest::collection::vec(key_strategy(), 1..8)) {
        // The writer's escaping and this module's reader agree.
        let mut body = String::from("<Delete>");
        for k in &keys {
            body.push_str("<Object><Key>");
            escape_into(&mut body, k);
            body.push_str("</Key></Object>");
        }
        body.push_str("</Delete>");
        prop_assert_eq!(&parse_delete(body.as_bytes()).unwrap().keys, &keys);
        // And an independent reading of a listing gives them back too.
        let objs: Vec<Object> = keys.iter().map(|k| Object {
            key: k.clone(), last_modified_unix_ns: 0, etag: "\"e\"".into(), size: 1,
            storage_class: "STANDARD",
        }).collect();
        let l = ListV2 { bucket: "b", prefix: "", delimiter: None, max_keys: 1000,
            is_truncated: false, continuation_token: None, next_continuation_token: None,
            start_after: None, encoding_url: false, contents: &objs, common_prefixes: &[], owner: None };
        let r = read_back(&list_objects_v2(&l));
        prop_assert_eq!(r.all("ListBucketResult/Contents/Key"), keys.iter().map(String::as_str).collect::<Vec<_>>());
        let u = read_back(&list_objects_v2(&ListV2 { encoding_url: true, ..l }));
        let decoded: Vec<String> = u.all("ListBucketResult/Contents/Key").iter()
            .map(|k| percent_decode(k).unwrap()).collect();
        prop_assert_eq!(decoded, keys);
    }

    #[test]
    fn readers_never_panic(body in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse_complete(&body);
        let _ = parse_delete(&body);
        let _ = parse_create_bucket(&body);
    }

    #[test]
    fn readers_never_panic_on_near_xml(body in "(<|>|/|Part|PartNumber|ETag|Delete|Object|Key|Quiet|CompleteMultipartUpload|&amp;|&#x41;|&|;|[0-9]| |\"|=|!|\\?){0,60}") {
        let _ = parse_complete(body.as_bytes());
        let _ = parse_delete(body.as_bytes());
        let _ = parse_create_bucket(body.as_bytes());
    }

    #[test]
    fn iso8601_agrees_with_httpdate(secs in 0i64..253_402_300_799 / 30, ms in 0i64..1000) {
        // httpdate writes "Mon, 12 Oct 2009 17:50:30 GMT".
        let ns = secs.saturating_mul(1_000_000_000).saturating_add(ms * 1_000_000);
        prop_assume!(ns < i64::MAX - 1_000_000_000);
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns as u64);
        let http = httpdate::fmt_http_date(t);
        let parts: Vec<&str> = http.split([' ', ':']).collect();
        let months = ["Jan","Feb","Mar","Apr","May","Jun","Jul","Aug","Sep","Oct","Nov","Dec"];
        let m = months.iter().position(|x| *x == parts[2]).unwrap() + 1;
        let want = format!("{}-{:02}-{}T{}:{}:{}.{:03}Z", parts[3], m, parts[1], parts[4], parts[5], parts[6], ms);
        prop_assert_eq!(iso8601(ns), want);
    }
}
