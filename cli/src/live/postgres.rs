//! A private PostgreSQL server per live run (issue 37, section 4): `initdb` into a temporary
//! directory, `postgres` on a free port of 127.0.0.1 (its unix socket in that directory, nothing
//! else listening), two databases (`target`, written by the handlers; `source`, read by the
//! notifier), `db_outage` staged by refusing connections to `target`, the final rows read back,
//! and the server stopped by PID on every exit path (drop, errors, and the Ctrl-C handler, which
//! SIGKILLs every registered child; a postmaster's backends exit when it dies).
//!
//! PostgreSQL refuses to run as root: run as root, `initdb` and `postgres` run as the `postgres`
//! user (setuid in the child, so the PID we hold is the postmaster's own).

use super::broker::{free_port, register, unregister, TempDir};
use super::writelog::{Write, WriteLog, TAKE_SQL};
use postgres::{Client, NoTls};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The role `initdb` creates (trust authentication, loopback only).
const USER: &str = "ordsim";

/// Where PostgreSQL's server programs are: `ORDSIM_PG_BIN`, else the newest
/// `/usr/lib/postgresql/N/bin` (Debian's `postgresql`), else `PATH`.
pub fn bin_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("ORDSIM_PG_BIN") {
        return Some(PathBuf::from(d));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, b)) = versions.pop() {
        return Some(b);
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .find(|d| d.join("initdb").is_file() && d.join("postgres").is_file())
    })
}

/// Why PostgreSQL cannot be started here, if it cannot.
pub fn missing() -> Option<String> {
    let Some(bin) = bin_dir() else {
        return Some(
            "initdb and postgres not found: apt-get install postgresql (.ci/live-postgres.sh does), \
             or set ORDSIM_PG_BIN"
                .into(),
        );
    };
    for p in ["initdb", "postgres"] {
        if !bin.join(p).is_file() {
            return Some(format!("{} not found", bin.join(p).display()));
        }
    }
    if is_root() && account("postgres").is_none() {
        return Some("run as root, and no `postgres` user to run the server as".into());
    }
    None
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The uid and gid of `name`.
fn account(name: &str) -> Option<(u32, u32)> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: getpwnam(3) with a valid C string; the fields are copied out at once (no other
    // thread of this process calls getpw*).
    unsafe {
        let pw = libc::getpwnam(c.as_ptr());
        if pw.is_null() {
            None
        } else {
            Some(((*pw).pw_uid, (*pw).pw_gid))
        }
    }
}

/// A row's (key, seq) as text (`--writes`).
pub type TextRow = (Option<String>, Option<String>);

/// One PostgreSQL server process and its data directory.
pub struct Server {
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    dir: TempDir,
    child: Option<Child>,
    /// A superuser session on the `postgres` database: the fault driver's.
    admin: Option<Client>,
}

/// A command for one of PostgreSQL's programs, as the `postgres` user when run as root.
fn program(bin: &Path, name: &str) -> Result<Command, String> {
    let mut cmd = Command::new(bin.join(name));
    if is_root() {
        let (uid, gid) = account("postgres").ok_or("no `postgres` user")?;
        cmd.uid(uid).gid(gid);
    }
    cmd.env("LC_ALL", "C").stdin(Stdio::null());
    Ok(cmd)
}

impl Server {
    /// Creates a data directory, starts the server and waits until it accepts connections (at
    /// most `timeout`), creates the `target` and `source` databases with their `rows` tables.
    pub fn start(timeout: Duration) -> Result<Server, String> {
        Server::start_with(timeout, None)
    }

    /// [`Server::start`], with `schema` (SQL, `--schema`) run on `target` instead of creating its
    /// `rows` table.
    pub fn start_with(timeout: Duration, schema: Option<&str>) -> Result<Server, String> {
        let bin = bin_dir().ok_or("PostgreSQL not found")?;
        let dir = TempDir::new("pg").map_err(|e| format!("temporary directory: {e}"))?;
        if is_root() {
            let (uid, gid) = account("postgres").ok_or("no `postgres` user")?;
            let c = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes())
                .map_err(|e| e.to_string())?;
            // SAFETY: chown(2) on a path this process just created.
            if unsafe { libc::chown(c.as_ptr(), uid, gid) } != 0 {
                return Err(format!(
                    "chown {}: {}",
                    dir.path().display(),
                    std::io::Error::last_os_error()
                ));
            }
        }
        let data = dir.path().join("data");
        let log = dir.path().join("initdb.log");
        let out = program(&bin, "initdb")?
            .arg("-D")
            .arg(&data)
            .args(["-U", USER, "-A", "trust", "-E", "UTF8", "--locale=C"])
            .args(["--no-sync", "--no-instructions"])
            .output()
            .map_err(|e| format!("cannot run initdb: {e}"))?;
        if !out.status.success() {
            let _ = std::fs::write(&log, [out.stdout, out.stderr].concat());
            return Err(format!(
                "initdb failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default())
            ));
        }
        let port = free_port().map_err(|e| format!("no free port: {e}"))?;
        let mut server = Server {
            port,
            dir,
            child: None,
            admin: None,
        };
        server.spawn(&bin, timeout)?;
        server.setup(schema)?;
        Ok(server)
    }

    fn spawn(&mut self, bin: &Path, timeout: Duration) -> Result<(), String> {
        let logf = self.dir.path().join("postgres.log");
        let out = std::fs::File::create(&logf).map_err(|e| format!("{}: {e}", logf.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = program(bin, "postgres")?
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.dir.path().display()
            ))
            // No fault here crashes the database, so a commit need not wait for its WAL flush:
            // commits stay atomic and visible at once, and a loaded disk does not pace the
            // handlers (docs/live.md, "PostgreSQL").
            .args(["-c", "synchronous_commit=off"])
            // `--writes`: each logged write is timed at its transaction's commit.
            .args(["-c", "track_commit_timestamp=on"])
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start postgres: {e}"))?;
        register(child.id());
        self.child = Some(child);
        let t0 = Instant::now();
        loop {
            if crate::interrupt::interrupted() {
                self.stop();
                return Err("interrupted".into());
            }
            if let Some(c) = &mut self.child {
                if let Ok(Some(status)) = c.try_wait() {
                    unregister(c.id());
                    self.child = None;
                    return Err(format!(
                        "postgres exited ({status}) while starting: {}",
                        std::fs::read_to_string(&logf).unwrap_or_default()
                    ));
                }
            }
            if let Ok(c) = self.connect("postgres", Duration::from_millis(500)) {
                self.admin = Some(c);
                return Ok(());
            }
            if t0.elapsed() > timeout {
                self.stop();
                return Err(format!(
                    "postgres did not accept connections within {timeout:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn setup(&mut self, schema: Option<&str>) -> Result<(), String> {
        let admin = self.admin.as_mut().ok_or("not started")?;
        // One statement each: CREATE DATABASE cannot run in the implicit transaction of a
        // multi-statement query.
        for db in ["target", "source"] {
            admin
                .batch_execute(&format!("CREATE DATABASE {db}"))
                .map_err(|e| format!("postgres: {}", describe(&e)))?;
        }
        for (db, table) in [
            (
                "target",
                "CREATE TABLE rows (k integer PRIMARY KEY, state integer NOT NULL, \
                 version bigint NOT NULL)",
            ),
            (
                "source",
                "CREATE TABLE rows (k integer PRIMARY KEY, state integer NOT NULL)",
            ),
        ] {
            let (sql, what) = match schema.filter(|_| db == "target") {
                Some(s) => (s, "--schema"),
                None => (table, "postgres"),
            };
            self.connect(db, Duration::from_secs(5))
                .and_then(|mut c| c.batch_execute(sql))
                .map_err(|e| format!("{what} ({db} database): {}", describe(&e)))?;
        }
        Ok(())
    }

    /// `--writes`: installs the write log on `target` ([`WriteLog::install_sql`]).
    pub fn install_write_log(&self, log: &WriteLog) -> Result<(), String> {
        self.connect("target", Duration::from_secs(5))
            .and_then(|mut c| c.batch_execute(&log.install_sql()))
            .map_err(|e| {
                format!(
                    "--writes {}({},{}): {}",
                    log.table,
                    log.key,
                    log.seq,
                    describe(&e)
                )
            })
    }

    /// `--writes`: the rows of the consumer's table at the end, (key, seq) as text.
    pub fn written_rows(&self, log: &WriteLog) -> Result<Vec<TextRow>, String> {
        let mut c = self
            .connect("target", Duration::from_secs(5))
            .map_err(|e| format!("postgres: {}", describe(&e)))?;
        let rows = c
            .query(log.final_sql().as_str(), &[])
            .map_err(|e| format!("postgres: {}", describe(&e)))?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// A new session on database `db` over TCP on 127.0.0.1.
    pub fn connect(&self, db: &str, timeout: Duration) -> Result<Client, postgres::Error> {
        connect(self.port, db, timeout)
    }

    /// Its PID while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `db_outage` starts: `target` refuses new connections (`ALLOW_CONNECTIONS false`, checked
    /// by the server at each connection's start) and every session on it is terminated (an open
    /// transaction rolls back). Returns when both are done: the instant the outage is complete.
    pub fn refuse(&mut self) -> Result<Instant, String> {
        self.admin_sql(
            "ALTER DATABASE target ALLOW_CONNECTIONS false; \
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = 'target' AND pid <> pg_backend_pid();",
        )
    }

    /// `db_outage` ends: `target` accepts connections again.
    pub fn admit(&mut self) -> Result<Instant, String> {
        self.admin_sql("ALTER DATABASE target ALLOW_CONNECTIONS true;")
    }

    fn admin_sql(&mut self, sql: &str) -> Result<Instant, String> {
        let admin = self.admin.as_mut().ok_or("not started")?;
        admin
            .batch_execute(sql)
            .map_err(|e| format!("postgres (fault driver): {}", describe(&e)))?;
        Ok(Instant::now())
    }

    /// The target's rows at the end: (key, state seq), by key.
    pub fn target_rows(&mut self) -> Result<Vec<(u32, u32)>, String> {
        let mut c = self
            .connect("target", Duration::from_secs(5))
            .map_err(|e| format!("postgres: {}", describe(&e)))?;
        let rows = c
            .query("SELECT k, state FROM rows ORDER BY k", &[])
            .map_err(|e| format!("postgres: {}", describe(&e)))?;
        Ok(rows
            .iter()
            .map(|r| (r.get::<_, i32>(0) as u32, r.get::<_, i32>(1) as u32))
            .collect())
    }

    /// Stops the server: a fast shutdown (SIGINT), SIGKILL if it has not exited within 5 s;
    /// reaped either way.
    pub fn stop(&mut self) {
        self.admin = None;
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) with the PID of a child not yet reaped.
            unsafe {
                libc::kill(c.id() as libc::pid_t, libc::SIGINT);
            }
            let t0 = Instant::now();
            while matches!(c.try_wait(), Ok(None)) && t0.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
            unregister(c.id());
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `--writes`: takes the committed entries of the write log, each once, by commit then entry.
pub fn take_writes(c: &mut Client) -> Result<Vec<Write>, postgres::Error> {
    let mut w: Vec<Write> = c
        .query(TAKE_SQL, &[])?
        .iter()
        .map(|r| Write {
            id: r.get(0),
            key: r.get(1),
            seq: r.get(2),
            app: r.get(3),
            commit_us: r.get::<_, Option<i64>>(4).unwrap_or(0),
        })
        .collect();
    w.sort_by_key(|w| (w.commit_us, w.id));
    Ok(w)
}

/// A session on database `db` of the server on 127.0.0.1:`port`.
pub fn connect(port: u16, db: &str, timeout: Duration) -> Result<Client, postgres::Error> {
    postgres::Config::new()
        .host("127.0.0.1")
        .port(port)
        .user(USER)
        .dbname(db)
        .connect_timeout(timeout)
        .connect(NoTls)
}

/// An error with the server's own message when it sent one (the client's display of a server
/// error is only "db error").
pub fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{} ({})", d.message(), d.code().code()),
        None => e.to_string(),
    }
}
