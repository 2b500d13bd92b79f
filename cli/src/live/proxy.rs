//! `network_blip` for the user's consumers (`--consumer`): each copy reaches each broker through
//! a TCP proxy of its own on loopback, and a blip cuts that copy's proxies. A cut ends every
//! connection the copy has through them (both sockets shut down, so the broker sees the
//! connection drop and takes its deliveries back, and the process finds its socket closed on
//! its next read or write: the message in hand is still applied, its ack is lost), and closes
//! any connection the copy opens before the blip ends at once. It works for any protocol, and
//! the process needs no change beyond reconnecting, as a failover transport does.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the accepting thread and the pumps share with the [`Proxy`].
#[derive(Default)]
struct State {
    /// Inside a blip: new connections are closed at once.
    cut: AtomicBool,
    /// The proxy is dropped: the accepting thread ends.
    stop: AtomicBool,
    /// Both ends of every connection made through the proxy since the last cut.
    conns: Mutex<Vec<TcpStream>>,
}

impl State {
    fn conns(&self) -> std::sync::MutexGuard<'_, Vec<TcpStream>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Shuts every connection down: the pumps end on their next read.
    fn end_all(&self) {
        for s in self.conns().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// A loopback TCP proxy to `127.0.0.1:upstream` that can be cut and healed.
pub struct Proxy {
    port: u16,
    state: Arc<State>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards each connection to `upstream`. A connection
    /// the upstream refuses (the broker is down) is closed, as the broker would refuse it.
    pub fn start(upstream: u16) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let state = Arc::new(State::default());
        let st = state.clone();
        std::thread::Builder::new()
            .name(format!("proxy-{port}"))
            .spawn(move || accept_loop(listener, upstream, st))?;
        Ok(Proxy { port, state })
    }

    /// The port the copy connects to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The blip starts: every connection through the proxy ends, new ones are closed at once.
    pub fn cut(&self) {
        self.state.cut.store(true, Ordering::SeqCst);
        self.state.end_all();
    }

    /// The blip ends: connections are forwarded again.
    pub fn heal(&self) {
        self.state.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        self.state.end_all();
        // Wakes the accepting thread, which sees `stop`.
        let _ = TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], self.port)),
            Duration::from_secs(1),
        );
    }
}

fn accept_loop(listener: TcpListener, upstream: u16, st: Arc<State>) {
    for client in listener.incoming() {
        if st.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        if st.cut.load(Ordering::SeqCst) {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let addr = SocketAddr::from(([127, 0, 0, 1], upstream));
        let Ok(server) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = (
            client.try_clone(),
            server.try_clone(),
            client.try_clone(),
            server.try_clone(),
        ) else {
            continue;
        };
        {
            let mut conns = st.conns();
            // A cut between the check above and now: this one ends too.
            if st.cut.load(Ordering::SeqCst) {
                let _ = client.shutdown(Shutdown::Both);
                let _ = server.shutdown(Shutdown::Both);
                continue;
            }
            conns.push(c3);
            conns.push(s3);
        }
        let _ = std::thread::Builder::new().spawn(move || pump(client, s2));
        let _ = std::thread::Builder::new().spawn(move || pump(server, c2));
    }
}

/// Copies `from` to `to` until either ends, then ends both (the protocols staged here do not
/// half-close).
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    /// An upstream that answers each line with the line, on every connection.
    fn echo() -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming().map_while(Result::ok) {
                std::thread::spawn(move || {
                    let mut w = s.try_clone().unwrap();
                    for line in BufReader::new(s).lines().map_while(Result::ok) {
                        if writeln!(w, "{line}").is_err() {
                            break;
                        }
                    }
                });
            }
        });
        port
    }

    fn connect(port: u16) -> (TcpStream, BufReader<TcpStream>) {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let r = BufReader::new(s.try_clone().unwrap());
        (s, r)
    }

    /// The line echoed back, or `None` when the connection ended.
    fn ask(s: &mut TcpStream, r: &mut BufReader<TcpStream>, what: &str) -> Option<String> {
        writeln!(s, "{what}").ok()?;
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end().to_string()),
        }
    }

    #[test]
    fn a_cut_ends_the_connection_refuses_new_ones_until_healed() {
        let p = Proxy::start(echo()).unwrap();
        let (mut s, mut r) = connect(p.port());
        assert_eq!(ask(&mut s, &mut r, "one").as_deref(), Some("one"));
        p.cut();
        assert_eq!(ask(&mut s, &mut r, "two"), None, "the open connection ends");
        let (mut s2, mut r2) = connect(p.port());
        assert_eq!(
            ask(&mut s2, &mut r2, "three"),
            None,
            "closed at once in a blip"
        );
        p.heal();
        let (mut s3, mut r3) = connect(p.port());
        assert_eq!(ask(&mut s3, &mut r3, "four").as_deref(), Some("four"));
    }

    #[test]
    fn an_upstream_that_refuses_closes_the_copy_connection() {
        let dead = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = dead.local_addr().unwrap().port();
        drop(dead);
        let p = Proxy::start(port).unwrap();
        let (mut s, mut r) = connect(p.port());
        assert_eq!(ask(&mut s, &mut r, "x"), None);
    }

    #[test]
    fn each_proxy_cuts_only_its_own_connections() {
        let up = echo();
        let (a, b) = (Proxy::start(up).unwrap(), Proxy::start(up).unwrap());
        let (mut sa, mut ra) = connect(a.port());
        let (mut sb, mut rb) = connect(b.port());
        a.cut();
        assert_eq!(ask(&mut sa, &mut ra, "a"), None);
        assert_eq!(ask(&mut sb, &mut rb, "b").as_deref(), Some("b"));
    }
}
