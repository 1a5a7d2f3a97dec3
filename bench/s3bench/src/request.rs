//! Signed S3 requests as bytes: path-style addressing over HTTP/1.1,
//! signed with SigV4 in the Authorization header, the way an SDK sends
//! them.

use pktfs_s3::sigv4::{PayloadMode, Signer};

use crate::bodies::{Body, Checksum};

/// How the payload is signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Payload {
    /// `x-amz-content-sha256` is the body's SHA-256: what boto3, aws-cli
    /// and aws-sdk-s3 send over plain HTTP (the server must hash the body
    /// to check it).
    Signed,
    /// `UNSIGNED-PAYLOAD` (what the SDKs send over HTTPS, the body then
    /// protected by TLS and the checksum header).
    Unsigned,
}

impl Payload {
    pub fn name(self) -> &'static str {
        match self {
            Payload::Signed => "signed",
            Payload::Unsigned => "unsigned",
        }
    }
}

/// An S3 endpoint and the key to sign with.
#[derive(Debug)]
pub struct Endpoint {
    /// `host:port`, as the Host header carries it.
    pub host: String,
    pub signer: Signer,
}

/// Percent-encode a key's bytes for a path (unreserved characters and
/// '/' kept), as SigV4 canonicalizes it: the path is then sent as signed.
pub fn encode_path(s: &str) -> String {
    pktfs_s3::percent::uri_encode(s.as_bytes(), true)
}

fn now_unix_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Endpoint {
    /// The request head (request line and header fields, through the
    /// empty line) of `method path?query`, signed; `body` is what follows
    /// it (its length, digests and checksum header), or none.
    pub fn head(
        &self,
        method: &str,
        path: &str,
        query: &str,
        body: Option<(&Body, Checksum)>,
        payload: Payload,
        extra: &[(&str, &str)],
    ) -> Vec<u8> {
        let mut headers: Vec<(String, String)> = Vec::with_capacity(10);
        headers.push(("host".into(), self.host.clone()));
        let len = body.map_or(0, |(b, _)| b.data.len());
        if body.is_some() || method == "PUT" || method == "POST" {
            headers.push(("content-length".into(), len.to_string()));
        }
        if let Some((b, c)) = body {
            if let (Some((name, alg)), Some(v)) = (c.header(), b.checksum.as_ref()) {
                headers.push((name.into(), v.clone()));
                headers.push(("x-amz-sdk-checksum-algorithm".into(), alg.into()));
            }
        }
        for (k, v) in extra {
            headers.push((k.to_string(), v.to_string()));
        }
        let mode = match (payload, body) {
            (Payload::Unsigned, _) => PayloadMode::Unsigned,
            (Payload::Signed, Some((b, _))) => PayloadMode::Sha256(b.sha256),
            (Payload::Signed, None) => PayloadMode::Sha256(pktfs_s3::sigv4::sha256(b"")),
        };
        self.signer
            .sign(method, path, query, &mut headers, &mode, now_unix_s());
        let mut out = Vec::with_capacity(512);
        out.extend_from_slice(method.as_bytes());
        out.push(b' ');
        out.extend_from_slice(path.as_bytes());
        if !query.is_empty() {
            out.push(b'?');
            out.extend_from_slice(query.as_bytes());
        }
        out.extend_from_slice(b" HTTP/1.1\r\n");
        for (k, v) in &headers {
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(v.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_encoded_as_sigv4_canonicalizes_them() {
        assert_eq!(encode_path("/b/k-1_2.3~/x"), "/b/k-1_2.3~/x");
        assert_eq!(encode_path("/b/a b+c"), "/b/a%20b%2Bc");
        assert_eq!(encode_path("/b/é"), "/b/%C3%A9");
    }

    #[test]
    fn a_head_is_signed_and_carries_the_body_s_length_and_checksum() {
        let e = Endpoint {
            host: "127.0.0.1:9000".into(),
            signer: Signer {
                access_key_id: "AKIDEXAMPLE".into(),
                secret_access_key: "secret".into(),
                region: "us-east-1".into(),
            },
        };
        let body = Body::new(b"hello".to_vec(), Checksum::Crc32c);
        let h = e.head(
            "PUT",
            "/b/k",
            "",
            Some((&body, Checksum::Crc32c)),
            Payload::Signed,
            &[],
        );
        let h = String::from_utf8(h).unwrap();
        assert!(h.starts_with("PUT /b/k HTTP/1.1\r\n"), "{h}");
        assert!(h.ends_with("\r\n\r\n"), "{h}");
        let lower = h.to_ascii_lowercase();
        assert!(lower.contains("\r\nhost: 127.0.0.1:9000\r\n"), "{h}");
        assert!(lower.contains("\r\ncontent-length: 5\r\n"), "{h}");
        assert!(
            lower.contains(&format!(
                "\r\nx-amz-content-sha256: {}\r\n",
                hex::encode(body.sha256)
            )),
            "{h}"
        );
        let crc = body.checksum.as_deref().unwrap().to_ascii_lowercase();
        assert!(
            lower.contains(&format!("\r\nx-amz-checksum-crc32c: {crc}\r\n")),
            "{h}"
        );
        assert!(
            lower.contains("\r\nauthorization: aws4-hmac-sha256 credential=akidexample/"),
            "{h}"
        );
        let u = e.head("GET", "/b/k", "x=1", None, Payload::Unsigned, &[]);
        let u = String::from_utf8(u).unwrap().to_ascii_lowercase();
        assert!(u.starts_with("get /b/k?x=1 http/1.1\r\n"), "{u}");
        assert!(
            u.contains("\r\nx-amz-content-sha256: unsigned-payload\r\n"),
            "{u}"
        );
        assert!(!u.contains("content-length"), "{u}");
    }
}
