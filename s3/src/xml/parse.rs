//! Reading S3 request bodies: a bounded walk over quick-xml's events that
//! hands each element's text to the parser of one request.
//!
//! Bounds: a body over [`MAX_BODY_BYTES`] is refused before parsing, and
//! elements may nest at most [`MAX_DEPTH`] deep; the parsers bound their
//! lists (10,000 parts, 1,000 keys). No DTD is read (a `<!DOCTYPE>` is
//! refused), so no entity expands beyond the five XML predefines and
//! character references. Namespaces and prefixes are ignored (elements
//! are matched by local name), as are elements a request does not define.

use quick_xml::events::Event;
use quick_xml::Reader;

use crate::error::Code;

/// The largest request body read, 4 MiB. The largest legitimate one is a
/// CompleteMultipartUpload of 10,000 parts: about 180 bytes a part with an
/// ETag and one SHA-256, up to 300 with several checksums and indentation,
/// so 3 MiB at most. A DeleteObjects of 1,000 keys of 1,024 bytes is 1 MiB
/// plus escapes.
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// Deepest element nesting read. S3's request bodies are three deep.
pub const MAX_DEPTH: usize = 16;

/// A request body refused. Every one is S3's MalformedXML.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XmlError {
    /// The body is larger than [`MAX_BODY_BYTES`].
    #[error("the request body is {got_bytes} bytes; at most {max_bytes} are read")]
    TooLarge {
        /// The body's size.
        got_bytes: usize,
        /// The limit.
        max_bytes: usize,
    },
    /// The body has no root element.
    #[error("the request body is empty; expected a <{0}> document")]
    Empty(&'static str),
    /// The XML is not well-formed.
    #[error("the request body is not well-formed XML: {0}")]
    Syntax(String),
    /// The root element is not the one the request takes.
    #[error("the root element is <{got}>; this request takes <{expected}>")]
    WrongRoot {
        /// The root found.
        got: String,
        /// The root wanted.
        expected: &'static str,
    },
    /// Elements nest deeper than [`MAX_DEPTH`].
    #[error("elements nest deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// More list entries than the request allows.
    #[error("more than {max} <{what}> elements in one request")]
    TooMany {
        /// The element.
        what: &'static str,
        /// The limit.
        max: usize,
    },
    /// A required element is missing or a value is not valid.
    #[error("{0}")]
    Invalid(String),
}

impl XmlError {
    /// The S3 code to answer with: MalformedXML.
    pub fn code(&self) -> Code {
        Code::MalformedXML
    }
}

/// One step of the walk. Depth 0 is the root element.
#[derive(Debug)]
pub(crate) enum Step<'a> {
    /// An element opens.
    Open { depth: usize, name: &'a str },
    /// An element closes; `text` is the text since its last child element
    /// opened or closed (its whole text when it has no children), with
    /// references resolved.
    Close {
        depth: usize,
        name: &'a str,
        text: &'a str,
    },
}

fn syntax(e: impl std::fmt::Display) -> XmlError {
    XmlError::Syntax(e.to_string())
}

/// The text of a reference: a character reference or one of XML's five
/// predefined entities. Anything else would need a DTD, which is not read.
fn resolve_ref(r: &quick_xml::events::BytesRef<'_>, out: &mut String) -> Result<(), XmlError> {
    if let Some(c) = r.resolve_char_ref().map_err(syntax)? {
        out.push(c);
        return Ok(());
    }
    let name = r.decode().map_err(syntax)?;
    out.push(match &*name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "apos" => '\'',
        "quot" => '"',
        other => {
            return Err(XmlError::Syntax(format!(
                "unknown entity &{other}; (only XML's predefined entities are allowed)"
            )))
        }
    });
    Ok(())
}

fn local_name(e: &quick_xml::events::BytesStart<'_>) -> Result<String, XmlError> {
    std::str::from_utf8(e.local_name().as_ref())
        .map(str::to_owned)
        .map_err(|_| XmlError::Syntax("an element name is not UTF-8".into()))
}

/// Walks `body`, which must be one `<root>` document, calling `f` for
/// every element opened and closed.
pub(crate) fn walk(
    body: &[u8],
    root: &'static str,
    mut f: impl FnMut(Step<'_>) -> Result<(), XmlError>,
) -> Result<(), XmlError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(XmlError::TooLarge {
            got_bytes: body.len(),
            max_bytes: MAX_BODY_BYTES,
        });
    }
    let mut reader = Reader::from_reader(body);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<String> = Vec::new();
    let mut text = String::new();
    let mut root_seen = false;
    loop {
        let ev = reader.read_event().map_err(syntax)?;
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let name = local_name(e)?;
                if stack.is_empty() {
                    if root_seen {
                        return Err(XmlError::Syntax("more than one root element".into()));
                    }
                    if name != root {
                        return Err(XmlError::WrongRoot {
                            got: name,
                            expected: root,
                        });
                    }
                    root_seen = true;
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(XmlError::TooDeep);
                }
                f(Step::Open {
                    depth: stack.len(),
                    name: &name,
                })?;
                text.clear();
                if matches!(ev, Event::Empty(_)) {
                    f(Step::Close {
                        depth: stack.len(),
                        name: &name,
                        text: "",
                    })?;
                } else {
                    stack.push(name);
                }
            }
            Event::End(_) => {
                // check_end_names has matched it with the open element.
                let name = stack
                    .pop()
                    .ok_or_else(|| XmlError::Syntax("a closing tag without its opening".into()))?;
                f(Step::Close {
                    depth: stack.len(),
                    name: &name,
                    text: &text,
                })?;
                text.clear();
            }
            Event::Text(t) => {
                let t = t.xml10_content().map_err(syntax)?;
                if stack.is_empty() {
                    if !t.trim().is_empty() {
                        return Err(XmlError::Syntax("text outside the root element".into()));
                    }
                } else {
                    text.push_str(&t);
                }
            }
            Event::CData(c) => {
                if stack.is_empty() {
                    return Err(XmlError::Syntax("CDATA outside the root element".into()));
                }
                text.push_str(&c.decode().map_err(syntax)?);
            }
            Event::GeneralRef(r) => {
                if stack.is_empty() {
                    return Err(XmlError::Syntax(
                        "a reference outside the root element".into(),
                    ));
                }
                resolve_ref(&r, &mut text)?;
            }
            Event::DocType(_) => {
                return Err(XmlError::Syntax(
                    "a <!DOCTYPE> is not accepted in S3 request bodies".into(),
                ))
            }
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
            Event::Eof => break,
        }
    }
    if let Some(open) = stack.last() {
        return Err(XmlError::Syntax(format!("<{open}> is never closed")));
    }
    if !root_seen {
        return Err(XmlError::Empty(root));
    }
    Ok(())
}
