//! Bucket names against the examples of S3's "Bucket naming rules",
//! keys as paths, percent-encoding, and no panics on any input.

use proptest::prelude::*;

use super::*;
use crate::error::Code;

#[test]
fn aws_documented_bucket_examples() {
    // "Example general purpose bucket names": these are valid...
    for ok in [
        "docexamplebucket1",
        "log-delivery-march-2020",
        "my-hosted-content",
        "docexamplewebsite.com",
        "www.docexamplewebsite.com",
        "my.example.s3.bucket",
        "abc",
        &"a".repeat(63),
        "1.2.3",
        "1.2.3.4.5",
    ] {
        assert_eq!(valid_bucket(ok), Ok(()), "{ok}");
    }
    // ...and these are not.
    for bad in [
        "doc_example_bucket",
        "DocExampleBucket",
        "doc-example-bucket-",
        "amzn-s3-demo-bucket",
        "ab",
        "",
        &"a".repeat(64),
        "-abc",
        "abc.",
        "a..b",
        "192.168.5.4",
        "xn--bucket",
        "sthree-bucket",
        "sthree-configurator-x",
        "bucket-s3alias",
        "bucket--ol-s3",
        "bucket.mrap",
        "bucket--x-s3",
        "bucket--table-s3",
        "bücket",
        "a b c",
    ] {
        let e = valid_bucket(bad).expect_err(bad);
        assert_eq!(e.code(), Code::InvalidBucketName);
        assert!(e.to_string().contains("bucket name"), "{e}");
    }
}

#[test]
fn keys_as_paths() {
    let k = key_path("logs/2024/app.log").unwrap();
    assert_eq!(k.segments, ["logs", "2024", "app.log"]);
    assert!(!k.dir_marker);
    let d = key_path("photos/2006/").unwrap();
    assert_eq!(d.segments, ["photos", "2006"]);
    assert!(d.dir_marker);
    // Spaces, '+', dots inside names and non-ASCII are all fine.
    let s = key_path("a b/c+d/.hidden/x..y/é").unwrap();
    assert_eq!(s.segments, ["a b", "c+d", ".hidden", "x..y", "é"]);
    let max = format!("{}/{}", "a".repeat(255), "b".repeat(255));
    assert_eq!(key_path(&max).unwrap().segments.len(), 2);
    assert!(key_path(&"a/".repeat(512)).is_ok()); // 1024 bytes exactly
}

#[test]
fn keys_refused_with_reasons() {
    for (bad, code) in [
        ("", Code::InvalidArgument),
        ("/", Code::InvalidArgument),
        ("/a", Code::InvalidArgument),
        ("a//b", Code::InvalidArgument),
        ("a//", Code::InvalidArgument),
        (".", Code::InvalidArgument),
        ("..", Code::InvalidArgument),
        ("a/./b", Code::InvalidArgument),
        ("a/../b", Code::InvalidArgument),
        ("a/..", Code::InvalidArgument),
        ("a/../", Code::InvalidArgument),
        ("a\0b", Code::InvalidArgument),
    ] {
        let e = key_path(bad).expect_err(bad);
        assert_eq!(e.code(), code, "{bad:?}: {e}");
    }
    let long_seg = "x".repeat(256);
    assert!(matches!(
        key_path(&long_seg),
        Err(NameError::KeySegmentTooLong { len_bytes: 256 })
    ));
    let too_long = "a/".repeat(512) + "a";
    let e = key_path(&too_long).unwrap_err();
    assert_eq!(e.code(), Code::KeyTooLongError);
    assert!(e.to_string().contains("1025 bytes"), "{e}");
}

#[test]
fn uri_encode_as_aws_does() {
    let enc = |s: &str, slash| {
        let mut o = String::new();
        uri_encode(s, slash, &mut o);
        o
    };
    assert_eq!(enc("AZaz09-._~", true), "AZaz09-._~");
    assert_eq!(enc("a b+c/d", false), "a%20b%2Bc/d");
    assert_eq!(enc("a b+c/d", true), "a%20b%2Bc%2Fd");
    assert_eq!(enc("é*=&%", true), "%C3%A9%2A%3D%26%25");
    // s3-tests' test_bucket_list_encoding_basic prefixes.
    assert_eq!(enc("foo+1/", false), "foo%2B1/");
    assert_eq!(enc("quux ab/", false), "quux%20ab/");
}

#[test]
fn percent_decoding() {
    assert_eq!(percent_decode("a%20b%2Bc+d").unwrap(), "a b+c+d");
    assert_eq!(percent_decode("%C3%a9").unwrap(), "é");
    assert_eq!(percent_decode("plain").unwrap(), "plain");
    for bad in ["%", "%2", "a%zz", "%G0", "abc%4"] {
        let e = percent_decode(bad).expect_err(bad);
        assert_eq!(e.code(), Code::InvalidURI);
    }
    assert_eq!(percent_decode("%FF"), Err(NameError::NotUtf8));
    assert_eq!(percent_decode("%C3"), Err(NameError::NotUtf8));
}

#[test]
fn query_strings() {
    let q =
        parse_query("list-type=2&prefix=a+b%2Bc%2F&delimiter=%2F&uploads&x=&&encoding-type=url")
            .unwrap();
    let want: Vec<(String, String)> = [
        ("list-type", "2"),
        ("prefix", "a b+c/"),
        ("delimiter", "/"),
        ("uploads", ""),
        ("x", ""),
        ("encoding-type", "url"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(q, want);
    assert_eq!(parse_query("").unwrap(), vec![]);
    // Only the first '=' splits.
    assert_eq!(
        parse_query("X-Amz-Credential=a%2F20130524%2Fus-east-1&k=v=w").unwrap()[1],
        ("k".to_string(), "v=w".to_string())
    );
    assert_eq!(parse_query("a=%zz").unwrap_err().code(), Code::InvalidURI);
    let many = vec!["a=1"; MAX_QUERY_PAIRS + 1].join("&");
    assert!(matches!(
        parse_query(&many),
        Err(NameError::TooManyQueryPairs { .. })
    ));
    assert_eq!(
        parse_query(&vec!["a=1"; MAX_QUERY_PAIRS].join("&"))
            .unwrap()
            .len(),
        MAX_QUERY_PAIRS
    );
}

proptest! {
    #[test]
    fn no_panics(s in "\\PC{0,300}", b in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = valid_bucket(&s);
        let _ = key_path(&s);
        let _ = percent_decode(&s);
        let _ = parse_query(&s);
        let lossy = String::from_utf8_lossy(&b);
        let _ = valid_bucket(&lossy);
        let _ = key_path(&lossy);
        let _ = parse_query(&lossy);
    }

    #[test]
    fn encode_decode_round_trip(s in "\\PC{0,200}", slash in any::<bool>()) {
        let mut enc = String::new();
        uri_encode(&s, slash, &mut enc);
        prop_assert!(enc.bytes().all(|b| b.is_ascii_graphic()));
        prop_assert_eq!(percent_decode(&enc).unwrap(), s.clone());
        let q = parse_query(&format!("k={enc}")).unwrap();
        prop_assert_eq!(&q[0].1, &s);
    }

    #[test]
    fn valid_buckets_follow_the_rules(s in "[a-z0-9.-]{1,70}") {
        if valid_bucket(&s).is_ok() {
            prop_assert!((3..=63).contains(&s.len()));
            prop_assert!(!s.contains(".."));
            prop_assert!(!s.starts_with(['.', '-']) && !s.ends_with(['.', '-']));
        }
    }

    #[test]
    fn accepted_keys_rejoin(s in "[a-z./]{1,40}") {
        if let Ok(k) = key_path(&s) {
            let mut joined = k.segments.join("/");
            if k.dir_marker { joined.push('/'); }
            prop_assert_eq!(joined.as_str(), s.as_str());
            prop_assert!(k.segments.iter().all(|g| !g.is_empty() && *g != "." && *g != ".."));
        }
    }
}
