//! CORS over the endpoint: the configuration set, read back and deleted
//! (grants apply), a browser's preflight answered from the rules without a
//! signature, and the headers an actual request from another origin gets.

use super::{code, ok, s3_server};

const RULES: &str = "<CORSConfiguration><CORSRule><AllowedOrigin>https://*.example.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedMethod>PUT</AllowedMethod><AllowedHeader>x-amz-*</AllowedHeader><ExposeHeader>ETag</ExposeHeader><MaxAgeSeconds>600</MaxAgeSeconds></CORSRule></CORSConfiguration>";

fn preflight(s: &super::S3, path: &str, lines: &[(&str, &str)]) -> super::Response {
    let mut r = format!("OPTIONS {path} HTTP/1.1\r\nhost: s3.test\r\n");
    for (n, v) in lines {
        r.push_str(&format!("{n}: {v}\r\n"));
    }
    r.push_str("\r\n");
    s.send(r.as_bytes(), false)
}

#[test]
fn cors_rules_answer_preflights_and_label_answers() {
    let s = s3_server();
    ok(&s.put("/web", b""));
    ok(&s.put("/web/page", b"hello"));
    // None yet: NoSuchCORSConfiguration, and a preflight is refused.
    let r = s.req(&s.rw, "GET", "/web", "cors=", b"");
    assert_eq!(
        (r.status, code(&r)),
        (404, "NoSuchCORSConfiguration".into())
    );
    let asks = [
        ("origin", "https://app.example.com"),
        ("access-control-request-method", "PUT"),
        (
            "access-control-request-headers",
            "x-amz-date, x-amz-content-sha256",
        ),
    ];
    assert_eq!(preflight(&s, "/web/page", &asks).status, 403);

    // A read-only key cannot set it; the writer can.
    let r = s.req(&s.ro, "PUT", "/web", "cors=", RULES.as_bytes());
    assert_eq!((r.status, code(&r)), (403, "AccessDenied".into()));
    ok(&s.req(&s.rw, "PUT", "/web", "cors=", RULES.as_bytes()));
    let r = s.req(&s.ro, "GET", "/web", "cors=", b"");
    ok(&r);
    let body = String::from_utf8_lossy(&r.body);
    assert!(
        body.contains("<AllowedOrigin>https://*.example.com</AllowedOrigin>"),
        "{body}"
    );
    assert!(
        body.contains("<MaxAgeSeconds>600</MaxAgeSeconds>"),
        "{body}"
    );
    // Malformed rules are refused and the kept ones stay.
    let bad = "<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod></CORSRule></CORSConfiguration>";
    let r = s.req(&s.rw, "PUT", "/web", "cors=", bad.as_bytes());
    assert_eq!((r.status, code(&r)), (400, "MalformedXML".into()));

    // The preflight: unsigned, answered from the rules.
    let r = preflight(&s, "/web/page", &asks);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    assert_eq!(r.header("access-control-allow-methods"), Some("GET, PUT"));
    assert_eq!(
        r.header("access-control-allow-headers"),
        Some("x-amz-date, x-amz-content-sha256")
    );
    assert_eq!(r.header("access-control-max-age"), Some("600"));
    // Another origin, method or header: 403, and no grant is given.
    for ask in [
        [
            ("origin", "https://evil.org"),
            ("access-control-request-method", "GET"),
        ],
        [
            ("origin", "https://app.example.com"),
            ("access-control-request-method", "DELETE"),
        ],
    ] {
        let r = preflight(&s, "/web/page", &ask);
        assert_eq!(r.status, 403);
        assert_eq!(r.header("access-control-allow-origin"), None);
    }
    let r = preflight(
        &s,
        "/web/page",
        &[
            ("origin", "https://a.example.com"),
            ("access-control-request-method", "PUT"),
            ("access-control-request-headers", "range"),
        ],
    );
    assert_eq!(r.status, 403);
    // Not a preflight at all: 400.
    assert_eq!(preflight(&s, "/web/page", &[]).status, 400);

    // An actual request from an admitted origin carries the headers; from
    // another, none.
    let r = s.req_with(
        &s.rw,
        "GET",
        "/web/page",
        "",
        &[("origin", "https://app.example.com")],
        b"",
    );
    assert_eq!(r.body, b"hello");
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    assert_eq!(r.header("access-control-expose-headers"), Some("ETag"));
    let r = s.req_with(
        &s.rw,
        "GET",
        "/web/page",
        "",
        &[("origin", "https://evil.org")],
        b"",
    );
    assert_eq!(r.header("access-control-allow-origin"), None);
    // Unsigned, an actual request is still refused (CORS grants nothing).
    let r = s.send(
        b"GET /web/page HTTP/1.1\r\nhost: s3.test\r\norigin: https://app.example.com\r\n\r\n",
        false,
    );
    assert_eq!(r.status, 403);

    // Deleted: gone for both.
    let r = s.req(&s.rw, "DELETE", "/web", "cors=", b"");
    assert_eq!(r.status, 204);
    let r = s.req(&s.rw, "GET", "/web", "cors=", b"");
    assert_eq!(code(&r), "NoSuchCORSConfiguration");
    assert_eq!(preflight(&s, "/web/page", &asks).status, 403);
    // The configuration is no client's xattr on the mount's side.
    let ino = s.srv.lookup("/web").unwrap().ino;
    assert!(s.srv.vol.listxattr(ino).unwrap().is_empty());
}
