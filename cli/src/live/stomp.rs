//! A minimal STOMP 1.2 client over a blocking `TcpStream`: CONNECT, SEND (custom headers,
//! receipts), SUBSCRIBE (custom headers), MESSAGE, ACK, NACK, DISCONNECT. Enough for `sim live`
//! against ActiveMQ Classic; no heart-beating (the broker is on loopback).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// Largest frame accepted (headers and body).
pub const MAX_FRAME: usize = 16 << 20;

/// One STOMP frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The command (`SEND`, `MESSAGE`, ...).
    pub command: String,
    /// Headers in order (a repeated header: the first wins, as STOMP 1.2 says).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Frame {
    /// A frame with no headers and no body.
    pub fn new(command: &str) -> Frame {
        Frame {
            command: command.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// Adds a header.
    pub fn header(mut self, k: &str, v: impl Into<String>) -> Frame {
        self.headers.push((k.to_string(), v.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, b: impl Into<Vec<u8>>) -> Frame {
        self.body = b.into();
        self
    }

    /// The first value of header `k`.
    pub fn get(&self, k: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(h, _)| h == k)
            .map(|(_, v)| v.as_str())
    }

    /// The frame on the wire: escaped headers (except in CONNECT/CONNECTED, as STOMP 1.2 says),
    /// a `content-length`, the body and the NUL.
    pub fn encode(&self) -> Vec<u8> {
        let raw = self.command == "CONNECT" || self.command == "CONNECTED";
        let mut out = Vec::with_capacity(64 + self.body.len());
        out.extend_from_slice(self.command.as_bytes());
        out.push(b'\n');
        for (k, v) in &self.headers {
            if raw {
                out.extend_from_slice(k.as_bytes());
                out.push(b':');
                out.extend_from_slice(v.as_bytes());
            } else {
                out.extend_from_slice(escape(k).as_bytes());
                out.push(b':');
                out.extend_from_slice(escape(v).as_bytes());
            }
            out.push(b'\n');
        }
        if !self.body.is_empty() && self.get("content-length").is_none() {
            out.extend_from_slice(format!("content-length:{}\n", self.body.len()).as_bytes());
        }
        out.push(b'\n');
        out.extend_from_slice(&self.body);
        out.push(0);
        out
    }
}

/// STOMP 1.2 header escaping.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            ':' => o.push_str("\\c"),
            c => o.push(c),
        }
    }
    o
}

/// STOMP 1.2 header unescaping; an undefined escape is an error.
pub fn unescape(s: &str) -> Result<String, String> {
    let mut o = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            o.push(c);
            continue;
        }
        match it.next() {
            Some('\\') => o.push('\\'),
            Some('n') => o.push('\n'),
            Some('r') => o.push('\r'),
            Some('c') => o.push(':'),
            other => {
                return Err(format!(
                    "undefined header escape \\{}",
                    other.unwrap_or(' ')
                ))
            }
        }
    }
    Ok(o)
}

/// Parses one frame from the front of `buf`: `Ok(None)` when more bytes are needed, else the
/// frame and the bytes it used (leading end-of-lines, heart-beats, are skipped and counted).
pub fn parse(buf: &[u8]) -> Result<Option<(Frame, usize)>, String> {
    let mut start = 0;
    while start < buf.len() && (buf[start] == b'\n' || buf[start] == b'\r') {
        start += 1;
    }
    let rest = &buf[start..];
    // The end of the headers: an empty line.
    let mut pos = 0;
    let mut lines: Vec<&[u8]> = Vec::new();
    let body_start;
    loop {
        let Some(nl) = rest[pos..].iter().position(|&b| b == b'\n') else {
            if rest.len() > MAX_FRAME {
                return Err("frame headers too long".into());
            }
            return Ok(None);
        };
        let mut line = &rest[pos..pos + nl];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        pos += nl + 1;
        if line.is_empty() {
            body_start = pos;
            break;
        }
        lines.push(line);
    }
    let text = |l: &[u8]| String::from_utf8(l.to_vec()).map_err(|_| "header not UTF-8".to_string());
    let command = text(lines.first().ok_or("empty frame")?)?;
    let raw = command == "CONNECTED" || command == "CONNECT";
    let mut headers = Vec::new();
    for l in &lines[1..] {
        let l = text(l)?;
        let (k, v) = l
            .split_once(':')
            .ok_or_else(|| format!("header without a colon: {l:?}"))?;
        if raw {
            headers.push((k.to_string(), v.to_string()));
        } else {
            headers.push((unescape(k)?, unescape(v)?));
        }
    }
    let len = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .map(|(_, v)| v.trim().parse::<usize>())
        .transpose()
        .map_err(|_| "bad content-length".to_string())?;
    let (body, end) = match len {
        Some(n) => {
            if n > MAX_FRAME {
                return Err("frame body too long".into());
            }
            if rest.len() < body_start + n + 1 {
                return Ok(None);
            }
            if rest[body_start + n] != 0 {
                return Err("frame body not followed by NUL".into());
            }
            (
                rest[body_start..body_start + n].to_vec(),
                body_start + n + 1,
            )
        }
        None => match rest[body_start..].iter().position(|&b| b == 0) {
            Some(z) => (
                rest[body_start..body_start + z].to_vec(),
                body_start + z + 1,
            ),
            None if rest.len() > MAX_FRAME => return Err("frame body too long".into()),
            None => return Ok(None),
        },
    };
    Ok(Some((
        Frame {
            command,
            headers,
            body,
        },
        start + end,
    )))
}

/// Whether `stream` has data (or an end or error) to read within `wait` (rounded up to the
/// millisecond).
fn readable(stream: &TcpStream, wait: Duration) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    let ms = wait.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    let mut fd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one valid pollfd that lives for the call.
    let n = unsafe { libc::poll(&mut fd, 1, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(n > 0)
}

/// Closes a socket abruptly (both directions), as the death of its process does.
pub fn close_socket(s: &TcpStream) {
    let _ = s.shutdown(Shutdown::Both);
}

/// A STOMP connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    /// Connects and logs in (`CONNECT`, waits for `CONNECTED`).
    pub fn connect(port: u16, timeout: Duration) -> io::Result<Conn> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        let mut c = Conn {
            stream,
            buf: Vec::new(),
        };
        c.send(
            &Frame::new("CONNECT")
                .header("accept-version", "1.2")
                .header("host", "localhost")
                .header("heart-beat", "0,0"),
        )?;
        match c.recv(Some(timeout))? {
            Some(f) if f.command == "CONNECTED" => Ok(c),
            Some(f) => Err(io::Error::other(format!(
                "{}: {}",
                f.command,
                f.get("message").unwrap_or("")
            ))),
            None => Err(io::Error::new(io::ErrorKind::TimedOut, "no CONNECTED")),
        }
    }

    /// Writes one frame.
    pub fn send(&mut self, f: &Frame) -> io::Result<()> {
        self.stream.write_all(&f.encode())
    }

    /// The next frame; `Ok(None)` when `timeout` passes first (`None`: wait for ever). The end of
    /// the stream is an error (`UnexpectedEof`).
    pub fn recv(&mut self, timeout: Option<Duration>) -> io::Result<Option<Frame>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some((f, used)) = parse(&self.buf).map_err(io::Error::other)? {
                self.buf.drain(..used);
                return Ok(Some(f));
            }
            if let Some(d) = deadline {
                let now = Instant::now();
                if now >= d {
                    return Ok(None);
                }
                // Wait for data with poll(2), not the socket's receive timeout: Linux keeps
                // SO_RCVTIMEO in jiffies and rounds it up (with HZ = 250, 1 ms waits 8 ms and
                // 5 ms waits 12 ms), which delayed every ACK by 4 to 8 ms past `ack_latency`
                // (docs/calibration.md). poll's millisecond timeout runs on a high-resolution timer.
                if !readable(&self.stream, d - now)? {
                    continue;
                }
            }
            self.stream.set_read_timeout(None)?;
            let mut chunk = [0u8; 8192];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::TimedOut => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends `f` with a receipt header and waits for the RECEIPT (other frames that arrive
    /// meanwhile are returned in `skipped`). An ERROR frame is an error.
    pub fn send_with_receipt(
        &mut self,
        f: Frame,
        receipt: &str,
        timeout: Duration,
        skipped: &mut Vec<Frame>,
    ) -> io::Result<()> {
        self.send(&f.header("receipt", receipt))?;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(Some(left))? {
                Some(r) if r.command == "RECEIPT" && r.get("receipt-id") == Some(receipt) => {
                    return Ok(())
                }
                Some(r) if r.command == "ERROR" => {
                    return Err(io::Error::other(format!(
                        "ERROR: {}",
                        r.get("message").unwrap_or("")
                    )))
                }
                Some(r) => skipped.push(r),
                None => return Err(io::Error::new(io::ErrorKind::TimedOut, "no RECEIPT")),
            }
        }
    }

    /// A second handle on the socket: another thread closes it with [`close_socket`] (a crash
    /// at its instant, whatever this connection's owner is doing).
    pub fn socket(&self) -> io::Result<TcpStream> {
        self.stream.try_clone()
    }

    /// Closes the connection abruptly (no DISCONNECT): what the broker sees when a process dies.
    pub fn abort(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// A polite DISCONNECT (with a receipt, so every ACK sent before it has been handled), then
    /// close.
    pub fn disconnect(mut self) {
        let mut skipped = Vec::new();
        let _ = self.send_with_receipt(
            Frame::new("DISCONNECT"),
            "bye",
            Duration::from_secs(2),
            &mut skipped,
        );
        self.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_send_with_escaped_headers_and_body() {
        let f = Frame::new("SEND")
            .header("destination", "/queue/q")
            .header("odd:key", "a\nb\\c")
            .body("hi");
        let b = f.encode();
        assert_eq!(
            b,
            b"SEND\ndestination:/queue/q\nodd\\ckey:a\\nb\\\\c\ncontent-length:2\n\nhi\0".to_vec()
        );
        let (g, used) = parse(&b).unwrap().unwrap();
        assert_eq!(used, b.len());
        assert_eq!(g.get("odd:key"), Some("a\nb\\c"));
        assert_eq!(g.body, b"hi");
    }

    #[test]
    fn connect_headers_are_not_escaped() {
        let b = Frame::new("CONNECT").header("host", "a:b").encode();
        assert_eq!(b, b"CONNECT\nhost:a:b\n\n\0".to_vec());
    }

    #[test]
    fn parse_message_with_heartbeats_crlf_and_partial_input() {
        let wire = b"\n\r\nMESSAGE\r\nsubscription:0\r\nmessage-id:ID\\c1\r\nredelivered:true\r\n\r\nbody\0MESSAGE\nx:1\n\n\0";
        // Every proper prefix of the first frame needs more bytes.
        let first_end = wire.iter().position(|&b| b == 0).unwrap() + 1;
        for n in 0..first_end {
            assert_eq!(parse(&wire[..n]).unwrap(), None, "prefix {n}");
        }
        let (f, used) = parse(wire).unwrap().unwrap();
        assert_eq!(used, first_end);
        assert_eq!(f.command, "MESSAGE");
        assert_eq!(f.get("message-id"), Some("ID:1"));
        assert_eq!(f.get("redelivered"), Some("true"));
        assert_eq!(f.body, b"body");
        let (g, used2) = parse(&wire[used..]).unwrap().unwrap();
        assert_eq!(g.get("x"), Some("1"));
        assert_eq!(used + used2, wire.len());
    }

    #[test]
    fn content_length_allows_nul_in_body() {
        let f = Frame::new("MESSAGE").body(vec![1, 0, 2]);
        let b = f.encode();
        let (g, _) = parse(&b).unwrap().unwrap();
        assert_eq!(g.body, vec![1, 0, 2]);
        // Missing NUL after the declared length is an error.
        assert!(parse(b"MESSAGE\ncontent-length:1\n\nab\0").is_err());
    }

    #[test]
    fn repeated_header_first_wins_and_bad_escape_fails() {
        let (f, _) = parse(b"MESSAGE\nk:1\nk:2\n\n\0").unwrap().unwrap();
        assert_eq!(f.get("k"), Some("1"));
        assert!(parse(b"MESSAGE\nk:\\t\n\n\0").is_err());
        assert!(parse(b"MESSAGE\nnocolon\n\n\0").is_err());
    }

    #[test]
    fn escape_roundtrip() {
        for s in ["", "plain", "a:b", "\\\n\r:", "é:ü"] {
            assert_eq!(unescape(&escape(s)).unwrap(), s);
        }
    }
}
