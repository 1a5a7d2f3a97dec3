use super::*;

const BODY: &[u8] = br#"<CORSConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <CORSRule>
    <ID>site</ID>
    <AllowedOrigin>https://*.example.com</AllowedOrigin>
    <AllowedMethod>GET</AllowedMethod>
    <AllowedMethod>PUT</AllowedMethod>
    <AllowedHeader>x-amz-*</AllowedHeader>
    <AllowedHeader>Content-Type</AllowedHeader>
    <ExposeHeader>ETag</ExposeHeader>
    <MaxAgeSeconds>3000</MaxAgeSeconds>
  </CORSRule>
  <CORSRule>
    <AllowedOrigin>*</AllowedOrigin>
    <AllowedMethod>HEAD</AllowedMethod>
  </CORSRule>
</CORSConfiguration>"#;

#[test]
fn parse_keep_and_answer_back() {
    let c = parse(BODY).unwrap();
    assert_eq!(c.rules.len(), 2);
    assert_eq!(c.rules[0].id.as_deref(), Some("site"));
    assert_eq!(c.rules[0].methods, ["GET", "PUT"]);
    assert_eq!(c.rules[0].max_age_s, Some(3000));
    let kept = c.encode().unwrap();
    assert_eq!(Config::decode(&kept), Some(c.clone()));
    assert_eq!(
        parse(c.to_xml().as_bytes()).unwrap(),
        c,
        "GetBucketCors reads back"
    );
    assert_eq!(Config::decode(b"not json"), None);
}

#[test]
fn the_first_rule_that_admits_the_request_answers() {
    let c = parse(BODY).unwrap();
    let p = c
        .preflight(
            "https://app.example.com",
            "PUT",
            &["x-amz-date", "content-type"],
        )
        .expect("admitted");
    assert!(
        p.contains("Access-Control-Allow-Origin: https://app.example.com\r\n"),
        "{p}"
    );
    assert!(p.contains("Access-Control-Allow-Credentials: true\r\n"));
    assert!(p.contains("Access-Control-Allow-Methods: GET, PUT\r\n"));
    assert!(p.contains("Access-Control-Allow-Headers: x-amz-date, content-type\r\n"));
    assert!(p.contains("Access-Control-Max-Age: 3000\r\n"));
    assert!(p.contains("Access-Control-Expose-Headers: ETag\r\n"));
    // A header no rule allows, a method, an origin: refused.
    assert_eq!(
        c.preflight("https://app.example.com", "PUT", &["range"]),
        None
    );
    assert_eq!(c.preflight("https://app.example.com", "DELETE", &[]), None);
    assert_eq!(c.preflight("http://app.example.com", "GET", &[]), None);
    assert_eq!(
        c.preflight("https://example.com", "GET", &[]),
        None,
        "*. needs a label"
    );
    // The second rule: any origin, HEAD, answered with `*`.
    let h = c.preflight("https://other.org", "HEAD", &[]).unwrap();
    assert!(h.starts_with("Access-Control-Allow-Origin: *\r\n"), "{h}");
    assert!(!h.contains("Credentials"));
    let a = c.actual("https://app.example.com", "GET").unwrap();
    assert!(a.contains("Access-Control-Allow-Origin: https://app.example.com\r\n"));
    assert!(!a.contains("Max-Age"));
    assert_eq!(c.actual("https://other.org", "GET"), None);
}

#[test]
fn malformed_configurations_are_refused() {
    for bad in [
        &b"<CORSConfiguration/>"[..],
        b"<CORSConfiguration><CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>",
        b"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin></CORSRule></CORSConfiguration>",
        b"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod></CORSRule></CORSConfiguration>",
        b"<CORSConfiguration><CORSRule><AllowedOrigin>*.*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>",
        b"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>-1</MaxAgeSeconds></CORSRule></CORSConfiguration>",
        b"<Other/>",
    ] {
        assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
    }
    let many = format!(
        "<CORSConfiguration>{}</CORSConfiguration>",
        "<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>"
            .repeat(MAX_RULES + 1)
    );
    assert!(parse(many.as_bytes()).is_err());
    // A pattern cannot match past a character boundary or by overlap.
    assert!(!matches("a*a", "a", false));
    assert!(matches("a*a", "aa", false));
    assert!(!matches("é*", "e", false));
}
