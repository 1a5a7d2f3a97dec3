//! A small XML writer for S3's answers: elements with text, escaped so
//! any key survives the trip.

use std::fmt::Write as _;

use crate::names::uri_encode;

/// The namespace of S3's answers (every one but `<Error>`).
pub const S3_NS: &str = "http://s3.amazonaws.com/doc/2006-03-01/";

/// The XML declaration S3 begins every body with.
pub const DECLARATION: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";

/// Appends `s` as XML text: `<&>"'` as entities, and control characters
/// (C0, DEL) as numeric references, as S3 does, so that a parser gives
/// back exactly the key (a raw CR or tab would be normalised away or
/// refused). Note that XML 1.0 parsers refuse references to C0 characters
/// other than tab, LF and CR; clients that may meet such keys ask for
/// `encoding-type=url`.
pub fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_ascii_control() => {
                // Writing to a String cannot fail.
                let _ = write!(out, "&#x{:X};", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// An answer being written: the declaration, the root element, then
/// children in order.
#[derive(Debug)]
pub(crate) struct Doc {
    out: String,
    root: &'static str,
}

impl Doc {
    /// Starts a document whose root is `root`, in S3's namespace when
    /// `namespaced`.
    pub(crate) fn new(root: &'static str, namespaced: bool) -> Doc {
        let mut out = String::with_capacity(512);
        out.push_str(DECLARATION);
        out.push('<');
        out.push_str(root);
        if namespaced {
            out.push_str(" xmlns=\"");
            out.push_str(S3_NS);
            out.push('"');
        }
        out.push('>');
        Doc { out, root }
    }

    /// `<name>`.
    pub(crate) fn open(&mut self, name: &str) -> &mut Doc {
        self.out.push('<');
        self.out.push_str(name);
        self.out.push('>');
        self
    }

    /// `</name>`.
    pub(crate) fn close(&mut self, name: &str) -> &mut Doc {
        self.out.push_str("</");
        self.out.push_str(name);
        self.out.push('>');
        self
    }

    /// `<name>text</name>`, the text escaped.
    pub(crate) fn text(&mut self, name: &str, text: &str) -> &mut Doc {
        self.open(name);
        escape_into(&mut self.out, text);
        self.close(name)
    }

    /// `<name>text</name>` with the text URL-encoded first when `url`
    /// (`encoding-type=url`: AWS's UriEncode with `/` kept, so a space is
    /// `%20` and `+` is `%2B`).
    pub(crate) fn key(&mut self, name: &str, text: &str, url: bool) -> &mut Doc {
        if url {
            let mut enc = String::with_capacity(text.len() + 8);
            uri_encode(text, false, &mut enc);
            self.text(name, &enc)
        } else {
            self.text(name, text)
        }
    }

    /// `<name>text</name>` if there is a text.
    pub(crate) fn text_opt(&mut self, name: &str, text: Option<&str>) -> &mut Doc {
        if let Some(t) = text {
            self.text(name, t);
        }
        self
    }

    /// `<name>n</name>` for a number.
    pub(crate) fn num(&mut self, name: &str, n: impl std::fmt::Display) -> &mut Doc {
        self.text(name, &n.to_string())
    }

    /// `<name>true</name>` or `false`.
    pub(crate) fn bool(&mut self, name: &str, b: bool) -> &mut Doc {
        self.text(name, if b { "true" } else { "false" })
    }

    /// `<name>` with an ISO 8601 time.
    pub(crate) fn time(&mut self, name: &str, unix_ns: i64) -> &mut Doc {
        self.text(name, &super::iso8601(unix_ns))
    }

    /// One element per checksum: `<ChecksumCRC32C>value</ChecksumCRC32C>`.
    pub(crate) fn checksums(
        &mut self,
        checksums: &[(crate::checksum::Algorithm, String)],
    ) -> &mut Doc {
        for (alg, value) in checksums {
            self.text(alg.xml_name(), value);
        }
        self
    }

    /// Closes the root and returns the document.
    pub(crate) fn finish(mut self) -> String {
        let root = self.root;
        self.close(root);
        self.out
    }
}
