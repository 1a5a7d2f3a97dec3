//! CORS (cross-origin resource sharing) as S3 defines it for a bucket: the
//! `CORSConfiguration` a PutBucketCors sends, kept with the bucket, the
//! GetBucketCors answer, and which rule admits a browser's request: a
//! preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`)
//! or an actual request carrying `Origin`, and the `Access-Control-*`
//! headers the answer then carries.
//!
//! Rules are tried in order; the first whose origins, method and (for a
//! preflight) every requested header match wins, as on S3. An origin or
//! header pattern may hold one `*`, matching any run of characters;
//! headers compare without case.
//!
//! Bounds: at most [`MAX_RULES`] rules (S3's limit), and the configuration
//! as kept at most [`MAX_KEPT_BYTES`].

use serde::{Deserialize, Serialize};

use crate::xml::parse::{walk, Step, XmlError};
use crate::xml::writer::Doc;

/// Most rules one configuration holds (S3's limit).
pub const MAX_RULES: usize = 100;

/// The largest configuration kept, as JSON, with its bucket.
pub const MAX_KEPT_BYTES: usize = 16 << 10;

/// The methods a rule may allow.
pub const METHODS: [&str; 5] = ["GET", "PUT", "POST", "DELETE", "HEAD"];

/// One `<CORSRule>`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Rule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub origins: Vec<String>,
    pub methods: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_s: Option<u32>,
}

/// A bucket's CORS configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Config {
    pub rules: Vec<Rule>,
}

/// Does `pat` (at most one `*`) match `s`; `fold`: without case.
fn matches(pat: &str, s: &str, fold: bool) -> bool {
    let eq = |a: &str, b: &str| {
        if fold {
            a.eq_ignore_ascii_case(b)
        } else {
            a == b
        }
    };
    match pat.split_once('*') {
        None => eq(pat, s),
        Some((pre, post)) => {
            s.len() >= pre.len() + post.len()
                && s.is_char_boundary(pre.len())
                && s.is_char_boundary(s.len() - post.len())
                && eq(&s[..pre.len()], pre)
                && eq(&s[s.len() - post.len()..], post)
        }
    }
}

impl Rule {
    fn admits_origin(&self, origin: &str) -> bool {
        self.origins.iter().any(|p| matches(p, origin, false))
    }

    fn admits_method(&self, method: &str) -> bool {
        self.methods.iter().any(|m| m == method)
    }

    fn admits_header(&self, header: &str) -> bool {
        self.headers.iter().any(|p| matches(p, header, true))
    }

    /// The `Access-Control-Allow-Origin` value: `*` when the rule allows
    /// every origin, else the request's own origin (with credentials).
    fn allow_origin_lines(&self, origin: &str, out: &mut String) {
        if self.origins.iter().any(|o| o == "*") {
            out.push_str("Access-Control-Allow-Origin: *\r\n");
        } else {
            out.push_str(&format!(
                "Access-Control-Allow-Origin: {origin}\r\nAccess-Control-Allow-Credentials: true\r\n"
            ));
        }
        out.push_str(&format!(
            "Access-Control-Allow-Methods: {}\r\n",
            self.methods.join(", ")
        ));
        if !self.expose.is_empty() {
            out.push_str(&format!(
                "Access-Control-Expose-Headers: {}\r\n",
                self.expose.join(", ")
            ));
        }
        out.push_str(
            "Vary: Origin, Access-Control-Request-Headers, Access-Control-Request-Method\r\n",
        );
    }
}

impl Config {
    /// The answer's header lines for a preflight from `origin` asking for
    /// `method` and the request headers `headers`: None when no rule
    /// admits it (S3 answers 403).
    pub fn preflight(&self, origin: &str, method: &str, headers: &[&str]) -> Option<String> {
        let rule = self.rules.iter().find(|r| {
            r.admits_origin(origin)
                && r.admits_method(method)
                && headers.iter().all(|h| r.admits_header(h))
        })?;
        let mut out = String::new();
        rule.allow_origin_lines(origin, &mut out);
        if !headers.is_empty() {
            out.push_str(&format!(
                "Access-Control-Allow-Headers: {}\r\n",
                headers.join(", ")
            ));
        }
        if let Some(s) = rule.max_age_s {
            out.push_str(&format!("Access-Control-Max-Age: {s}\r\n"));
        }
        Some(out)
    }

    /// The header lines an actual request from `origin` with `method`
    /// gets, if a rule admits it (else none: the browser then keeps the
    /// answer from the page).
    pub fn actual(&self, origin: &str, method: &str) -> Option<String> {
        let rule = self
            .rules
            .iter()
            .find(|r| r.admits_origin(origin) && r.admits_method(method))?;
        let mut out = String::new();
        rule.allow_origin_lines(origin, &mut out);
        Some(out)
    }

    /// As kept with the bucket (JSON), refused past [`MAX_KEPT_BYTES`].
    pub fn encode(&self) -> Result<Vec<u8>, XmlError> {
        let v = serde_json::to_vec(self).map_err(|e| XmlError::Invalid(e.to_string()))?;
        if v.len() > MAX_KEPT_BYTES {
            return Err(XmlError::Invalid(format!(
                "the CORS configuration takes {} bytes kept; pktfs keeps at most {MAX_KEPT_BYTES}",
                v.len()
            )));
        }
        Ok(v)
    }

    /// What [`Config::encode`] kept; None if it is not one (a damaged or
    /// foreign value serves no rule).
    pub fn decode(v: &[u8]) -> Option<Config> {
        serde_json::from_slice(v).ok()
    }

    /// GetBucketCors' answer.
    pub fn to_xml(&self) -> String {
        let mut d = Doc::new("CORSConfiguration", true);
        for r in &self.rules {
            d.open("CORSRule");
            if let Some(id) = &r.id {
                d.text("ID", id);
            }
            for o in &r.origins {
                d.text("AllowedOrigin", o);
            }
            for m in &r.methods {
                d.text("AllowedMethod", m);
            }
            for h in &r.headers {
                d.text("AllowedHeader", h);
            }
            for h in &r.expose {
                d.text("ExposeHeader", h);
            }
            if let Some(s) = r.max_age_s {
                d.num("MaxAgeSeconds", s);
            }
            d.close("CORSRule");
        }
        d.finish()
    }
}

/// Reads a PutBucketCors body: 1 to [`MAX_RULES`] rules, each with at
/// least one AllowedOrigin and one AllowedMethod of [`METHODS`]; an origin
/// or header with more than one `*` is refused, as S3 refuses it.
pub fn parse(body: &[u8]) -> Result<Config, XmlError> {
    let mut rules: Vec<Rule> = Vec::new();
    let mut cur: Option<Rule> = None;
    walk(body, "CORSConfiguration", |step| {
        match step {
            Step::Open {
                depth: 1,
                name: "CORSRule",
            } => {
                if rules.len() >= MAX_RULES {
                    return Err(XmlError::TooMany {
                        what: "CORSRule",
                        max: MAX_RULES,
                    });
                }
                cur = Some(Rule::default());
            }
            Step::Close {
                depth: 2,
                name,
                text,
            } => {
                let Some(r) = cur.as_mut() else {
                    return Ok(());
                };
                field(r, name, text.trim())?;
            }
            Step::Close {
                depth: 1,
                name: "CORSRule",
                ..
            } => {
                let r = cur.take().unwrap_or_default();
                if r.origins.is_empty() || r.methods.is_empty() {
                    return Err(XmlError::Invalid(
                        "a CORSRule needs at least one AllowedOrigin and one AllowedMethod".into(),
                    ));
                }
                rules.push(r);
            }
            _ => {}
        }
        Ok(())
    })?;
    if rules.is_empty() {
        return Err(XmlError::Invalid(
            "a CORSConfiguration needs a CORSRule".into(),
        ));
    }
    Ok(Config { rules })
}

/// One element of a `<CORSRule>` into `r`.
fn field(r: &mut Rule, name: &str, t: &str) -> Result<(), XmlError> {
    let one_star = |what: &str| {
        if t.matches('*').count() > 1 {
            Err(XmlError::Invalid(format!(
                "{what} \"{t}\" can not have more than one wildcard"
            )))
        } else {
            Ok(t.to_string())
        }
    };
    match name {
        "ID" => r.id = Some(t.to_string()),
        "AllowedOrigin" => r.origins.push(one_star("AllowedOrigin")?),
        "AllowedHeader" => r.headers.push(one_star("AllowedHeader")?),
        "ExposeHeader" => r.expose.push(t.to_string()),
        "AllowedMethod" => {
            if !METHODS.contains(&t) {
                return Err(XmlError::Invalid(format!(
                    "Found unsupported HTTP method in CORS config. Unsupported method is {t}"
                )));
            }
            r.methods.push(t.to_string());
        }
        "MaxAgeSeconds" => {
            let s = t.parse::<u32>().map_err(|_| {
                XmlError::Invalid(format!("MaxAgeSeconds {t}: a number of seconds"))
            })?;
            r.max_age_s = Some(s);
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests;
