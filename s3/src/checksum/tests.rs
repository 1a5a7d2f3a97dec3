//! Known vectors (the CRC catalogue's check values for "123456789", RFC
//! 1321 / FIPS 180 digests of "" and "abc"), S3 spellings, and
//! combination against one pass over the concatenation.
//!
//! The multipart vectors (parts "hello ", "world", "!" × 10) were computed
//! independently with Python's zlib, hashlib and a bitwise CRC32C and
//! CRC64/NVME, following the rules S3 documents: composite = checksum of
//! the parts' raw checksums, then `-N`.

use proptest::prelude::*;

use super::*;

const CHECK: &[u8] = b"123456789";

fn hash_all(w: Wanted, data: &[u8]) -> Digests {
    let mut h = BodyHasher::new(w);
    h.update(data);
    h.finish()
}

fn all_wanted() -> Wanted {
    Wanted {
        md5: true,
        sha256: true,
        crc32: true,
        crc64nvme: true,
        sha1: true,
    }
}

#[test]
fn catalogue_check_values() {
    let d = hash_all(all_wanted(), CHECK);
    assert_eq!(d.crc32, Some(0xCBF4_3926));
    assert_eq!(d.crc64nvme, Some(0xAE8B_1486_0A79_9888));
    assert_eq!(crc32c::crc32c(CHECK), 0xE306_9283);
}

#[test]
fn digests_of_empty_and_abc() {
    let e = hash_all(all_wanted(), b"");
    assert_eq!(
        hex::encode(e.md5.unwrap()),
        "d41d8cd98f00b204e9800998ecf8427e"
    );
    assert_eq!(
        hex::encode(e.sha256.unwrap()),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        hex::encode(e.sha1.unwrap()),
        "da39a3ee5e6b4b0d3255bfef95601890afd80709"
    );
    assert_eq!(e.crc32, Some(0));
    assert_eq!(e.crc64nvme, Some(0));

    let a = hash_all(all_wanted(), b"abc");
    assert_eq!(
        hex::encode(a.md5.unwrap()),
        "900150983cd24fb0d6963f7d28e17f72"
    );
    assert_eq!(
        hex::encode(a.sha256.unwrap()),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        hex::encode(a.sha1.unwrap()),
        "a9993e364706816aba3e25717850c26c9cd0d89d"
    );
}

#[test]
fn only_wanted_digests_are_computed() {
    let d = hash_all(
        Wanted {
            md5: true,
            ..Wanted::default()
        },
        b"abc",
    );
    assert!(d.md5.is_some());
    assert_eq!(
        (d.sha256, d.crc32, d.crc64nvme, d.sha1),
        (None, None, None, None)
    );
    assert!(BodyHasher::new(Wanted::default()).is_idle());
    let w = Wanted::default().with(Algorithm::Crc32c);
    assert_eq!(w, Wanted::default(), "CRC32C comes from the records");
    assert!(Wanted::default().with(Algorithm::Sha1).sha1);
}

#[test]
fn pieces_hash_like_one_buffer() {
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
    let whole = hash_all(all_wanted(), &data);
    let mut h = BodyHasher::new(all_wanted());
    for piece in data.chunks(777) {
        h.update(piece);
    }
    assert_eq!(h.len_bytes(), 10_000);
    assert_eq!(h.finish(), whole);
}

#[test]
fn values_spelled_as_s3_sends_them() {
    let v = Value::parse(Algorithm::Crc32, "y/Q5Jg==").unwrap();
    assert_eq!(v, Value::Crc32(0xCBF4_3926));
    assert_eq!(v.to_base64(), "y/Q5Jg==");
    let c = Value::parse(Algorithm::Crc32c, "4waSgw==").unwrap();
    assert_eq!(c, Value::Crc32c(0xE306_9283));
    let n = Value::parse(Algorithm::Crc64Nvme, "rosUhgp5mIg=").unwrap();
    assert_eq!(n, Value::Crc64Nvme(0xAE8B_1486_0A79_9888));
    assert_eq!(n.to_base64(), "rosUhgp5mIg=");
    // SHA-256 of "" as the SDKs send it.
    let s = Value::parse(
        Algorithm::Sha256,
        "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
    )
    .unwrap();
    assert_eq!(
        s,
        Value::Sha256(hash_all(all_wanted(), b"").sha256.unwrap())
    );
    assert_eq!(s.algorithm(), Algorithm::Sha256);
    // Unpadded and surrounded by whitespace is the same value.
    assert_eq!(Value::parse(Algorithm::Crc32, " y/Q5Jg ").unwrap(), v);
}

#[test]
fn bad_values_are_errors() {
    for (alg, bad) in [
        (Algorithm::Crc32, ""),
        (Algorithm::Crc32, "y/Q5"),     // 3 bytes
        (Algorithm::Crc32, "y/Q5JgA="), // 5 bytes
        (Algorithm::Crc32c, "not base64!"),
        (Algorithm::Crc32c, "y/Q5Jg==-3"), // a composite is not a part value
        (Algorithm::Crc64Nvme, "y/Q5Jg=="), // 4 bytes for 8
        (
            Algorithm::Sha1,
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
        ),
        (Algorithm::Sha256, "2jmj7l5rSw0yVb/vlWAYkK/YBwk="), // a SHA-1
        (Algorithm::Sha256, &"A".repeat(100_000)),
    ] {
        let e = Value::parse(alg, bad).expect_err(bad);
        assert_eq!(e.code(), crate::error::Code::InvalidRequest, "{e}");
        assert!(e.to_string().contains(alg.header_name()), "{e}");
    }
    // Non-zero trailing bits would give one value two spellings.
    assert!(Value::parse(Algorithm::Crc32, "y/Q5Jh==").is_err());
}

#[test]
fn content_md5_and_etags() {
    // MD5("") as a Content-MD5 header.
    let md5 = content_md5("1B2M2Y8AsgTpgAmY7PhCfg==").unwrap();
    assert_eq!(etag(&md5), "\"d41d8cd98f00b204e9800998ecf8427e\"");
    assert_eq!(etag_md5("\"d41d8cd98f00b204e9800998ecf8427e\""), Some(md5));
    assert_eq!(etag_md5("D41D8CD98F00B204E9800998ECF8427E"), Some(md5));
    assert_eq!(etag_md5("\"3a54b4664de20510445c8d2a210269d4-3\""), None);
    assert_eq!(etag_md5("\"d41d8cd98f00b204e9800998ecf8427\""), None);
    assert_eq!(etag_md5("\"zz1d8cd98f00b204e9800998ecf8427e\""), None);
    for bad in [
        "",
        "1B2M2Y8AsgTpgAmY7PhC",
        "d41d8cd98f00b204e9800998ecf8427e",
    ] {
        let e = content_md5(bad).expect_err(bad);
        assert_eq!(e.code(), crate::error::Code::InvalidDigest);
    }
}

const PARTS: [&[u8]; 3] = [b"hello ", b"world", b"!!!!!!!!!!"];

fn part_values(alg: Algorithm) -> Vec<Value> {
    PARTS
        .iter()
        .map(|p| match alg {
            Algorithm::Crc32c => Value::Crc32c(crc32c::crc32c(p)),
            a => hash_all(Wanted::default().with(a), p).value(a).unwrap(),
        })
        .collect()
}

#[test]
fn multipart_etag_vector() {
    let md5s: Vec<[u8; 16]> = PARTS
        .iter()
        .map(|p| hash_all(all_wanted(), p).md5.unwrap())
        .collect();
    assert_eq!(
        multipart_etag(&md5s),
        "\"3a54b4664de20510445c8d2a210269d4-3\""
    );
}

#[test]
fn composite_vectors() {
    assert_eq!(
        composite(&part_values(Algorithm::Crc32)).unwrap(),
        "hs4x4Q==-3"
    );
    assert_eq!(
        composite(&part_values(Algorithm::Crc32c)).unwrap(),
        "TfIQGQ==-3"
    );
    assert_eq!(
        composite(&part_values(Algorithm::Sha1)).unwrap(),
        "tDdyq0jXxm0WgZ1ZkcmycamLfUc=-3"
    );
    assert_eq!(
        composite(&part_values(Algorithm::Sha256)).unwrap(),
        "uLXNhocVBFPbjjbVnRiJqEJy27lCvETKJzKYvlaWvyY=-3"
    );
    assert_eq!(
        composite(&part_values(Algorithm::Crc64Nvme)),
        Err(ChecksumError::NotComposite("CRC64NVME"))
    );
}

#[test]
fn full_object_vectors() {
    let with_len = |alg| -> Vec<(Value, u64)> {
        part_values(alg)
            .into_iter()
            .zip(PARTS.iter().map(|p| p.len() as u64))
            .collect()
    };
    assert_eq!(
        combine_full(&with_len(Algorithm::Crc32))
            .unwrap()
            .to_base64(),
        "OTLcHA=="
    );
    assert_eq!(
        combine_full(&with_len(Algorithm::Crc32c))
            .unwrap()
            .to_base64(),
        "GB0FHA=="
    );
    assert_eq!(
        combine_full(&with_len(Algorithm::Crc64Nvme))
            .unwrap()
            .to_base64(),
        "X7oGJIYr1sY="
    );
    assert_eq!(
        combine_full(&with_len(Algorithm::Sha256)),
        Err(ChecksumError::NotCombinable("SHA256"))
    );
    // One SHA part alone is refused too, not passed through.
    assert!(combine_full(&with_len(Algorithm::Sha1)[..1]).is_err());
}

#[test]
fn crc64nvme_combine_published_vector() {
    // "test1", "test2" and "test1test2", as quilt's S3 hashing tests list
    // them.
    assert_eq!(crc_fast::crc64_nvme(b"test1"), 0x7585_D198_A2D5_B287);
    assert_eq!(
        crc64nvme_combine(0x7585_D198_A2D5_B287, 0xF436_C0C0_F28B_290C, 5),
        0x215F_4B83_B862_62F3
    );
}

#[test]
fn multipart_refusals() {
    assert_eq!(composite(&[]), Err(ChecksumError::NoParts));
    assert_eq!(combine_full(&[]), Err(ChecksumError::NoParts));
    let mixed = [Value::Crc32(1), Value::Crc32c(1)];
    assert!(matches!(
        composite(&mixed),
        Err(ChecksumError::MixedAlgorithms { .. })
    ));
    assert!(matches!(
        combine_full(&[(Value::Crc32(1), 1), (Value::Crc64Nvme(1), 1)]),
        Err(ChecksumError::MixedAlgorithms { .. })
    ));
    let too_many = vec![Value::Crc32c(0); MAX_PARTS + 1];
    assert!(matches!(
        composite(&too_many),
        Err(ChecksumError::TooManyParts { .. })
    ));
}

#[test]
fn names_round_trip() {
    for a in Algorithm::ALL {
        assert_eq!(Algorithm::from_header_name(a.header_name()), Some(a));
        assert_eq!(
            Algorithm::from_header_name(&a.header_name().to_ascii_uppercase()),
            Some(a)
        );
        assert_eq!(Algorithm::from_name(a.name()), Some(a));
        assert_eq!(Algorithm::from_name(&a.name().to_lowercase()), Some(a));
        assert_eq!(Algorithm::from_xml_name(a.xml_name()), Some(a));
        assert!(a.supports(a.default_type()));
    }
    assert_eq!(Algorithm::from_header_name("x-amz-checksum-md5"), None);
    assert_eq!(
        Algorithm::from_header_name("x-amz-checksum-algorithm"),
        None
    );
    assert_eq!(Algorithm::from_name("MD5"), None);
    assert_eq!(Algorithm::from_xml_name("checksumcrc32c"), None);
    assert!(!Algorithm::Crc64Nvme.supports(ChecksumType::Composite));
    assert!(!Algorithm::Sha256.supports(ChecksumType::FullObject));
    assert_eq!(
        ChecksumType::from_name("full_object"),
        Some(ChecksumType::FullObject)
    );
    assert_eq!(ChecksumType::from_name("PARTIAL"), None);
}

proptest! {
    #[test]
    fn combine_equals_one_pass(a in proptest::collection::vec(any::<u8>(), 0..3000),
                               b in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let ab: Vec<u8> = a.iter().chain(&b).copied().collect();
        let n = b.len() as u64;
        prop_assert_eq!(
            crc32c_combine(crc32c::crc32c(&a), crc32c::crc32c(&b), n),
            crc32c::crc32c(&ab)
        );
        prop_assert_eq!(
            crc32_combine(crc_fast::crc32_iso_hdlc(&a), crc_fast::crc32_iso_hdlc(&b), n),
            crc_fast::crc32_iso_hdlc(&ab)
        );
        prop_assert_eq!(
            crc64nvme_combine(crc_fast::crc64_nvme(&a), crc_fast::crc64_nvme(&b), n),
            crc_fast::crc64_nvme(&ab)
        );
    }

    #[test]
    fn full_object_equals_whole(parts in proptest::collection::vec(
        proptest::collection::vec(any::<u8>(), 0..500), 1..8)) {
        let whole: Vec<u8> = parts.concat();
        for alg in [Algorithm::Crc32, Algorithm::Crc32c, Algorithm::Crc64Nvme] {
            let value = |p: &[u8]| match alg {
                Algorithm::Crc32c => Value::Crc32c(crc32c::crc32c(p)),
                a => hash_all(Wanted::default().with(a), p).value(a).unwrap(),
            };
            let vals: Vec<(Value, u64)> =
                parts.iter().map(|p| (value(p), p.len() as u64)).collect();
            prop_assert_eq!(combine_full(&vals).unwrap(), value(&whole));
        }
    }

    #[test]
    fn combine_huge_lengths_agree_with_crc_fast(a in any::<u32>(), b in any::<u32>(),
                                               n in any::<u64>()) {
        let theirs = crc_fast::checksum_combine(
            crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(a), u64::from(b), n) as u32;
        prop_assert_eq!(crc32c_combine(a, b, n), theirs);
    }

    #[test]
    fn parse_never_panics(s in ".{0,80}") {
        for alg in Algorithm::ALL {
            if let Ok(v) = Value::parse(alg, &s) {
                prop_assert_eq!(Value::parse(alg, &v.to_base64()).unwrap(), v);
            }
        }
        let _ = content_md5(&s);
        let _ = etag_md5(&s);
    }
}

#[test]
fn mismatch_answers() {
    let e = mismatch(Algorithm::Crc32c);
    assert_eq!(e.code, crate::error::Code::BadDigest);
    assert_eq!(e.status(), 400);
    assert!(e.message.contains("CRC32C"), "{e}");
    assert_eq!(md5_mismatch().code, crate::error::Code::BadDigest);
}
