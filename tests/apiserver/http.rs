//! The test API server's HTTP/1.1 layer: plain or TLS connections, request heads read off a
//! kept-alive connection, and whole responses (JSON bodies, `Status` errors).

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::{Shared, reason_phrase, status_body};

/// A plain or TLS connection.
pub(super) enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Conn {
    pub(super) fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(t) => &t.sock,
        }
    }

    /// Cut the TCP connection without any TLS close_notify or final chunk.
    pub(super) fn cut(&self) {
        let _ = self.tcp().shutdown(Shutdown::Both);
    }

    pub(super) fn close(&mut self) {
        if let Conn::Tls(t) = self {
            t.conn.send_close_notify();
            let _ = t.flush();
        }
        let _ = self.tcp().shutdown(Shutdown::Both);
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(t) => t.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(t) => t.flush(),
        }
    }
}

pub(super) struct Req {
    pub(super) method: String,
    pub(super) path: String,
    /// The request body (`Content-Length` bytes; tether sends no chunked bodies).
    pub(super) body: Vec<u8>,
    pub(super) query: HashMap<String, String>,
    pub(super) bearer: Option<String>,
    pub(super) client_cert: bool,
    /// The client asked to close the connection after this request.
    pub(super) close: bool,
}

/// What the connection does after a request.
#[derive(PartialEq, Eq)]
pub(super) enum Next {
    KeepAlive,
    Close,
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Read one request head from a connection kept across requests (one `BufReader` for the
/// connection's life, so nothing a client sends early is lost).
pub(super) fn read_request(r: &mut BufReader<Conn>) -> Option<Req> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let method = line.split_whitespace().next()?.to_string();
    let target = line.split_whitespace().nth(1)?.to_string();
    let mut bearer = None;
    let mut close = false;
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("authorization") {
                bearer = v.trim().strip_prefix("Bearer ").map(str::to_string);
            } else if k.eq_ignore_ascii_case("connection") {
                close = v.trim().eq_ignore_ascii_case("close");
            } else if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().ok()?;
            }
        }
    }
    if length > 1 << 20 {
        return None;
    }
    let mut body = vec![0u8; length];
    std::io::Read::read_exact(r, &mut body).ok()?;
    let (path, q) = target.split_once('?').unwrap_or((&target, ""));
    let query = q
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    Some(Req {
        method,
        path: path.to_string(),
        body,
        query,
        bearer,
        client_cert: false,
        close,
    })
}

pub(super) fn write_counted(sh: &Shared, conn: &mut Conn, data: &[u8]) -> io::Result<()> {
    sh.bytes_sent
        .fetch_add(data.len() as u64, Ordering::Relaxed);
    conn.write_all(data)
}

pub(super) fn respond(sh: &Shared, conn: &mut Conn, code: u16, body: &Value) -> Next {
    respond_bytes(sh, conn, code, &serde_json::to_vec(body).unwrap())
}

/// A whole response; the connection stays open for the next request (HTTP/1.1, as Go's
/// net/http serves kube-apiserver's clients).
pub(super) fn respond_bytes(sh: &Shared, conn: &mut Conn, code: u16, body: &[u8]) -> Next {
    let head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        reason_phrase(code),
        body.len()
    );
    let ok = write_counted(sh, conn, head.as_bytes())
        .and_then(|_| write_counted(sh, conn, body))
        .and_then(|_| conn.flush())
        .is_ok();
    if ok { Next::KeepAlive } else { Next::Close }
}

pub(super) fn status(sh: &Shared, conn: &mut Conn, code: u16, reason: &str, message: &str) -> Next {
    respond(sh, conn, code, &status_body(code, reason, message))
}
