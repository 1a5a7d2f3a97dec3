//! Who may ask what over HTTP: the bearer token.
//!
//! With a token configured ([`crate::Config::token`]) every request must
//! present it (`Authorization: Bearer TOKEN`), whatever its method: GET and
//! HEAD of files and listings (text and JSON), OPTIONS, the metrics path,
//! and the changes. Two flags open the reads up on purpose:
//! [`crate::Config::public_read`] (GET/HEAD of files and listings) and
//! [`crate::Config::public_metrics`] (GET/HEAD of the metrics path). A
//! request without the token, or with a wrong one, is answered `401` with
//! `WWW-Authenticate: Bearer` and a body that names only what is missing,
//! never the target.
//!
//! The check is made from the head, before anything else about the
//! request: before its body is read (a refused body is dropped only when it
//! is small and announced, as `Conn::refuse` does, else the connection
//! closes), before the target is looked up (a 401 does not tell whether
//! the file exists), and on both transports: both drivers ask the
//! protocol (`Plain::admits`) before they read a body they would only drop,
//! and `Plain::request` checks it first.

use super::super::head::{Head, Method};
use crate::config::Config;

/// Why a request is refused (the 401 body), or `None` when the
/// configuration admits it.
pub(super) fn refusal(cfg: &Config, h: &Head) -> Option<&'static str> {
    cfg.token.as_ref()?;
    match h.auth {
        Some(true) => return None,
        Some(false) => return Some("wrong bearer token"),
        None => {}
    }
    let read = matches!(h.method, Method::Get | Method::Head);
    let public = match h.metrics {
        true => cfg.public_metrics,
        false => cfg.public_read,
    };
    if read && public {
        return None;
    }
    Some("a bearer token is required")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Token;
    use crate::path::ReqPath;

    fn head(cfg: &Config, req: &str) -> Head {
        let mut p = ReqPath::new();
        let (_, h) = crate::http::head::parse_head(req.as_bytes(), &mut p, cfg, &mut |_| {})
            .expect("parses")
            .expect("complete");
        h
    }

    /// The whole table: method x public flags x what was presented.
    #[test]
    fn token_rules() {
        let mut cfg = Config {
            token: Some(Token::from_file_contents("s3cret").unwrap()),
            ..Config::default()
        };
        let req = |m: &str, path: &str, auth: &str| {
            let a = match auth {
                "" => String::new(),
                t => format!("Authorization: Bearer {t}\r\n"),
            };
            format!("{m} {path} HTTP/1.1\r\nHost: h\r\n{a}\r\n")
        };
        for m in ["GET", "HEAD", "OPTIONS", "PUT", "POST", "DELETE", "BREW"] {
            for path in ["/a", "/", "/metrics"] {
                for (pr, pm) in [(false, false), (true, false), (false, true), (true, true)] {
                    cfg.public_read = pr;
                    cfg.public_metrics = pm;
                    let good = head(&cfg, &req(m, path, "s3cret"));
                    assert_eq!(refusal(&cfg, &good), None, "{m} {path}");
                    let wrong = head(&cfg, &req(m, path, "s3cret2"));
                    assert_eq!(refusal(&cfg, &wrong), Some("wrong bearer token"));
                    let none = head(&cfg, &req(m, path, ""));
                    let read = m == "GET" || m == "HEAD";
                    let open = read && if path == "/metrics" { pm } else { pr };
                    assert_eq!(refusal(&cfg, &none).is_none(), open, "{m} {path} {pr} {pm}");
                }
            }
        }
        cfg.token = None;
        let none = head(&cfg, &req("DELETE", "/a", ""));
        assert_eq!(refusal(&cfg, &none), None, "no token: no check");
    }
}
