//! The write-guarding handlers against the real PostgreSQL of [`super::postgres`] (issue 37,
//! section 4): what `db_optimistic` and `notifier` do in the simulator (strategies/src), as SQL.
//!
//! - `db_optimistic` (`compare = "version"`): read the target row (at `begin`, or right before
//!   the write with `read_at = "end"`); a message whose seq is older than the stored one is
//!   rejected (acked, not written: a stale rejection); otherwise the write is guarded by the
//!   version read, Hibernate's `UPDATE rows SET state = $2, version = version + 1 WHERE k = $1
//!   AND version = $3`, or, with no row read, an `INSERT .. ON CONFLICT DO NOTHING`. No row
//!   changed: another handler wrote first; the transaction rolls back and the message is
//!   redelivered (a strategy failure).
//! - `notifier`: `begin` reads the key's row from the `source` database (the producer wrote it
//!   before sending the notification); after the service time and `read_latency` (the rest of it
//!   after the real SELECT's own time), the state read is written to the target: a plain upsert,
//!   or with `conditional_write` one guarded by `WHERE rows.state < $2` (no row changed: a stale
//!   rejection).
//!
//! Every write is a transaction whose COMMIT the consumer sends under the recorder's lock (as an
//! ACK is), so a crashed consumer never commits, and a commit is in the history exactly when it
//! happened. A failure of the target (an error on a terminated session, a refused connection
//! during `db_outage`) is an outage: the transaction rolls back, the session is dropped and made
//! again at the next message.

use super::postgres::connect;
use postgres::Client;
use sim::history::FailReason;
use std::time::{Duration, Instant};

/// A db handler's settings, from the scenario's `[strategy.NAME]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbStrategy {
    /// `db_optimistic` with `compare = "version"`.
    Optimistic {
        /// `read_at = "begin"`: the row is read when processing starts.
        read_at_begin: bool,
    },
    /// `notifier` (`source_access = true`).
    Notifier {
        /// `conditional_write`.
        conditional: bool,
        /// `read_latency`: from the source read to the earliest write, beyond the service.
        read_latency: Duration,
    },
}

/// What the handler did with a message, before the commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Written (committed at [`Handler::commit`]): the state seq written.
    Applied(u32),
    /// Deliberately not written: acked (a stale rejection).
    Rejected,
    /// Rolled back: redelivered.
    Failed(FailReason),
}

/// A row as read: (state seq, version).
type Read = Option<(u32, i64)>;

/// One consumer's handler: its sessions on `target` and `source` and what `begin` read.
pub struct Handler {
    strategy: DbStrategy,
    port: u16,
    target: Option<Client>,
    source: Option<Client>,
    read: Option<Read>,
    /// When the source read returned (the notifier's `read_latency` runs from it).
    read_done: Option<Instant>,
    /// A transaction is open on `target`.
    open: bool,
}

const TIMEOUT: Duration = Duration::from_secs(2);

impl Handler {
    /// A handler for the server on `port`; sessions are made when first needed.
    pub fn new(strategy: DbStrategy, port: u16) -> Handler {
        Handler {
            strategy,
            port,
            target: None,
            source: None,
            read: None,
            read_done: None,
            open: false,
        }
    }

    /// The process died: its sessions close (the server rolls back what was open).
    pub fn reset(&mut self) {
        self.target = None;
        self.source = None;
        self.read = None;
        self.open = false;
    }

    fn target(&mut self) -> Result<&mut Client, FailReason> {
        if self.target.is_none() {
            self.target =
                Some(connect(self.port, "target", TIMEOUT).map_err(|_| FailReason::Outage)?);
        }
        Ok(self.target.as_mut().expect("set above"))
    }

    /// Maps an error on the target: a unique violation is a lost insert race (the strategy's
    /// failure); anything else is the database failing (the session is dropped).
    fn fail(&mut self, e: postgres::Error) -> FailReason {
        if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) {
            let _ = self.rollback();
            FailReason::Strategy
        } else {
            self.target = None;
            self.open = false;
            FailReason::Outage
        }
    }

    /// Processing begins: the reads `begin` does in the simulator. `Ok(Some(seq))` for the
    /// notifier: the source read (`seq`: None when the source has no row), to be recorded.
    pub fn begin(&mut self, key: u32) -> Result<Option<Option<u32>>, FailReason> {
        self.read = None;
        match self.strategy {
            DbStrategy::Optimistic { read_at_begin } => {
                if read_at_begin {
                    self.read = Some(self.select(key)?);
                }
                Ok(None)
            }
            DbStrategy::Notifier { .. } => {
                if self.source.is_none() {
                    self.source = Some(
                        connect(self.port, "source", TIMEOUT).map_err(|_| FailReason::Outage)?,
                    );
                }
                let s = self.source.as_mut().expect("set above");
                let r = s.query_opt("SELECT state FROM rows WHERE k = $1", &[&(key as i32)]);
                let seq = match r {
                    Ok(row) => row.map(|r| r.get::<_, i32>(0) as u32),
                    Err(_) => {
                        self.source = None;
                        return Err(FailReason::Outage);
                    }
                };
                self.read = Some(seq.map(|s| (s, 0)));
                self.read_done = Some(Instant::now());
                Ok(Some(seq))
            }
        }
    }

    /// How long to wait after the service before [`Handler::handle`]: what is left of the
    /// notifier's `read_latency` since its source read returned.
    pub fn extra_wait(&self) -> Duration {
        match (self.strategy, self.read_done) {
            (DbStrategy::Notifier { read_latency, .. }, Some(done)) => {
                read_latency.saturating_sub(done.elapsed())
            }
            _ => Duration::ZERO,
        }
    }

    fn select(&mut self, key: u32) -> Result<Read, FailReason> {
        let t = self.target()?;
        match t.query_opt(
            "SELECT state, version FROM rows WHERE k = $1",
            &[&(key as i32)],
        ) {
            Ok(r) => Ok(r.map(|r| (r.get::<_, i32>(0) as u32, r.get::<_, i64>(1)))),
            Err(e) => Err(self.fail(e)),
        }
    }

    fn exec(
        &mut self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<u64, FailReason> {
        let t = self.target()?;
        match t.execute(sql, params) {
            Ok(n) => Ok(n),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Processing is over: opens the transaction (a target down fails it: the outage), fails a
    /// poison message, and makes the strategy's write. `Applied` leaves the transaction open for
    /// [`Handler::commit`]; anything else has rolled it back.
    pub fn handle(&mut self, key: u32, seq: u32, poison: bool) -> Outcome {
        match self.write(key, seq, poison) {
            Ok(Some(s)) => Outcome::Applied(s),
            Ok(None) => {
                let _ = self.rollback();
                Outcome::Rejected
            }
            Err(r) => {
                let _ = self.rollback();
                Outcome::Failed(r)
            }
        }
    }

    fn write(&mut self, key: u32, seq: u32, poison: bool) -> Result<Option<u32>, FailReason> {
        let read = self.read.take();
        self.target()?
            .batch_execute("BEGIN")
            .map_err(|_| FailReason::Outage)
            .inspect_err(|_| self.target = None)?;
        self.open = true;
        if poison {
            return Err(FailReason::Poison);
        }
        let k = key as i32;
        match self.strategy {
            DbStrategy::Optimistic { .. } => {
                let read = match read {
                    Some(r) => r,
                    None => self.select(key)?,
                };
                if read.is_some_and(|(stored, _)| stored > seq) {
                    return Ok(None);
                }
                let n = match read {
                    None => self.exec(
                        "INSERT INTO rows (k, state, version) VALUES ($1, $2, 1) \
                         ON CONFLICT (k) DO NOTHING",
                        &[&k, &(seq as i32)],
                    )?,
                    Some((_, version)) => self.exec(
                        "UPDATE rows SET state = $2, version = version + 1 \
                         WHERE k = $1 AND version = $3",
                        &[&k, &(seq as i32), &version],
                    )?,
                };
                if n == 0 {
                    return Err(FailReason::Strategy);
                }
                Ok(Some(seq))
            }
            DbStrategy::Notifier { conditional, .. } => {
                let Some(Some((state, _))) = read else {
                    return Ok(None);
                };
                let guard = if conditional {
                    " WHERE rows.state < EXCLUDED.state"
                } else {
                    ""
                };
                let n = self.exec(
                    &format!(
                        "INSERT INTO rows (k, state, version) VALUES ($1, $2, 1) \
                         ON CONFLICT (k) DO UPDATE SET state = EXCLUDED.state, \
                         version = rows.version + 1{guard}"
                    ),
                    &[&k, &(state as i32)],
                )?;
                Ok((n > 0).then_some(state))
            }
        }
    }

    /// Commits the open transaction (an outage meanwhile fails it).
    pub fn commit(&mut self) -> Result<(), FailReason> {
        self.open = false;
        self.target()?
            .batch_execute("COMMIT")
            .map_err(|_| FailReason::Outage)
            .inspect_err(|_| self.target = None)
    }

    /// Rolls the open transaction back, if any.
    pub fn rollback(&mut self) -> Result<(), FailReason> {
        if !std::mem::take(&mut self.open) {
            return Ok(());
        }
        match self.target.as_mut().map(|t| t.batch_execute("ROLLBACK")) {
            Some(Err(_)) => {
                self.target = None;
                Err(FailReason::Outage)
            }
            _ => Ok(()),
        }
    }
}

/// The producer's side of the notifier: the source database holds every key's newest state,
/// written before its notification is sent.
pub struct Source(Client);

impl Source {
    /// A session on the source database of the server on `port`.
    pub fn connect(port: u16) -> Result<Source, String> {
        connect(port, "source", Duration::from_secs(5))
            .map(Source)
            .map_err(|e| format!("postgres source: {}", super::postgres::describe(&e)))
    }

    /// Commits `seq` as `key`'s current state.
    pub fn publish(&mut self, key: u32, seq: u32) -> Result<(), String> {
        self.0
            .execute(
                "INSERT INTO rows (k, state) VALUES ($1, $2) \
                 ON CONFLICT (k) DO UPDATE SET state = EXCLUDED.state",
                &[&(key as i32), &(seq as i32)],
            )
            .map(|_| ())
            .map_err(|e| format!("postgres source: {}", super::postgres::describe(&e)))
    }
}

/// Where the database's final rows and the history's last applies disagree (empty: they agree),
/// one line per key: the check that the history judged is what the database holds.
pub fn disagreements(db: &[(u32, u32)], events: &[sim::history::Event]) -> Vec<String> {
    use std::collections::BTreeMap;
    let mut last: BTreeMap<u32, u32> = BTreeMap::new();
    for e in events {
        if let sim::history::Event::Apply { msg, state_seq, .. } = e {
            last.insert(msg.key, *state_seq);
        }
    }
    let stored: BTreeMap<u32, u32> = db.iter().copied().collect();
    let keys: std::collections::BTreeSet<u32> = last.keys().chain(stored.keys()).copied().collect();
    keys.into_iter()
        .filter(|k| last.get(k) != stored.get(k))
        .map(|k| {
            format!(
                "key {k}: the database holds {:?}, the history's last apply wrote {:?}",
                stored.get(&k),
                last.get(&k)
            )
        })
        .collect()
}

/// The db handler `name` stages for `sc` (None: `name` is not a db strategy), or what in its
/// `[strategy.NAME]` table cannot be staged, each naming its field.
pub fn strategy_of(name: &str, sc: &sim::Scenario) -> Result<Option<DbStrategy>, Vec<String>> {
    let empty = Default::default();
    let t = sc.strategy.get(name).unwrap_or(&empty);
    let mut refused = Vec::new();
    let s = match name {
        "db_optimistic" => {
            // No JMS timestamp travels with a live message: the producer-assigned version only.
            if t.get("compare").and_then(|v| v.as_str()) != Some("version") {
                refused.push(
                    "[strategy.db_optimistic] compare = \"timestamp\" (the default; live: \
                     compare = \"version\" only)"
                        .to_string(),
                );
            }
            let read_at = t.get("read_at").and_then(|v| v.as_str()).unwrap_or("begin");
            DbStrategy::Optimistic {
                read_at_begin: read_at == "begin",
            }
        }
        "notifier" => {
            if t.get("source_access").and_then(|v| v.as_bool()) == Some(false) {
                refused.push("[strategy.notifier] source_access = false (not applicable)".into());
            }
            let read_latency = match t.get("read_latency").and_then(|v| v.as_str()) {
                Some(d) => sim::time::Dur::parse(d)
                    .map(|d| d.micros())
                    .unwrap_or(2_000),
                None => 2_000,
            };
            DbStrategy::Notifier {
                conditional: t.get("conditional_write").and_then(|v| v.as_bool()) == Some(true),
                read_latency: Duration::from_micros(read_latency),
            }
        }
        _ => return Ok(None),
    };
    if refused.is_empty() {
        Ok(Some(s))
    } else {
        Err(refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::history::{Event, MsgRef};

    use super::super::tests::refused;

    /// The live module's base scenario with both db handlers, their parameters and a db_outage.
    fn base() -> String {
        super::super::tests::BASE.replace(
            "strategies = [\"competing\"]",
            "strategies = [\"db_optimistic\", \"notifier\"]",
        ) + "[strategy.db_optimistic]\ncompare = \"version\"\nread_at = \"end\"\n\
             [strategy.notifier]\nread_latency = \"5ms\"\nconditional_write = true\n\
             [[fault]]\nkind = \"db_outage\"\nat = \"1s\"\nfor = \"1s\"\n"
    }

    #[test]
    fn the_db_handlers_and_db_outage_are_staged_with_their_parameters() {
        assert_eq!(
            refused(&base(), &["db_optimistic", "notifier"]),
            Vec::<String>::new()
        );
        let sc = crate::load_text("t", &base()).unwrap();
        assert_eq!(
            strategy_of("db_optimistic", &sc),
            Ok(Some(DbStrategy::Optimistic {
                read_at_begin: false
            }))
        );
        assert_eq!(
            strategy_of("notifier", &sc),
            Ok(Some(DbStrategy::Notifier {
                conditional: true,
                read_latency: Duration::from_millis(5)
            }))
        );
        assert_eq!(strategy_of("competing", &sc), Ok(None));
        // A db_outage rolls messages back: the redelivery policy is staged (the activemq
        // flavour's default, the JMS client's blocking redelivery), not a bare NACK.
        assert!(matches!(
            super::super::live_redelivery(&sc),
            Ok(super::super::run::LiveRedelivery::Client { .. })
        ));
        let p = super::super::plan(
            &sc,
            super::super::run::LiveStrategy::DbOptimistic,
            1,
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(
            p.faults,
            vec![
                (Duration::from_secs(1), super::super::run::Action::DbDown),
                (Duration::from_secs(2), super::super::run::Action::DbUp)
            ]
        );
        assert!(p.db.is_some());
    }

    #[test]
    fn what_the_db_handlers_cannot_stage_is_named() {
        // The default compare is the JMS timestamp, which no live message carries.
        let t = base().replace("compare = \"version\"\n", "");
        let r = refused(&t, &["db_optimistic"]);
        assert!(
            r.len() == 1 && r[0].contains("compare = \"timestamp\""),
            "{r:?}"
        );
        let t = base().replace("conditional_write = true", "source_access = false");
        let r = refused(&t, &["notifier"]);
        assert!(r.len() == 1 && r[0].contains("source_access"), "{r:?}");
        // A db_outage needs every strategy to write the database.
        let r = refused(&base(), &["db_optimistic", "competing"]);
        assert!(r.len() == 1 && r[0].contains("db_outage"), "{r:?}");
    }

    #[test]
    fn the_database_is_checked_against_the_history() {
        let apply = |key, seq, state_seq| Event::Apply {
            t: 0,
            msg: MsgRef { id: 0, key, seq },
            consumer: 0,
            state_seq,
        };
        let events = vec![apply(0, 0, 0), apply(0, 1, 3), apply(1, 0, 0)];
        assert!(disagreements(&[(0, 3), (1, 0)], &events).is_empty());
        let off = disagreements(&[(0, 2), (2, 1)], &events);
        assert_eq!(off.len(), 3, "{off:?}");
        assert!(
            off[0].starts_with("key 0: the database holds Some(2)"),
            "{off:?}"
        );
    }
}
