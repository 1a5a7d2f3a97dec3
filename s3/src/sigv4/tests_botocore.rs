//! botocore, an independent signer (aws-cli's and boto3's), signs
//! requests as its S3 client sends them (a hook captures each before it
//! leaves), and presigns URLs; the verifier must accept every one, and
//! refuse each once tampered with. Needs python3 with botocore: under CI
//! a missing one fails the test, elsewhere it is skipped (pktfs_testkit's
//! prereq).

use std::process::Command;

use super::tests_aws::{decode_chunked, fields};
use super::*;

const SECRET: &str = "pktfs/secret+key";

/// The client calls whose requests are captured: odd keys (blanks, `+`,
/// `$`, `~`, `%`, UTF-8, dot segments), metadata with inner blanks, a
/// Range, ListObjectsV2 with a delimiter and a continuation token, the
/// multipart calls, DeleteObjects, CopyObject; over http (payload signed)
/// and https (UNSIGNED-PAYLOAD, aws-chunked with a CRC32 trailer); and
/// presigned GETs with a response-content-disposition.
const SCRIPT: &str = r#"
import json
import botocore.session
from botocore.config import Config
from botocore.awsrequest import AWSResponse

captured = []

class Empty:
    def stream(self, **kw):
        return iter([b""])
    def read(self, *a, **kw):
        return b""

def capture(request, **kwargs):
    body = request.body or b""
    if hasattr(body, "read"):
        body = body.read()
    if isinstance(body, str):
        body = body.encode()
    captured.append({
        "method": request.method,
        "url": request.url,
        "headers": [[k, v.decode("latin-1") if isinstance(v, bytes) else v]
                    for k, v in request.headers.items()],
        "body_hex": bytes(body).hex(),
    })
    return AWSResponse(request.url, 200, {}, Empty())

def call(f, **kw):
    # An empty 200 does not parse as every answer; the request is
    # captured before that.
    try:
        f(**kw)
    except Exception:
        pass

session = botocore.session.get_session()
for endpoint in ["http://127.0.0.1:9000", "https://127.0.0.1:9443"]:
    c = session.create_client("s3", endpoint_url=endpoint, region_name="eu-west-3",
        aws_access_key_id="AKIDPKTFS", aws_secret_access_key="pktfs/secret+key",
        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
    c.meta.events.register("before-send.s3", capture)
    keys = ["plain.txt", "dir/sub dir/a b+c$d~e%f.txt", "\u00fcn\u00ef/\u00e7\u00f8d\u00e9/\u65e5\u672c.bin",
            "!'()*,;:@&=+$ ~.txt", "a//b/./../c"]
    for k in keys:
        call(c.put_object, Bucket="bkt", Key=k, Body=b"hello world" * 3,
             Metadata={"note": "  two   spaces  ", "x": "y"})
        call(c.get_object, Bucket="bkt", Key=k, Range="bytes=0-9")
    call(c.list_objects_v2, Bucket="bkt", Prefix="dir/sub dir/", Delimiter="/",
         ContinuationToken="a+b/c=", MaxKeys=7)
    call(c.create_multipart_upload, Bucket="bkt", Key="mp key")
    call(c.upload_part, Bucket="bkt", Key="mp key", UploadId="up/id+=", PartNumber=2,
         Body=b"x" * 100)
    call(c.delete_objects, Bucket="bkt", Delete={"Objects": [{"Key": "a"}, {"Key": "b c"}]})
    call(c.copy_object, Bucket="bkt", Key="copy",
         CopySource={"Bucket": "bkt", "Key": "dir/a b+c.txt"})
    for k in keys:
        url = c.generate_presigned_url("get_object", ExpiresIn=3600, Params={
            "Bucket": "bkt", "Key": k,
            "ResponseContentDisposition": 'attachment; filename="x y.txt"'})
        captured.append({"method": "GET", "url": url,
                         "headers": [["host", endpoint.split("//")[1]]], "body_hex": ""})
print(json.dumps(captured))
"#;

/// python3 with botocore, or why not.
fn botocore() -> Result<(), String> {
    match Command::new("python3").args(["-c", "import botocore"]).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(_) => Err("python3 cannot import botocore (apt-get install -y python3-botocore, or pip install botocore)".into()),
        Err(e) => Err(format!("python3 does not run ({e}; apt-get install -y python3 python3-botocore)")),
    }
}

fn bodies(r: &serde_json::Value) -> Vec<u8> {
    hex::decode(r["body_hex"].as_str().unwrap()).unwrap()
}

#[test]
fn botocore_signed_requests_verify() {
    // The testkit's one rule: a failure under CI, elsewhere a skip that
    // the tally at exit names.
    if !pktfs_testkit::prereq::met(&[botocore()]) {
        return;
    }
    let out = Command::new("python3")
        .args(["-c", SCRIPT])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(requests.len() >= 30, "{} requests captured", requests.len());
    let (mut presigned, mut sha, mut chunked) = (0, 0, 0);
    for r in &requests {
        let method = r["method"].as_str().unwrap();
        let url = r["url"].as_str().unwrap();
        let target = &url[url.find("://").unwrap() + 3..];
        let target = &target[target.find('/').unwrap()..];
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let hs: Vec<(String, String)> = r["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h[0].as_str().unwrap().to_string(),
                    h[1].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let hs: Vec<(&str, &str)> = hs.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let f = fields(&hs);
        let req = Request {
            method,
            path,
            query,
            headers: &f,
        };
        // botocore signs with its own clock: check at its time.
        let at = parse_amz_date(
            req.header("x-amz-date")
                .map(|v| std::str::from_utf8(v).unwrap())
                .or_else(|| query.split('&').find_map(|p| p.strip_prefix("X-Amz-Date=")))
                .unwrap(),
        )
        .unwrap();
        let c = claim(&req, at + 5)
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"))
            .unwrap();
        assert_eq!(c.access_key_id, "AKIDPKTFS");
        assert_eq!(c.region(), "eu-west-3");
        let k = SigningKey::derive(SECRET, c.date(), c.region());
        let v = c
            .verify(&req, &k)
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let body = bodies(r);
        match v.payload {
            PayloadMode::Sha256(h) => {
                assert_eq!(sha256(&body), h, "{url}");
                sha += 1;
            }
            PayloadMode::StreamingUnsignedTrailer => {
                let (data, trailers) = decode_chunked(&body, None);
                let len = req.header("x-amz-decoded-content-length").unwrap();
                assert_eq!(data.len().to_string().as_bytes(), len, "{url}");
                assert!(
                    data == b"hello world".repeat(3) || data == [b'x'; 100],
                    "{url}"
                );
                assert_eq!(trailers[0].0, "x-amz-checksum-crc32");
                chunked += 1;
            }
            PayloadMode::Unsigned => presigned += usize::from(c.presigned),
            PayloadMode::StreamingSigned { .. } => panic!("botocore does not sign chunks"),
        }
        if c.presigned {
            assert_eq!(
                claim(&req, c.expires_at_unix_s().unwrap() + 1)
                    .unwrap_err()
                    .code(),
                "AccessDenied"
            );
        }
        // Tampered: another path, another secret.
        let p = format!("{path}x");
        let e = c.verify(&Request { path: &p, ..req }, &k).unwrap_err();
        assert_eq!(e.code(), "SignatureDoesNotMatch", "{url}");
        let e = c
            .verify(
                &req,
                &SigningKey::derive("pktfs/secret+kez", c.date(), c.region()),
            )
            .unwrap_err();
        assert_eq!(e.code(), "SignatureDoesNotMatch", "{url}");
    }
    assert!(
        presigned >= 10 && sha >= 10 && chunked >= 5,
        "presigned {presigned}, sha {sha}, chunked {chunked}"
    );
}
