//! One large object through the multipart API, timed: CreateMultipartUpload,
//! the parts on `parallel` keep-alive connections (each part's ETag
//! checked), CompleteMultipartUpload (the object's ETag checked); then the
//! download as ranged GETs of the parts on as many connections, each
//! compared byte for byte with what was sent.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crate::bodies::{multipart_etag, pattern, Body, Checksum};
use crate::http::{xml_field, Conn};
use crate::request::{encode_path, Endpoint, Payload};

#[derive(Debug, Clone)]
pub struct Opts {
    pub size_bytes: u64,
    pub part_bytes: usize,
    pub parallel: usize,
    /// Distinct part bodies made before the run, used in turn (memory and
    /// set-up time bounded whatever the object's size).
    pub distinct: usize,
    pub checksum: Checksum,
    pub payload: Payload,
    pub bucket: String,
    pub key: String,
}

/// The timed phases.
#[derive(Debug, Default)]
pub struct Outcome {
    pub parts: usize,
    pub upload_s: f64,
    pub download_s: f64,
}

/// The parts' bodies: `distinct` full ones used in turn, and a shorter
/// last one when the size is not a multiple of the part size.
struct Parts {
    full: Vec<Body>,
    last: Option<Body>,
    count: usize,
    part_bytes: usize,
}

impl Parts {
    fn new(o: &Opts) -> Result<Parts, String> {
        if o.part_bytes == 0 || o.size_bytes == 0 {
            return Err("the object and its parts need a size".into());
        }
        let count = o.size_bytes.div_ceil(o.part_bytes as u64);
        if count > 10_000 {
            return Err(format!(
                "{count} parts: S3 allows at most 10,000 (a larger --part-mib)"
            ));
        }
        let count = count as usize;
        let rem = (o.size_bytes % o.part_bytes as u64) as usize;
        let full_count = if rem == 0 { count } else { count - 1 };
        let full = (0..o.distinct.clamp(1, full_count.max(1)))
            .filter(|_| full_count > 0)
            .map(|k| Body::new(pattern(o.part_bytes, 1000 + k as u64), o.checksum))
            .collect();
        let last = (rem > 0).then(|| Body::new(pattern(rem, 999), o.checksum));
        Ok(Parts {
            full,
            last,
            count,
            part_bytes: o.part_bytes,
        })
    }

    /// Part `n` (1-based).
    fn get(&self, n: usize) -> &Body {
        match &self.last {
            Some(l) if n == self.count => l,
            _ => &self.full[(n - 1) % self.full.len()],
        }
    }
}

/// Run `f(conn, part number)` for every part on `parallel` connections.
fn each_part(
    addr: &str,
    parts: &Parts,
    parallel: usize,
    f: &(dyn Fn(&mut Conn, usize) -> Result<(), String> + Sync),
) -> Result<(), String> {
    let next = AtomicUsize::new(1);
    let results: Vec<Result<(), String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..parallel.clamp(1, parts.count))
            .map(|_| {
                let next = &next;
                sc.spawn(move || {
                    let mut c = Conn::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
                    loop {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        if n > parts.count {
                            return Ok(());
                        }
                        f(&mut c, n)?;
                    }
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a client thread panicked".into()))
            })
            .collect()
    });
    results.into_iter().collect()
}

fn unquote_xml(s: &str) -> String {
    s.replace("&quot;", "\"").replace("&#34;", "\"")
}

/// Upload, then download; `phase(name)` is called at the start and end of
/// each timed phase (the caller reads the server's CPU there).
pub fn run(ep: &Endpoint, o: &Opts, phase: &mut dyn FnMut(&str)) -> Result<Outcome, String> {
    let parts = Parts::new(o)?;
    let addr = ep.host.as_str();
    let path = format!("/{}/{}", o.bucket, encode_path(&o.key));
    let mut c = Conn::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;

    phase("upload-start");
    let t0 = Instant::now();
    let head = ep.head("POST", &path, "uploads", None, o.payload, &[]);
    let a = c.request(&head, &[], 1 << 20)?;
    let text = String::from_utf8_lossy(&a.body);
    if a.head.status != 200 {
        return Err(format!("CreateMultipartUpload: {}: {text}", a.head.status));
    }
    let upload_id = xml_field(&text, "UploadId")
        .ok_or_else(|| format!("no UploadId in: {text}"))?
        .to_string();
    let id_q = encode_path(&upload_id).replace('/', "%2F");
    let etags: Vec<std::sync::Mutex<Option<String>>> = (0..parts.count)
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    each_part(addr, &parts, o.parallel, &|c, n| {
        let b = parts.get(n);
        let q = format!("partNumber={n}&uploadId={id_q}");
        let head = ep.head("PUT", &path, &q, Some((b, o.checksum)), o.payload, &[]);
        let a = c.request(&head, &b.data, 1 << 20)?;
        if a.head.status != 200 || a.head.etag.as_deref() != Some(b.etag.as_str()) {
            return Err(format!(
                "UploadPart {n}: {} with ETag {:?} (want {}): {}",
                a.head.status,
                a.head.etag,
                b.etag,
                String::from_utf8_lossy(&a.body)
            ));
        }
        *etags[n - 1].lock().map_err(|_| "a poisoned lock")? = a.head.etag;
        Ok(())
    })?;
    let mut xml = String::from("<CompleteMultipartUpload>");
    for (k, e) in etags.iter().enumerate() {
        let e = e.lock().map_err(|_| "a poisoned lock")?;
        let e = e
            .as_deref()
            .ok_or_else(|| format!("part {} has no ETag", k + 1))?;
        xml.push_str(&format!(
            "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>",
            k + 1,
            e.replace('"', "&quot;")
        ));
    }
    xml.push_str("</CompleteMultipartUpload>");
    let xml = Body::new(xml.into_bytes(), Checksum::None);
    let head = ep.head(
        "POST",
        &path,
        &format!("uploadId={id_q}"),
        Some((&xml, Checksum::None)),
        o.payload,
        &[],
    );
    let a = c.request(&head, &xml.data, 1 << 20)?;
    let text = String::from_utf8_lossy(&a.body);
    let want: Vec<[u8; 16]> = (1..=parts.count).map(|n| parts.get(n).md5).collect();
    let want = multipart_etag(&want);
    // S3 may answer 200 and an error in the body.
    if a.head.status != 200 || text.contains("<Error>") {
        return Err(format!(
            "CompleteMultipartUpload: {}: {text}",
            a.head.status
        ));
    }
    let got = xml_field(&text, "ETag").map(unquote_xml);
    if got.as_deref() != Some(want.as_str()) {
        return Err(format!(
            "CompleteMultipartUpload's ETag {got:?}, want {want}: {text}"
        ));
    }
    let upload_s = t0.elapsed().as_secs_f64();
    phase("upload-end");

    phase("download-start");
    let t0 = Instant::now();
    each_part(addr, &parts, o.parallel, &|c, n| {
        let b = parts.get(n);
        let from = (n - 1) * parts.part_bytes;
        let range = format!("bytes={}-{}", from, from + b.data.len() - 1);
        let head = ep.head("GET", &path, "", None, o.payload, &[("range", &range)]);
        let a = c.request(&head, &[], parts.part_bytes)?;
        if a.head.status != 206 {
            return Err(format!(
                "GET {range}: {}: {}",
                a.head.status,
                String::from_utf8_lossy(&a.body[..a.body.len().min(400)])
            ));
        }
        if a.body != b.data {
            return Err(format!("GET {range}: other bytes than part {n}'s"));
        }
        Ok(())
    })?;
    let download_s = t0.elapsed().as_secs_f64();
    phase("download-end");
    Ok(Outcome {
        parts: parts.count,
        upload_s,
        download_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(size: u64, part: usize) -> Opts {
        Opts {
            size_bytes: size,
            part_bytes: part,
            parallel: 2,
            distinct: 3,
            checksum: Checksum::None,
            payload: Payload::Signed,
            bucket: "b".into(),
            key: "k".into(),
        }
    }

    #[test]
    fn parts_cover_the_size_with_a_shorter_last_one() {
        let p = Parts::new(&opts(10_000, 4_096)).unwrap();
        assert_eq!(p.count, 3);
        let sizes: Vec<usize> = (1..=3).map(|n| p.get(n).data.len()).collect();
        assert_eq!(sizes, [4_096, 4_096, 10_000 - 8_192]);
        assert_ne!(p.get(1).data, p.get(2).data);
        let p = Parts::new(&opts(8_192, 4_096)).unwrap();
        assert_eq!(p.count, 2);
        assert_eq!(p.get(2).data.len(), 4_096);
        let p = Parts::new(&opts(100, 4_096)).unwrap();
        assert_eq!((p.count, p.get(1).data.len()), (1, 100));
    }

    #[test]
    fn impossible_part_counts_are_refused() {
        assert!(Parts::new(&opts(0, 4_096)).is_err());
        assert!(Parts::new(&opts(100, 0)).is_err());
        assert!(Parts::new(&opts(10_001, 1)).is_err());
    }
}
