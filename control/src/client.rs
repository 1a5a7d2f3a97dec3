//! The client's side: find the holder of an image, make sure it is one
//! this user may trust, then ask it.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::fd::BorrowedFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::peer::{self, Trust};
use crate::{locate, ControlError, REQUEST_DEADLINE};

/// How long a client keeps asking a holder that answers "busy": past the
/// request deadline, by when every slot held by a silent client is free.
const BUSY_PATIENCE: Duration = Duration::from_secs(REQUEST_DEADLINE.as_secs() + 2);

/// Connect to the process answering for `image` and check who it is,
/// before a byte (or a descriptor) is sent to it. `Ok(None)`: nothing
/// listens on the image's name.
fn connect(image: &Path) -> Result<Option<UnixStream>, ControlError> {
    let io = |source| ControlError::Io {
        path: image.to_path_buf(),
        source,
    };
    let (name, owner) = locate(image).map_err(io)?;
    let addr = SocketAddr::from_abstract_name(&name).map_err(io)?;
    let s = match UnixStream::connect_addr(&addr) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    // Abstract names have no permissions: whoever bound it first answers.
    // Its credentials were fixed when it listened, so they cannot be
    // borrowed from a trusted process afterwards.
    let p = peer::peer(&s).map_err(io)?;
    let trust = Trust::new(owner);
    if !trust.allows(p.uid) {
        return Err(ControlError::Impostor {
            image: image.to_path_buf(),
            name: String::from_utf8_lossy(&name).into_owned(),
            process: peer::describe(p.pid, Some(p.uid)),
            owner,
            me: trust.me(),
        });
    }
    Ok(Some(s))
}

/// Does a process answer for `image` on its control socket? (A probe: the
/// holder sees a connection without a request and drops it.)
/// [`ControlError::Impostor`] when the process answering is not trusted
/// with the image.
pub fn is_held(image: &Path) -> Result<bool, ControlError> {
    Ok(connect(image)?.is_some())
}

/// Ask the process holding `image`. `on_progress` sees each progress line.
/// [`ControlError::NotServed`] when nothing holds it.
pub fn request(
    image: &Path,
    req: &Value,
    on_progress: &mut dyn FnMut(&Value),
) -> Result<Value, ControlError> {
    request_passing(image, req, None, on_progress)
}

/// [`request`], passing the connected TCP socket `pass` to the holder with
/// the request (SCM_RIGHTS), so the process that owns the Volume moves the
/// data itself: the data path stays one copy. The socket is passed only to
/// a holder this user trusts ([`ControlError::Impostor`] otherwise).
pub fn request_passing(
    image: &Path,
    req: &Value,
    pass: Option<&TcpStream>,
    on_progress: &mut dyn FnMut(&Value),
) -> Result<Value, ControlError> {
    let t0 = Instant::now();
    let mut wait = Duration::from_millis(20);
    loop {
        match ask(image, req, pass, on_progress) {
            Err(ControlError::Busy(_)) if t0.elapsed() + wait < BUSY_PATIENCE => {
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_millis(500));
            }
            r => return r,
        }
    }
}

fn ask(
    image: &Path,
    req: &Value,
    pass: Option<&TcpStream>,
    on_progress: &mut dyn FnMut(&Value),
) -> Result<Value, ControlError> {
    let io = |source| ControlError::Io {
        path: image.to_path_buf(),
        source,
    };
    let Some(mut s) = connect(image)? else {
        return Err(ControlError::NotServed(image.to_path_buf()));
    };
    let mut line = req.to_string();
    line.push('\n');
    // A holder that refuses (this user, or busy) says so and closes at
    // once, possibly before the request is written: a failed write is
    // reported only if no answer can be read.
    let wrote = match pass {
        None => s.write_all(line.as_bytes()),
        Some(sock) => {
            use std::os::fd::AsFd;
            send_passing(&s, line.as_bytes(), sock.as_fd())
        }
    };
    let answer = read_answer(image, &s, on_progress);
    match (answer, wrote) {
        (Err(ControlError::Io { .. }) | Ok(None), Err(e)) => Err(io(e)),
        (Ok(None), Ok(())) => Err(ControlError::Refused(
            "the holder closed the control connection without an answer".into(),
        )),
        (Ok(Some(v)), _) => {
            if v["ok"].as_bool() == Some(true) {
                Ok(v["result"].clone())
            } else if v["busy"].as_bool() == Some(true) {
                Err(ControlError::Busy(image.to_path_buf()))
            } else {
                Err(ControlError::Refused(
                    v["error"].as_str().unwrap_or("refused").to_string(),
                ))
            }
        }
        (Err(e), _) => Err(e),
    }
}

/// Write `line` with `fd` passed on its first message.
fn send_passing(s: &UnixStream, line: &[u8], fd: BorrowedFd<'_>) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    let fds = [fd];
    cmsg.push(SendAncillaryMessage::ScmRights(&fds));
    let n = rustix::net::sendmsg(
        s,
        &[std::io::IoSlice::new(line)],
        &mut cmsg,
        SendFlags::NOSIGNAL,
    )?;
    let mut rest = s;
    rest.write_all(&line[n..])
}

/// The holder's final line, after handing each progress line to
/// `on_progress`; `Ok(None)` if it closed without one.
fn read_answer(
    image: &Path,
    s: &UnixStream,
    on_progress: &mut dyn FnMut(&Value),
) -> Result<Option<Value>, ControlError> {
    for l in BufReader::new(s).lines() {
        let l = match l {
            Ok(l) => l,
            // The holder closed with our request unread (it refused before
            // reading it): the answer, if any, came before this.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(None),
            Err(e) => {
                return Err(ControlError::Io {
                    path: image.to_path_buf(),
                    source: e,
                })
            }
        };
        let v: Value = serde_json::from_str(&l)
            .map_err(|e| ControlError::Refused(format!("bad answer from the holder: {e}")))?;
        if let Some(p) = v.get("progress") {
            on_progress(p);
            continue;
        }
        return Ok(Some(v));
    }
    Ok(None)
}

/// A connection to an image's holder that stays open after its answer:
/// what the holder keeps for the request (a hold on a file's buffers, for
/// a direct reader's zero-copy read) lives until it is dropped.
#[derive(Debug)]
pub struct Session {
    s: UnixStream,
    /// Bytes of the answer's line read past its newline (the start of any
    /// raw bytes that follow it).
    rest: Vec<u8>,
}

impl Session {
    /// `n` raw bytes the holder sent after its answer line.
    pub fn read_bytes(&mut self, n: usize) -> std::io::Result<Vec<u8>> {
        use std::io::Read;
        let mut out = std::mem::take(&mut self.rest);
        if out.len() > n {
            self.rest = out.split_off(n);
            return Ok(out);
        }
        let have = out.len();
        out.resize(n, 0);
        (&self.s).read_exact(&mut out[have..])?;
        Ok(out)
    }
}

/// Most bytes an answer line may have before a session gives up on it.
const MAX_ANSWER: usize = 16 << 20;

/// Send `req` to the holder of `image` (passing `fd`, the image opened for
/// reading, as proof that this user may read it, when given) and read its
/// answer line; the connection stays open in the returned [`Session`].
/// [`ControlError::NotServed`] when nothing holds the image.
pub fn open_session(
    image: &Path,
    req: &Value,
    fd: Option<BorrowedFd<'_>>,
) -> Result<(Value, Session), ControlError> {
    let io = |source| ControlError::Io {
        path: image.to_path_buf(),
        source,
    };
    let s = connect(image)?.ok_or_else(|| ControlError::NotServed(image.to_path_buf()))?;
    let mut line = req.to_string();
    line.push('\n');
    let wrote = match fd {
        None => (&s).write_all(line.as_bytes()),
        Some(fd) => send_passing(&s, line.as_bytes(), fd),
    };
    // The answer line, byte-exact: what follows it belongs to the caller.
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    let nl = loop {
        if let Some(i) = got.iter().position(|&b| b == b'\n') {
            break i;
        }
        if got.len() > MAX_ANSWER {
            return Err(ControlError::Refused(
                "the holder's answer is too long".into(),
            ));
        }
        use std::io::Read;
        let n = match (&s).read(&mut chunk) {
            Ok(0) => {
                wrote.map_err(io)?;
                return Err(ControlError::Refused(
                    "the holder closed the control connection without an answer".into(),
                ));
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        got.extend_from_slice(&chunk[..n]);
    };
    let rest = got.split_off(nl + 1);
    let v: Value = serde_json::from_slice(&got[..nl])
        .map_err(|e| ControlError::Refused(format!("bad answer from the holder: {e}")))?;
    if v["ok"].as_bool() != Some(true) {
        let why = v["error"].as_str().unwrap_or("refused").to_string();
        return Err(if v["busy"].as_bool() == Some(true) {
            ControlError::Busy(image.to_path_buf())
        } else if v["stale"].as_bool() == Some(true) {
            ControlError::Stale(why)
        } else {
            ControlError::Refused(why)
        });
    }
    Ok((v["result"].clone(), Session { s, rest }))
}
