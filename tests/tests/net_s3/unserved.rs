//! What S3 defines and pktfs does not do is answered 501 NotImplemented
//! with nothing stored: per operation, every request header and query
//! sub-resource that would change its meaning (docs/S3.md, "Headers and
//! sub-resources"). After each refusal: the new key absent, the existing
//! object unchanged, no part recorded, no upload or bucket made, nothing
//! deleted. And the headers that are harmless to ignore are served.

use super::{code, create_upload, list_parts, md5_etag, ok, Response, S3};

/// One request: (what, method, path, query, headers, body).
type Case = (
    &'static str,
    &'static str,
    String,
    String,
    Vec<(&'static str, String)>,
    Vec<u8>,
);

const EXISTING: &[u8] = b"the object that must stay as it is";

fn send(s: &S3, c: &Case) -> Response {
    let h: Vec<(&str, &str)> = c.4.iter().map(|(n, v)| (*n, v.as_str())).collect();
    s.req_with(&s.rw, c.1, &c.2, &c.3, &h, &c.5)
}

/// Headers that ask for what is not done when an object is stored.
fn storing_headers() -> Vec<(&'static str, &'static str)> {
    vec![
        ("x-amz-acl", "public-read"),
        ("x-amz-acl", "authenticated-read"),
        ("x-amz-grant-full-control", "id=\"abc\""),
        (
            "x-amz-grant-read",
            "uri=\"http://acs.amazonaws.com/groups/global/AllUsers\"",
        ),
        ("x-amz-grant-read-acp", "id=\"abc\""),
        ("x-amz-grant-write-acp", "id=\"abc\""),
        ("x-amz-storage-class", "GLACIER"),
        ("x-amz-storage-class", "STANDARD_IA"),
        ("x-amz-server-side-encryption", "AES256"),
        ("x-amz-server-side-encryption", "aws:kms"),
        (
            "x-amz-server-side-encryption-aws-kms-key-id",
            "arn:aws:kms:k",
        ),
        ("x-amz-server-side-encryption-context", "e30="),
        ("x-amz-server-side-encryption-bucket-key-enabled", "true"),
        ("x-amz-server-side-encryption-customer-algorithm", "AES256"),
        ("x-amz-server-side-encryption-customer-key", "a2V5"),
        ("x-amz-server-side-encryption-customer-key-md5", "bWQ1"),
        ("x-amz-tagging", "project=x"),
        ("x-amz-object-lock-mode", "GOVERNANCE"),
        (
            "x-amz-object-lock-retain-until-date",
            "2100-01-01T00:00:00Z",
        ),
        ("x-amz-object-lock-legal-hold", "ON"),
        ("x-amz-website-redirect-location", "/elsewhere"),
    ]
}

struct World {
    s: S3,
    upload: String,
    uploads: usize,
}

impl World {
    fn new() -> World {
        let s = super::s3_server();
        ok(&s.put("/unb", b""));
        ok(&s.put("/unb/exists", EXISTING));
        ok(&s.put("/unb/other", b"another object"));
        let upload = create_upload(&s, "/unb/mp", &[]);
        let uploads = World::count_uploads(&s);
        World { s, upload, uploads }
    }

    fn count_uploads(s: &S3) -> usize {
        let r = s.req(&s.rw, "GET", "/unb", "uploads=", b"");
        ok(&r);
        String::from_utf8_lossy(&r.body).matches("<Upload>").count()
    }

    /// Nothing of a refused request is in the image.
    #[track_caller]
    fn nothing_stored(&self, what: &str) {
        let s = &self.s;
        assert!(
            s.srv.lookup("/unb/new").is_none(),
            "{what}: /unb/new stored"
        );
        assert!(s.srv.lookup("/unb-new").is_none(), "{what}: a bucket made");
        assert_eq!(
            s.srv.read("/unb/exists").as_deref(),
            Some(EXISTING),
            "{what}: /unb/exists changed"
        );
        assert_eq!(
            s.get("/unb/exists").header("etag"),
            Some(md5_etag(EXISTING).as_str()),
            "{what}: /unb/exists's metadata changed"
        );
        assert_eq!(
            s.srv.read("/unb/other").as_deref(),
            Some(&b"another object"[..]),
            "{what}: /unb/other changed"
        );
        assert!(
            list_parts(s, "/unb/mp", &self.upload).is_empty(),
            "{what}: a part was recorded"
        );
        assert_eq!(
            World::count_uploads(s),
            self.uploads,
            "{what}: an upload was made or ended"
        );
    }

    #[track_caller]
    fn refused(&self, c: &Case) {
        let r = send(&self.s, c);
        // A HEAD's answer has no body to name the code.
        let got = match c.1 {
            "HEAD" => "NotImplemented".to_string(),
            _ => code(&r),
        };
        assert_eq!(
            (r.status, got.as_str()),
            (501, "NotImplemented"),
            "{} {} {}?{} {:?}: {}",
            c.0,
            c.1,
            c.2,
            c.3,
            c.4,
            String::from_utf8_lossy(&r.body)
        );
        self.nothing_stored(&format!("{} {:?}", c.0, c.4));
    }
}

fn case(
    what: &'static str,
    method: &'static str,
    path: &str,
    query: &str,
    h: &[(&'static str, &str)],
    body: &[u8],
) -> Case {
    (
        what,
        method,
        path.to_string(),
        query.to_string(),
        h.iter().map(|(n, v)| (*n, v.to_string())).collect(),
        body.to_vec(),
    )
}

#[test]
fn object_writes_with_unserved_headers_store_nothing() {
    let w = World::new();
    let u = w.upload.clone();
    let part_q = format!("partNumber=1&uploadId={u}");
    for (n, v) in storing_headers() {
        for c in [
            case("PutObject", "PUT", "/unb/new", "", &[(n, v)], b"body"),
            case(
                "PutObject over",
                "PUT",
                "/unb/exists",
                "",
                &[(n, v)],
                b"body",
            ),
            case(
                "CopyObject",
                "PUT",
                "/unb/new",
                "",
                &[("x-amz-copy-source", "/unb/exists"), (n, v)],
                b"",
            ),
            case(
                "CopyObject over",
                "PUT",
                "/unb/other",
                "",
                &[("x-amz-copy-source", "/unb/exists"), (n, v)],
                b"",
            ),
            case(
                "CreateMultipartUpload",
                "POST",
                "/unb/new",
                "uploads=",
                &[(n, v)],
                b"",
            ),
        ] {
            w.refused(&c);
        }
    }
    let sse_c = [
        ("x-amz-server-side-encryption-customer-algorithm", "AES256"),
        ("x-amz-server-side-encryption-customer-key", "a2V5"),
        ("x-amz-server-side-encryption-customer-key-md5", "bWQ1"),
    ];
    let copy_sse_c = [
        (
            "x-amz-copy-source-server-side-encryption-customer-algorithm",
            "AES256",
        ),
        (
            "x-amz-copy-source-server-side-encryption-customer-key",
            "a2V5",
        ),
        (
            "x-amz-copy-source-server-side-encryption-customer-key-md5",
            "bWQ1",
        ),
    ];
    let mut cases = vec![
        case(
            "PutObject append",
            "PUT",
            "/unb/exists",
            "",
            &[("x-amz-write-offset-bytes", "34")],
            b"appended",
        ),
        case(
            "PutObject If-None-Match etag",
            "PUT",
            "/unb/exists",
            "",
            &[("if-none-match", &md5_etag(EXISTING))],
            b"x",
        ),
        case(
            "PutObject both conditions",
            "PUT",
            "/unb/exists",
            "",
            &[("if-none-match", "*"), ("if-match", &md5_etag(EXISTING))],
            b"x",
        ),
        case(
            "CopyObject range",
            "PUT",
            "/unb/new",
            "",
            &[
                ("x-amz-copy-source", "/unb/exists"),
                ("x-amz-copy-source-range", "bytes=0-3"),
            ],
            b"",
        ),
        case(
            "CopyObject checksum not stored",
            "PUT",
            "/unb/new",
            "",
            &[
                ("x-amz-copy-source", "/unb/exists"),
                ("x-amz-checksum-algorithm", "SHA256"),
            ],
            b"",
        ),
        case(
            "CopyObject version",
            "PUT",
            "/unb/new",
            "",
            &[("x-amz-copy-source", "/unb/exists?versionId=3HL4kqtJ")],
            b"",
        ),
        case(
            "UploadPart conditional",
            "PUT",
            "/unb/mp",
            &part_q,
            &[("if-none-match", "*")],
            b"part",
        ),
        case(
            "UploadPartCopy version",
            "PUT",
            "/unb/mp",
            &part_q,
            &[("x-amz-copy-source", "/unb/exists?versionId=3HL4kqtJ")],
            b"",
        ),
        case(
            "CreateMultipartUpload conditional",
            "POST",
            "/unb/new",
            "uploads=",
            &[("if-none-match", "*")],
            b"",
        ),
        case(
            "AbortMultipartUpload conditional",
            "DELETE",
            "/unb/mp",
            &format!("uploadId={u}"),
            &[("if-match", "\"x\"")],
            b"",
        ),
    ];
    for (n, v) in sse_c {
        cases.push(case(
            "UploadPart SSE-C",
            "PUT",
            "/unb/mp",
            &part_q,
            &[(n, v)],
            b"part",
        ));
        cases.push(case(
            "UploadPartCopy SSE-C",
            "PUT",
            "/unb/mp",
            &part_q,
            &[("x-amz-copy-source", "/unb/exists"), (n, v)],
            b"",
        ));
    }
    for (n, v) in copy_sse_c {
        cases.push(case(
            "UploadPartCopy source SSE-C",
            "PUT",
            "/unb/mp",
            &part_q,
            &[("x-amz-copy-source", "/unb/exists"), (n, v)],
            b"",
        ));
        cases.push(case(
            "CopyObject source SSE-C",
            "PUT",
            "/unb/new",
            "",
            &[("x-amz-copy-source", "/unb/exists"), (n, v)],
            b"",
        ));
    }
    for c in &cases {
        w.refused(c);
    }
    w.s.srv.check();
}

#[test]
fn reads_deletes_and_buckets_with_unserved_requests_do_nothing() {
    let w = World::new();
    let mut cases = vec![
        case("GetObject version", "GET", "/unb/exists", "versionId=3HL4kqtJ", &[], b""),
        case("HeadObject version", "HEAD", "/unb/exists", "versionId=3HL4kqtJ", &[], b""),
        case(
            "GetObject SSE-C",
            "GET",
            "/unb/exists",
            "",
            &[("x-amz-server-side-encryption-customer-algorithm", "AES256")],
            b"",
        ),
        case("DeleteObject version", "DELETE", "/unb/exists", "versionId=3HL4kqtJ", &[], b""),
        case(
            "DeleteObject MFA",
            "DELETE",
            "/unb/exists",
            "",
            &[("x-amz-mfa", "20899872 301749")],
            b"",
        ),
        case(
            "DeleteObject size condition",
            "DELETE",
            "/unb/exists",
            "",
            &[("x-amz-if-match-size", "1")],
            b"",
        ),
        case(
            "DeleteObject time condition",
            "DELETE",
            "/unb/exists",
            "",
            &[("x-amz-if-match-last-modified-time", "Mon, 01 Jan 2001 00:00:00 GMT")],
            b"",
        ),
        case(
            "DeleteObject If-None-Match",
            "DELETE",
            "/unb/exists",
            "",
            &[("if-none-match", "*")],
            b"",
        ),
        case(
            "DeleteObject If-Unmodified-Since",
            "DELETE",
            "/unb/exists",
            "",
            &[("if-unmodified-since", "Mon, 01 Jan 2001 00:00:00 GMT")],
            b"",
        ),
        case(
            "CreateBucket ACL",
            "PUT",
            "/unb-new",
            "",
            &[("x-amz-acl", "public-read-write")],
            b"",
        ),
        case(
            "CreateBucket grant",
            "PUT",
            "/unb-new",
            "",
            &[("x-amz-grant-write", "id=\"abc\"")],
            b"",
        ),
        case(
            "CreateBucket object lock",
            "PUT",
            "/unb-new",
            "",
            &[("x-amz-bucket-object-lock-enabled", "true")],
            b"",
        ),
        case(
            "CreateBucket tags",
            "PUT",
            "/unb-new",
            "",
            &[],
            b"<CreateBucketConfiguration><Tags><Tag><Key>a</Key><Value>b</Value></Tag></Tags></CreateBucketConfiguration>",
        ),
        case(
            "CreateBucket directory bucket",
            "PUT",
            "/unb-new",
            "",
            &[],
            b"<CreateBucketConfiguration><Location><Type>AvailabilityZone</Type><Name>use1-az4</Name></Location><Bucket><Type>Directory</Type></Bucket></CreateBucketConfiguration>",
        ),
        case("PutBucketVersioning", "PUT", "/unb", "versioning=", &[], b"<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>"),
        case("RenameObject", "PUT", "/unb/new", "renameObject=", &[("x-amz-rename-source", "/unb/exists")], b""),
        case("GetBucketPolicyStatus", "GET", "/unb", "policyStatus=", &[], b""),
        case("CreateSession", "GET", "/unb", "session=", &[], b""),
    ];
    // Sub-resources of objects and buckets (each would otherwise be taken
    // for a PutObject, a listing or a CreateBucket).
    for sub in [
        "acl",
        "tagging",
        "retention",
        "legal-hold",
        "torrent",
        "attributes",
    ] {
        cases.push(case(
            "object sub-resource",
            "PUT",
            "/unb/exists",
            &format!("{sub}="),
            &[],
            b"<x/>",
        ));
        cases.push(case(
            "object sub-resource",
            "GET",
            "/unb/exists",
            &format!("{sub}="),
            &[],
            b"",
        ));
    }
    cases.push(case(
        "RestoreObject",
        "POST",
        "/unb/exists",
        "restore=",
        &[],
        b"<RestoreRequest/>",
    ));
    cases.push(case(
        "SelectObjectContent",
        "POST",
        "/unb/exists",
        "select=&select-type=2",
        &[],
        b"<x/>",
    ));
    for sub in [
        "acl",
        "policy",
        "lifecycle",
        "tagging",
        "website",
        "logging",
        "notification",
        "replication",
        "encryption",
        "object-lock",
        "accelerate",
        "ownershipControls",
        "publicAccessBlock",
        "requestPayment",
    ] {
        cases.push(case(
            "bucket sub-resource",
            "PUT",
            "/unb",
            &format!("{sub}="),
            &[],
            b"<x/>",
        ));
        cases.push(case(
            "bucket sub-resource",
            "GET",
            "/unb",
            &format!("{sub}="),
            &[],
            b"",
        ));
        cases.push(case(
            "bucket sub-resource",
            "DELETE",
            "/unb",
            &format!("{sub}="),
            &[],
            b"",
        ));
    }
    for c in &cases {
        w.refused(c);
    }
    // DeleteObjects naming versions or conditions: nothing deleted.
    for el in [
        "<VersionId>3HL4kqtJ</VersionId>",
        "<ETag>\"0123\"</ETag>",
        "<LastModifiedTime>2001-01-01T00:00:00Z</LastModifiedTime>",
        "<Size>1</Size>",
    ] {
        let body = format!(
            "<Delete><Object><Key>other</Key></Object><Object><Key>exists</Key>{el}</Object></Delete>"
        );
        let c = case(
            "DeleteObjects",
            "POST",
            "/unb",
            "delete=",
            &[("content-md5", &super::base64_md5(body.as_bytes()))],
            body.as_bytes(),
        );
        w.refused(&c);
    }
    let body = b"<Delete><Object><Key>exists</Key></Object></Delete>";
    w.refused(&case(
        "DeleteObjects MFA",
        "POST",
        "/unb",
        "delete=",
        &[
            ("content-md5", &super::base64_md5(body)),
            ("x-amz-mfa", "20899872 301749"),
        ],
        body,
    ));
    // A Complete that is refused leaves the upload (with its part) and
    // stores nothing.
    let r = w.s.req(
        &w.s.rw,
        "PUT",
        "/unb/mp",
        &format!("partNumber=1&uploadId={}", w.upload),
        b"one part",
    );
    ok(&r);
    let tag = r.header("etag").unwrap().to_string();
    let body = super::complete_body(&[(1, tag, String::new())]);
    for h in [
        ("x-amz-server-side-encryption-customer-algorithm", "AES256"),
        ("if-none-match", "\"0123\""),
    ] {
        let r = w.s.req_with(
            &w.s.rw,
            "POST",
            "/unb/mp",
            &format!("uploadId={}", w.upload),
            &[h],
            body.as_bytes(),
        );
        assert_eq!(
            (r.status, code(&r).as_str()),
            (501, "NotImplemented"),
            "{h:?}"
        );
        assert!(w.s.srv.lookup("/unb/mp").is_none());
        assert_eq!(list_parts(&w.s, "/unb/mp", &w.upload).len(), 1);
    }
    w.s.srv.check();
}

/// Headers that ask for what pktfs does anyway, or that concern only
/// what pktfs does not have (billing, account ownership, ACLs it never
/// keeps), are served.
#[test]
fn harmless_headers_are_served() {
    let w = World::new();
    let s = &w.s;
    let harmless: &[(&str, &str)] = &[
        ("x-amz-acl", "private"),
        ("x-amz-acl", "bucket-owner-full-control"),
        ("x-amz-storage-class", "STANDARD"),
        ("x-amz-tagging", ""),
        ("x-amz-request-payer", "requester"),
        ("x-amz-expected-bucket-owner", "111122223333"),
        ("x-amz-sdk-checksum-algorithm", "CRC32C"),
        ("if-modified-since", "Fri, 01 Jan 2100 00:00:00 GMT"),
    ];
    for (k, (n, v)) in harmless.iter().enumerate() {
        let key = format!("/unb/ok{k}");
        let r = s.req_with(&s.rw, "PUT", &key, "", &[(n, v)], b"stored");
        ok(&r);
        assert_eq!(s.srv.read(&key).unwrap(), b"stored", "{n}: {v}");
        let r = s.req_with(
            &s.rw,
            "PUT",
            &format!("{key}-copy"),
            "",
            &[("x-amz-copy-source", "/unb/exists"), (n, v)],
            b"",
        );
        ok(&r);
        assert_eq!(s.srv.read(&format!("{key}-copy")).unwrap(), EXISTING);
    }
    let r = s.req_with(
        &s.rw,
        "PUT",
        "/unb/cs",
        "",
        &[
            ("x-amz-copy-source", "/unb/exists"),
            ("x-amz-checksum-algorithm", "CRC32C"),
            ("x-amz-tagging-directive", "COPY"),
        ],
        b"",
    );
    ok(&r);
    assert_eq!(
        super::xml_field(&r, "ChecksumCRC32C"),
        Some(pktfs_s3::checksum::Value::Crc32c(crc32c::crc32c(EXISTING)).to_base64())
    );
    // The one version of an object without versioning is "null".
    let r = s.req(&s.rw, "GET", "/unb/exists", "versionId=null", b"");
    ok(&r);
    assert_eq!(r.body, EXISTING);
    let r = s.req_with(
        &s.rw,
        "PUT",
        "/unb-new",
        "",
        &[
            ("x-amz-acl", "private"),
            ("x-amz-bucket-object-lock-enabled", "false"),
            ("x-amz-object-ownership", "BucketOwnerEnforced"),
        ],
        b"",
    );
    ok(&r);
    assert!(s.srv.lookup("/unb-new").is_some());
    let id = create_upload(s, "/unb/mp2", &[("x-amz-storage-class", "STANDARD")]);
    assert!(list_parts(s, "/unb/mp2", &id).is_empty());
    s.srv.check();
}
