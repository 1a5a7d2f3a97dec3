//! The S3 endpoint over real sockets, with requests signed here
//! (`pktfs_s3::sigv4::Signer`): what is stored and where, what a refusal
//! leaves (nothing), the listings against a model, multipart and copy
//! sharing buffers instead of copying bytes, and hostile framing.

use std::net::SocketAddr;

use pktfs_s3::keys::{Grant, KeyStore};
use pktfs_s3::sigv4::{PayloadMode, Signer};
use proptest::prelude::*;

use super::net_common::{server, wall_ns, Conn, Response, Server};

// UploadPartCopy; S3 preconditions against the S3 ETag; what is answered
// NotImplemented (and stores nothing).
mod conditions;
mod cors;
mod owners;
mod part_copy;
mod unserved;

const REGION: &str = "us-east-1";

/// A server with an S3 listener and two keys: `rw` (every bucket, read
/// and write) and `ro` (read only).
struct S3 {
    srv: Server,
    addr: SocketAddr,
    rw: Signer,
    ro: Signer,
}

fn s3_config(c: &mut pktfs_netpath::Config) {
    c.s3_listen = Some("127.0.0.1:0".parse().unwrap());
    // The S3 endpoint runs on the loops.
    if c.io == pktfs_netpath::IoMode::Threads {
        c.io = pktfs_netpath::IoMode::Auto;
    }
}

fn s3_server() -> S3 {
    let srv = server(256 << 20, s3_config);
    let mut ks = KeyStore::default();
    let now = now_s();
    let rw = {
        let k = ks
            .add(
                "rw",
                vec!["*=rw".parse::<Grant>().unwrap()],
                &[7u8; 64],
                now,
            )
            .unwrap();
        Signer::new(&k.id, &k.secret, REGION)
    };
    let ro = {
        let k = ks
            .add("ro", vec!["*=r".parse::<Grant>().unwrap()], &[9u8; 64], now)
            .unwrap();
        Signer::new(&k.id, &k.secret, REGION)
    };
    srv.vol.set_s3_keys_blob(Some(&ks.encode())).unwrap();
    let addr = srv.svc.as_ref().unwrap().s3_addr().expect("an S3 listener");
    S3 { srv, addr, rw, ro }
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A request's bytes, signed by `who` (None: anonymous), body sent as
/// is with a Content-Length.
fn signed(
    who: Option<&Signer>,
    method: &str,
    path: &str,
    query: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    payload: PayloadMode,
) -> Vec<u8> {
    let mut headers: Vec<(String, String)> = vec![("host".into(), "s3.test".into())];
    for (n, v) in extra {
        headers.push((n.to_string(), v.to_string()));
    }
    if let Some(s) = who {
        s.sign(method, path, query, &mut headers, &payload, now_s());
    }
    let target = if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    };
    let mut r = format!("{method} {target} HTTP/1.1\r\n");
    for (n, v) in &headers {
        r.push_str(&format!("{n}: {v}\r\n"));
    }
    if !headers.iter().any(|(n, _)| n == "content-length") {
        r.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    r.push_str("\r\n");
    let mut v = r.into_bytes();
    v.extend_from_slice(body);
    v
}

impl S3 {
    /// Free blocks with no server running: the loops lend packet buffers
    /// to the kernel (a buffer partly taken stays lent), so only a
    /// stopped server's count says what the files hold. The server is
    /// started again on the same image.
    fn free_at_rest(&mut self) -> u64 {
        self.srv.stop();
        let free = self.srv.free_blocks();
        let dir = std::mem::replace(&mut self.srv.dir, tempfile::tempdir().unwrap());
        self.srv = super::net_common::serve(dir, self.srv.vol.clone(), s3_config);
        self.addr = self.srv.svc.as_ref().unwrap().s3_addr().unwrap();
        free
    }

    fn send(&self, bytes: &[u8], head: bool) -> Response {
        let mut c = Conn::new(self.addr);
        c.send(bytes);
        c.response(head).expect("an answer")
    }

    /// A request signed by `who` with a signed payload.
    fn req(&self, who: &Signer, method: &str, path: &str, query: &str, body: &[u8]) -> Response {
        self.req_with(who, method, path, query, &[], body)
    }

    fn req_with(
        &self,
        who: &Signer,
        method: &str,
        path: &str,
        query: &str,
        extra: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        let p = PayloadMode::Sha256(pktfs_s3::sigv4::sha256(body));
        let b = signed(Some(who), method, path, query, extra, body, p);
        self.send(&b, method == "HEAD")
    }

    fn put(&self, path: &str, body: &[u8]) -> Response {
        self.req(&self.rw, "PUT", path, "", body)
    }

    fn get(&self, path: &str) -> Response {
        self.req(&self.rw, "GET", path, "", b"")
    }
}

/// A 200 answer (else the body says why).
#[track_caller]
fn ok(r: &Response) {
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

/// The S3 error code of an Error XML body.
fn code(r: &Response) -> String {
    let b = String::from_utf8_lossy(&r.body);
    let s = b.find("<Code>").map(|i| i + 6).unwrap_or(0);
    let e = b[s..].find("</Code>").map(|i| s + i).unwrap_or(s);
    b[s..e].to_string()
}

fn md5(b: &[u8]) -> [u8; 16] {
    let mut h = pktfs_s3::checksum::BodyHasher::new(pktfs_s3::checksum::Wanted {
        md5: true,
        ..Default::default()
    });
    h.update(b);
    h.finish().md5.unwrap()
}

fn md5_etag(b: &[u8]) -> String {
    pktfs_s3::checksum::etag(&md5(b))
}

/// The text of the first `<name>` element of an XML answer (entities
/// as sent).
fn xml_field(r: &Response, name: &str) -> Option<String> {
    let b = String::from_utf8_lossy(&r.body);
    let open = format!("<{name}>");
    let s = b.find(&open)? + open.len();
    let e = b[s..].find(&format!("</{name}>"))? + s;
    Some(b[s..e].to_string())
}

/// CreateMultipartUpload of `path` (with `extra` headers): its upload id.
fn create_upload(s: &S3, path: &str, extra: &[(&str, &str)]) -> String {
    let r = s.req_with(&s.rw, "POST", path, "uploads=", extra, b"");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    xml_field(&r, "UploadId").expect("an UploadId")
}

/// The parts ListParts lists: (number, ETag, size).
fn list_parts(s: &S3, path: &str, id: &str) -> Vec<(u32, String, u64)> {
    let r = s.req(&s.rw, "GET", path, &format!("uploadId={id}"), b"");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let b = String::from_utf8_lossy(&r.body).to_string();
    b.split("<Part>")
        .skip(1)
        .map(|p| {
            let f = |n: &str| {
                p.split(&format!("<{n}>"))
                    .nth(1)
                    .and_then(|x| x.split(&format!("</{n}>")).next())
                    .unwrap_or_else(|| panic!("no {n} in a listed part: {p}"))
                    .to_string()
            };
            (
                f("PartNumber").parse().unwrap(),
                f("ETag").replace("&quot;", "\""),
                f("Size").parse().unwrap(),
            )
        })
        .collect()
}

/// CompleteMultipartUpload's body for `parts` (number, ETag, extra
/// elements such as a checksum).
fn complete_body(parts: &[(u32, String, String)]) -> String {
    let mut b = String::from("<CompleteMultipartUpload>");
    for (n, tag, extra) in parts {
        b.push_str(&format!(
            "<Part><PartNumber>{n}</PartNumber><ETag>{tag}</ETag>{extra}</Part>"
        ));
    }
    b.push_str("</CompleteMultipartUpload>");
    b
}

#[test]
fn put_get_head_and_the_file_in_the_image() {
    let s = s3_server();
    ok(&s.put("/logs", b""));
    let data = super::net_common::data(300_000, 3);
    let r = s.put("/logs/2026/a.pcap", &data);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("etag"), Some(md5_etag(&data).as_str()));
    // The object is the file, at once.
    assert_eq!(s.srv.read("/logs/2026/a.pcap").unwrap(), data);
    let g = s.get("/logs/2026/a.pcap");
    ok(&g);
    assert_eq!(g.body, data);
    assert_eq!(g.header("etag"), Some(md5_etag(&data).as_str()));
    // Checksum mode: the CRC32C of the records, combined.
    let g = s.req_with(
        &s.rw,
        "HEAD",
        "/logs/2026/a.pcap",
        "",
        &[("x-amz-checksum-mode", "ENABLED")],
        b"",
    );
    let want = pktfs_s3::checksum::Value::Crc32c(crc32c::crc32c(&data)).to_base64();
    assert_eq!(g.header("x-amz-checksum-crc32c"), Some(want.as_str()));
    assert_eq!(g.header("content-length"), Some("300000"));
    // A range.
    let r = s.req_with(
        &s.rw,
        "GET",
        "/logs/2026/a.pcap",
        "",
        &[("range", "bytes=10-19")],
        b"",
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &data[10..20]);
    // Unknown key in a bucket: NoSuchKey; unknown bucket: NoSuchBucket.
    assert_eq!(code(&s.get("/logs/nope")), "NoSuchKey");
    assert_eq!(code(&s.get("/nobucket/x")), "NoSuchBucket");
    s.srv.check();
}

#[test]
fn refused_requests_store_nothing() {
    let mut s = s3_server();
    ok(&s.put("/bk1", b""));
    let body = b"never stored".to_vec();
    let sha = PayloadMode::Sha256(pktfs_s3::sigv4::sha256(&body));
    let free = s.free_at_rest();
    // Anonymous.
    let r = s.send(&signed(None, "PUT", "/bk1/x", "", &[], &body, sha), false);
    assert_eq!((r.status, code(&r).as_str()), (403, "AccessDenied"));
    // Unknown key.
    let ghost = Signer::new("PKAAAAAAAAAAAAAAAAAA", "secret", REGION);
    let r = s.send(
        &signed(Some(&ghost), "PUT", "/bk1/x", "", &[], &body, sha),
        false,
    );
    assert_eq!(code(&r), "InvalidAccessKeyId");
    // Right id, wrong secret.
    let wrong = Signer::new(&s.rw.access_key_id, "not the secret", REGION);
    let r = s.send(
        &signed(Some(&wrong), "PUT", "/bk1/x", "", &[], &body, sha),
        false,
    );
    assert_eq!(
        (r.status, code(&r).as_str()),
        (403, "SignatureDoesNotMatch")
    );
    // A body that is not the one signed.
    let mut b = signed(Some(&s.rw), "PUT", "/bk1/x", "", &[], &body, sha);
    let n = b.len();
    b[n - 1] ^= 1;
    let r = s.send(&b, false);
    assert_eq!(code(&r), "XAmzContentSHA256Mismatch");
    // A checksum that disagrees (CRC32C: from the records), Content-MD5.
    let bad = pktfs_s3::checksum::Value::Crc32c(crc32c::crc32c(&body) ^ 1).to_base64();
    let r = s.req_with(
        &s.rw,
        "PUT",
        "/bk1/x",
        "",
        &[("x-amz-checksum-crc32c", &bad)],
        &body,
    );
    assert_eq!((r.status, code(&r).as_str()), (400, "BadDigest"));
    let r = s.req_with(
        &s.rw,
        "PUT",
        "/bk1/x",
        "",
        &[("content-md5", "AAAAAAAAAAAAAAAAAAAAAA==")],
        &body,
    );
    assert_eq!(code(&r), "BadDigest");
    // A read-only key.
    let r = s.req(&s.ro, "PUT", "/bk1/x", "", &body);
    assert_eq!((r.status, code(&r).as_str()), (403, "AccessDenied"));
    // An expired presigned URL.
    let q =
        s.rw.presign("GET", "/bk1/x", "", "s3.test", 1, now_s() - 100);
    let r = s.send(
        format!("GET /bk1/x?{q} HTTP/1.1\r\nhost: s3.test\r\n\r\n").as_bytes(),
        false,
    );
    assert_eq!((r.status, code(&r).as_str()), (403, "AccessDenied"));
    // Nothing of any of them is in the image.
    assert!(s.srv.lookup("/bk1/x").is_none());
    assert_eq!(s.free_at_rest(), free);
    // The right checksum is taken, and answered.
    let good = pktfs_s3::checksum::Value::Crc32c(crc32c::crc32c(&body)).to_base64();
    let r = s.req_with(
        &s.rw,
        "PUT",
        "/bk1/x",
        "",
        &[("x-amz-checksum-crc32c", &good)],
        &body,
    );
    ok(&r);
    assert_eq!(r.header("x-amz-checksum-crc32c"), Some(good.as_str()));
    // A presigned GET within its time.
    let q = s.rw.presign("GET", "/bk1/x", "", "s3.test", 60, now_s());
    let r = s.send(
        format!("GET /bk1/x?{q} HTTP/1.1\r\nhost: s3.test\r\n\r\n").as_bytes(),
        false,
    );
    ok(&r);
    assert_eq!(r.body, body);
    s.srv.check();
}

/// An aws-chunked body with signed chunks and a signed CRC32C trailer.
fn chunked_put(s: &S3, path: &str, data: &[u8], tamper: bool) -> Response {
    let crc = pktfs_s3::checksum::Value::Crc32c(crc32c::crc32c(data)).to_base64();
    let mut headers: Vec<(String, String)> = vec![("host".into(), "s3.test".into())];
    let body = s.rw.aws_chunked(
        "PUT",
        path,
        "",
        &mut headers,
        data,
        64 << 10,
        true,
        &[("x-amz-checksum-crc32c", &crc)],
        now_s(),
    );
    let mut r = format!("PUT {path} HTTP/1.1\r\n");
    for (n, v) in &headers {
        r.push_str(&format!("{n}: {v}\r\n"));
    }
    r.push_str("\r\n");
    let mut b = r.into_bytes();
    let at = b.len();
    b.extend_from_slice(&body.body);
    if tamper {
        // A byte of the second chunk's data.
        let i = at + (64 << 10) + 200;
        b[i] ^= 0x40;
    }
    s.send(&b, false)
}

#[test]
fn aws_chunked_bodies_are_checked_chunk_by_chunk() {
    let mut s = s3_server();
    ok(&s.put("/cbk", b""));
    let data = super::net_common::data(200_000, 5);
    let r = chunked_put(&s, "/cbk/ok", &data, false);
    ok(&r);
    assert_eq!(s.srv.read("/cbk/ok").unwrap(), data);
    let free = s.free_at_rest();
    let r = chunked_put(&s, "/cbk/bad", &data, true);
    assert_eq!(code(&r), "SignatureDoesNotMatch");
    assert!(s.srv.lookup("/cbk/bad").is_none());
    assert_eq!(s.free_at_rest(), free, "a refused body's space is back");
    s.srv.check();
}

#[test]
fn aws_chunked_cannot_reach_past_its_content_length() {
    let s = s3_server();
    ok(&s.put("/cbk", b""));
    // Unsigned-trailer chunks whose size line claims more than the
    // Content-Length, followed by a second request: the second request's
    // bytes must not become the object's, nor be served as a request.
    let smuggled = signed(
        Some(&s.rw),
        "PUT",
        "/cbk/smuggled",
        "",
        &[],
        b"evil",
        PayloadMode::Sha256(pktfs_s3::sigv4::sha256(b"evil")),
    );
    let mut headers: Vec<(String, String)> = vec![
        ("host".into(), "s3.test".into()),
        ("content-encoding".into(), "aws-chunked".into()),
        ("x-amz-decoded-content-length".into(), "10".into()),
        ("content-length".into(), "15".into()),
    ];
    s.rw.sign(
        "PUT",
        "/cbk/short",
        "",
        &mut headers,
        &PayloadMode::StreamingUnsignedTrailer,
        now_s(),
    );
    let mut r = "PUT /cbk/short HTTP/1.1\r\n".to_string();
    for (n, v) in &headers {
        r.push_str(&format!("{n}: {v}\r\n"));
    }
    r.push_str("\r\n");
    let mut b = r.into_bytes();
    // Claims 0x400 bytes: runs into the next request.
    b.extend_from_slice(b"400\r\n0123456789");
    b.extend_from_slice(&smuggled);
    let mut c = Conn::new(s.addr);
    c.send(&b);
    let r = c.response(false).expect("an answer");
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert!(c.response(false).is_none(), "the connection is closed");
    assert!(s.srv.lookup("/cbk/short").is_none());
    assert!(s.srv.lookup("/cbk/smuggled").is_none());
    s.srv.check();
}

#[test]
fn multipart_complete_links_the_parts_records() {
    let s = s3_server();
    ok(&s.put("/mbk", b""));
    let r = s.req(&s.rw, "POST", "/mbk/big", "uploads=", b"");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let xml = String::from_utf8_lossy(&r.body).to_string();
    let id = xml
        .split("<UploadId>")
        .nth(1)
        .unwrap()
        .split("</UploadId>")
        .next()
        .unwrap()
        .to_string();
    let p1 = super::net_common::data(5 << 20, 1);
    let p2 = super::net_common::data(123_457, 2);
    let mut tags = Vec::new();
    for (n, p) in [(1, &p1), (2, &p2)] {
        let r = s.req(
            &s.rw,
            "PUT",
            "/mbk/big",
            &format!("partNumber={n}&uploadId={id}"),
            p,
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        tags.push(r.header("etag").unwrap().to_string());
    }
    let r = s.req(&s.rw, "GET", "/mbk/big", &format!("uploadId={id}"), b"");
    ok(&r);
    assert!(String::from_utf8_lossy(&r.body).contains("<PartNumber>2</PartNumber>"));
    // Completing copies no byte: the object's records are the parts'
    // received records (their arrival times, before the Complete).
    let t_complete = wall_ns();
    let body = format!(
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{}</ETag></Part><Part><PartNumber>2</PartNumber><ETag>{}</ETag></Part></CompleteMultipartUpload>",
        tags[0], tags[1]
    );
    let r = s.req(
        &s.rw,
        "POST",
        "/mbk/big",
        &format!("uploadId={id}"),
        body.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let mut all = p1.clone();
    all.extend_from_slice(&p2);
    assert_eq!(s.srv.read("/mbk/big").unwrap(), all);
    let md5s = [md5(&p1), md5(&p2)];
    let want = pktfs_s3::checksum::multipart_etag(&md5s);
    assert!(
        String::from_utf8_lossy(&r.body).contains(&want.replace('"', "&quot;"))
            || String::from_utf8_lossy(&r.body).contains(&want)
    );
    assert_eq!(s.get("/mbk/big").header("etag"), Some(want.as_str()));
    let ino = s.srv.lookup("/mbk/big").unwrap().ino;
    let chain = s.srv.vol.chain(ino).unwrap();
    assert!(chain.len() >= 2);
    for e in &chain {
        assert!(e.from_network, "record {} was not received", e.record);
        assert!(
            e.timestamp_ns < t_complete,
            "record {} was made by the Complete",
            e.record
        );
    }
    // The upload is gone.
    let first = r;
    let r = s.req(&s.rw, "GET", "/mbk/big", &format!("uploadId={id}"), b"");
    assert_eq!(code(&r), "NoSuchUpload");
    // A retried Complete (its answer lost) gets the same answer and
    // changes nothing; for another key the upload is unknown.
    let again = s.req(
        &s.rw,
        "POST",
        "/mbk/big",
        &format!("uploadId={id}"),
        body.as_bytes(),
    );
    assert_eq!((again.status, &again.body), (200, &first.body));
    assert_eq!(s.srv.lookup("/mbk/big").unwrap().ino, ino);
    let other = s.req(
        &s.rw,
        "POST",
        "/mbk/other",
        &format!("uploadId={id}"),
        body.as_bytes(),
    );
    assert_eq!(code(&other), "NoSuchUpload");
    // One part at a time (partNumber): its bytes, the object's ETag and
    // its part count.
    for (n, p) in [(1, &p1), (2, &p2)] {
        let r = s.req(&s.rw, "GET", "/mbk/big", &format!("partNumber={n}"), b"");
        assert_eq!(r.status, 206, "{}", String::from_utf8_lossy(&r.body));
        assert!(&r.body == p, "part {n}");
        assert_eq!(r.header("x-amz-mp-parts-count"), Some("2"));
        assert_eq!(r.header("etag"), Some(want.as_str()));
        let h = s.req(&s.rw, "HEAD", "/mbk/big", &format!("partNumber={n}"), b"");
        assert_eq!(
            h.header("content-length"),
            Some(p.len().to_string().as_str())
        );
    }
    let r = s.req(&s.rw, "GET", "/mbk/big", "partNumber=3", b"");
    assert_eq!((r.status, code(&r)), (400, "InvalidPart".into()));
    for bad in ["partNumber=0", "partNumber=x", "partNumber=10001"] {
        let r = s.req(&s.rw, "GET", "/mbk/big", bad, b"");
        assert_eq!(
            (r.status, code(&r)),
            (400, "InvalidArgument".into()),
            "{bad}"
        );
    }
    let r = s.req_with(
        &s.rw,
        "GET",
        "/mbk/big",
        "partNumber=1",
        &[("range", "bytes=0-1")],
        b"",
    );
    assert_eq!((r.status, code(&r)), (400, "InvalidRequest".into()));
    // An object not uploaded in parts is its one part.
    ok(&s.put("/mbk/single", b"body"));
    let r = s.req(&s.rw, "GET", "/mbk/single", "partNumber=1", b"");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"body"[..]));
    let r = s.req(&s.rw, "GET", "/mbk/single", "partNumber=2", b"");
    assert_eq!((r.status, code(&r)), (400, "InvalidPart".into()));
    // An aborted upload gives its space back and leaves nothing.
    let r = s.req(&s.rw, "POST", "/mbk/gone", "uploads=", b"");
    let xml = String::from_utf8_lossy(&r.body).to_string();
    let id = xml
        .split("<UploadId>")
        .nth(1)
        .unwrap()
        .split("</UploadId>")
        .next()
        .unwrap()
        .to_string();
    ok(&s.req(
        &s.rw,
        "PUT",
        "/mbk/gone",
        &format!("partNumber=1&uploadId={id}"),
        &p2,
    ));
    assert_eq!(
        s.req(&s.rw, "DELETE", "/mbk/gone", &format!("uploadId={id}"), b"")
            .status,
        204
    );
    let r = s.req(&s.rw, "GET", "/mbk", "uploads=", b"");
    ok(&r);
    assert!(!String::from_utf8_lossy(&r.body).contains("<Upload>"));
    assert!(s.srv.lookup("/mbk/gone").is_none());
    s.srv.check();
}

#[test]
fn copy_shares_buffers_and_keeps_metadata() {
    let s = s3_server();
    ok(&s.put("/abk", b""));
    let data = super::net_common::data(1 << 20, 9);
    let r = s.req_with(
        &s.rw,
        "PUT",
        "/abk/src",
        "",
        &[
            ("content-type", "application/vnd.tcpdump.pcap"),
            ("x-amz-meta-site", "lab 3"),
        ],
        &data,
    );
    ok(&r);
    let r = s.req_with(
        &s.rw,
        "PUT",
        "/abk/dst",
        "",
        &[("x-amz-copy-source", "/abk/src")],
        b"",
    );
    ok(&r);
    // The copy's records name the source's buffer space: no byte copied.
    let slices = |p: &str| -> Vec<(u32, u32, u32)> {
        let ino = s.srv.lookup(p).unwrap().ino;
        s.srv
            .vol
            .chain(ino)
            .unwrap()
            .iter()
            .map(|e| (e.buffer, e.buf_off, e.len))
            .collect()
    };
    assert_eq!(slices("/abk/dst"), slices("/abk/src"));
    let g = s.get("/abk/dst");
    assert_eq!(g.body, data);
    assert_eq!(
        g.header("content-type"),
        Some("application/vnd.tcpdump.pcap")
    );
    assert_eq!(g.header("x-amz-meta-site"), Some("lab 3"));
    assert_eq!(g.header("etag"), Some(md5_etag(&data).as_str()));
    // A key with no read grant on the source cannot copy it.
    s.srv.check();
}

#[test]
fn buckets_and_deletes() {
    let s = s3_server();
    ok(&s.put("/kb1", b""));
    // us-east-1: re-making one's own bucket answers 200 and changes
    // nothing (another region answers BucketAlreadyOwnedByYou).
    ok(&s.put("/kb1/keep", b"kept"));
    ok(&s.put("/kb1", b""));
    assert_eq!(s.get("/kb1/keep").body, b"kept");
    assert_eq!(s.req(&s.rw, "DELETE", "/kb1/keep", "", b"").status, 204);
    assert_eq!(code(&s.put("/Bad_Name", b"")), "InvalidBucketName");
    let r = s.put("/kb1/d/e/f", b"x");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        code(&s.req(&s.rw, "DELETE", "/kb1", "", b"")),
        "BucketNotEmpty"
    );
    let r = s.req(&s.rw, "GET", "/", "", b"");
    assert!(String::from_utf8_lossy(&r.body).contains("<Name>kb1</Name>"));
    ok(&s.req(&s.rw, "HEAD", "/kb1", "", b""));
    assert_eq!(s.req(&s.rw, "HEAD", "/kb2", "", b"").status, 404);
    // DeleteObject removes the directories the key made.
    assert_eq!(s.req(&s.rw, "DELETE", "/kb1/d/e/f", "", b"").status, 204);
    assert!(s.srv.lookup("/kb1/d").is_none());
    assert_eq!(s.req(&s.rw, "DELETE", "/kb1/never", "", b"").status, 204);
    // DeleteObjects.
    for k in ["x1", "x2", "y/z"] {
        ok(&s.put(&format!("/kb1/{k}"), b"1"));
    }
    let body = b"<Delete><Object><Key>x1</Key></Object><Object><Key>y/z</Key></Object><Object><Key>nope</Key></Object></Delete>";
    let md5 = base64_md5(body);
    let r = s.req_with(
        &s.rw,
        "POST",
        "/kb1",
        "delete=",
        &[("content-md5", &md5)],
        body,
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(s.srv.lookup("/kb1/x1").is_none() && s.srv.lookup("/kb1/y").is_none());
    assert!(s.srv.lookup("/kb1/x2").is_some());
    assert_eq!(s.req(&s.rw, "DELETE", "/kb1/x2", "", b"").status, 204);
    assert_eq!(s.req(&s.rw, "DELETE", "/kb1", "", b"").status, 204);
    assert!(s.srv.lookup("/kb1").is_none());
    s.srv.check();
}

/// An empty segment is no bucket: `//bucket/key` is refused with S3's
/// Error XML, not answered as ListBuckets; and the metrics path is no
/// bucket to make (the plain listener could never list it).
#[test]
fn empty_segments_and_the_reserved_name_are_refused() {
    let s = s3_server();
    ok(&s.put("/eb1", b""));
    ok(&s.put("/eb1/k", b"v"));
    for (m, path) in [
        ("GET", "//eb1/k"),
        ("GET", "//"),
        ("PUT", "//eb1/k2"),
        ("DELETE", "//eb1/k"),
    ] {
        let r = s.req(&s.rw, m, path, "", b"");
        assert_eq!(
            (r.status, code(&r).as_str()),
            (400, "InvalidArgument"),
            "{m} {path}"
        );
        let body = String::from_utf8_lossy(&r.body);
        assert!(
            !body.contains("ListAllMyBucketsResult"),
            "{m} {path}: {body}"
        );
    }
    assert_eq!(s.get("/eb1/k").body, b"v", "nothing was removed");
    assert!(s.srv.lookup("/eb1/k2").is_none());
    let r = s.put("/metrics", b"");
    assert_eq!((r.status, code(&r).as_str()), (400, "InvalidBucketName"));
    assert!(code(&r).len() > 0 && String::from_utf8_lossy(&r.body).contains("reserved"));
    assert!(s.srv.lookup("/metrics").is_none());
    s.srv.check();
}

fn base64_md5(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(md5(b))
}

/// ListObjectsV2 over `keys` as S3 would answer: sorted, prefix, delimiter
/// roll-up, pages of `max`.
fn model(keys: &[String], prefix: &str, delim: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut sorted: Vec<&String> = keys.iter().filter(|k| k.starts_with(prefix)).collect();
    sorted.sort();
    for k in sorted {
        let item = match delim.and_then(|d| k[prefix.len()..].find(d).map(|i| (i, d))) {
            Some((i, d)) => format!("P:{}", &k[..prefix.len() + i + d.len()]),
            None => format!("K:{k}"),
        };
        if out.last() != Some(&item) {
            out.push(item);
        }
    }
    out
}

fn list_all(s: &S3, bucket: &str, prefix: &str, delim: Option<&str>, max: u32) -> Vec<String> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..1000 {
        let mut q = vec![
            ("list-type".to_string(), "2".to_string()),
            ("max-keys".into(), max.to_string()),
        ];
        if !prefix.is_empty() {
            q.push(("prefix".into(), prefix.into()));
        }
        if let Some(d) = delim {
            q.push(("delimiter".into(), d.into()));
        }
        if let Some(t) = &token {
            q.push(("continuation-token".into(), t.clone()));
        }
        q.sort();
        let qs: Vec<String> = q
            .iter()
            .map(|(n, v)| {
                let mut e = String::new();
                pktfs_s3::names::uri_encode(v, true, &mut e);
                format!("{n}={e}")
            })
            .collect();
        let r = s.req(&s.rw, "GET", &format!("/{bucket}"), &qs.join("&"), b"");
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let b = String::from_utf8_lossy(&r.body).to_string();
        // A page's keys and prefixes are two lists in the XML: merged
        // back into key order (pages follow one another in it).
        let mut page = Vec::new();
        for part in b.split("<Contents>").skip(1) {
            let k = part
                .split("<Key>")
                .nth(1)
                .unwrap()
                .split("</Key>")
                .next()
                .unwrap();
            page.push(format!("K:{k}"));
        }
        for part in b.split("<CommonPrefixes>").skip(1) {
            let p = part
                .split("<Prefix>")
                .nth(1)
                .unwrap()
                .split("</Prefix>")
                .next()
                .unwrap();
            page.push(format!("P:{p}"));
        }
        page.sort_by(|a, b| a[2..].cmp(&b[2..]));
        out.extend(page);
        if !b.contains("<IsTruncated>true</IsTruncated>") {
            return out;
        }
        token = Some(
            b.split("<NextContinuationToken>")
                .nth(1)
                .unwrap()
                .split("</NextContinuationToken>")
                .next()
                .unwrap()
                .to_string(),
        );
    }
    panic!("listing did not end");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Listings walk the tree in key order: compared with the model for
    /// random key sets, prefixes, delimiters and page sizes.
    #[test]
    fn listings_match_the_model(
        raw in proptest::collection::vec("[ab][-ab/]{0,5}[ab]", 1..30),
        prefix in "[ab]{0,2}",
        delim in proptest::option::of(prop_oneof![Just("/".to_string()), Just("-".to_string())]),
        max in 1u32..7,
    ) {
        // Keys that are paths of one another cannot both be objects
        // (`a` and `a/b`); empty segments are refused: drop those.
        let mut keys: Vec<String> = Vec::new();
        for k in raw {
            if k.contains("//") {
                continue;
            }
            let clash = keys.iter().any(|o| o == &k || o.starts_with(&format!("{k}/")) || k.starts_with(&format!("{o}/")));
            if !clash {
                keys.push(k);
            }
        }
        let s = s3_server();
        ok(&s.put("/lbk", b""));
        for k in &keys {
            let r = s.put(&format!("/lbk/{k}"), k.as_bytes());
            prop_assert_eq!(r.status, 200, "{}: {}", k, String::from_utf8_lossy(&r.body));
        }
        let d = delim.as_deref();
        let got = list_all(&s, "lbk", &prefix, d, max);
        let mut got_sorted = got.clone();
        got_sorted.sort_by(|a, b| a[2..].cmp(&b[2..]));
        let want = model(&keys, &prefix, d);
        prop_assert_eq!(&got, &got_sorted, "answered in key order");
        prop_assert_eq!(got, want);
    }
}

/// `pktfs mount --s3`: what the S3 endpoint stores, replaces or deletes is
/// in the mount at once (the kernel's caches are told), with its
/// metadata as the `user.s3` attribute.
#[test]
fn objects_show_in_a_mount_at_once() {
    require!(crate::prereq::fuse());
    let (dir, vol) = super::net_common::image(64 << 20);
    let mnt = tempfile::tempdir().unwrap();
    let opts = pktfs_fuse::MountOptions {
        attr_ttl: std::time::Duration::from_secs(60),
        entry_ttl: std::time::Duration::from_secs(60),
        ..Default::default()
    };
    let h = pktfs_fuse::mount(vol.clone(), mnt.path(), &opts).expect("mount");
    let mut ks = KeyStore::default();
    let k = ks
        .add(
            "m",
            vec!["*=rw".parse::<Grant>().unwrap()],
            &[3u8; 64],
            now_s(),
        )
        .unwrap();
    let rw = Signer::new(&k.id, &k.secret, REGION);
    vol.set_s3_keys_blob(Some(&ks.encode())).unwrap();
    let mut cfg = pktfs_netpath::Config::default();
    s3_config(&mut cfg);
    let inval = super::net_mount::invalidate_with(h.invalidator());
    let svc = pktfs_netpath::Services::start(vol.clone(), cfg, Some(inval)).unwrap();
    let addr = svc.s3_addr().unwrap();
    let send = |b: Vec<u8>| {
        let mut c = Conn::new(addr);
        c.send(&b);
        c.response(false).expect("an answer")
    };
    let put = |path: &str, extra: &[(&str, &str)], body: &[u8]| {
        let p = PayloadMode::Sha256(pktfs_s3::sigv4::sha256(body));
        send(signed(Some(&rw), "PUT", path, "", extra, body, p))
    };
    let m = mnt.path();
    ok(&put("/mnt-b", &[], b""));
    // Looked up (and cached as missing) before it exists.
    assert!(std::fs::metadata(m.join("mnt-b/logs/a.txt")).is_err());
    ok(&put(
        "/mnt-b/logs/a.txt",
        &[("x-amz-meta-site", "lab")],
        b"first",
    ));
    assert_eq!(std::fs::read(m.join("mnt-b/logs/a.txt")).unwrap(), b"first");
    ok(&put("/mnt-b/logs/a.txt", &[], b"second version"));
    assert_eq!(
        std::fs::read(m.join("mnt-b/logs/a.txt")).unwrap(),
        b"second version"
    );
    let meta = rustix::fs::getxattr(m.join("mnt-b/logs/a.txt"), "user.s3", &mut [0u8; 4096])
        .map(|n| n > 0);
    assert_eq!(
        meta,
        Ok(true),
        "the object's metadata is the user.s3 attribute"
    );
    let p = PayloadMode::Sha256(pktfs_s3::sigv4::sha256(b""));
    let r = send(signed(
        Some(&rw),
        "DELETE",
        "/mnt-b/logs/a.txt",
        "",
        &[],
        b"",
        p,
    ));
    assert_eq!(r.status, 204);
    assert!(std::fs::metadata(m.join("mnt-b/logs/a.txt")).is_err());
    assert!(
        std::fs::metadata(m.join("mnt-b/logs")).is_err(),
        "the key's directory went with it"
    );
    svc.shutdown();
    drop(h);
    drop(dir);
}

/// GetObject's `response-*` parameters replace the answer's headers (the
/// stored ones untouched); one that would break the header is refused.
#[test]
fn response_overrides_replace_the_answers_headers() {
    let s = s3_server();
    ok(&s.put("/ovr", b""));
    let r = s.req_with(
        &s.rw,
        "PUT",
        "/ovr/o",
        "",
        &[
            ("content-type", "text/plain"),
            ("cache-control", "max-age=60"),
        ],
        b"body",
    );
    ok(&r);
    let q = "response-cache-control=no-cache&response-content-disposition=attachment%3B%20filename%3Do.txt&response-content-type=application%2Fx-test";
    let r = s.req(&s.rw, "GET", "/ovr/o", q, b"");
    ok(&r);
    assert_eq!(r.body, b"body");
    assert_eq!(r.header("content-type"), Some("application/x-test"));
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert_eq!(
        r.header("content-disposition"),
        Some("attachment; filename=o.txt")
    );
    // Stored headers are as they were.
    let r = s.get("/ovr/o");
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.header("cache-control"), Some("max-age=60"));
    let r = s.req(
        &s.rw,
        "GET",
        "/ovr/o",
        "response-expires=x%0D%0AX-Evil%3A%201",
        b"",
    );
    assert_eq!((r.status, code(&r)), (400, "InvalidArgument".into()));
    assert_eq!(r.header("x-evil"), None);
}
