//! `sim live FILE --consumer CMD --writes 'TABLE(KEY,SEQ)'` (issue 40): the harness learns what
//! the user's consumer applied from the database table it writes, so a consumer can be tested
//! unchanged (no stdout protocol). A trigger the harness installs on TABLE logs every row an
//! INSERT or UPDATE leaves (its KEY and SEQ columns, and the writer's `application_name`, which
//! names the copy) into `ordsim_writes`, in the writer's transaction: a rolled-back or killed
//! transaction leaves no entry. The run takes the committed entries (`DELETE .. RETURNING`, so
//! each once) with their commit instants (`track_commit_timestamp`) and records each as an apply
//! of message (KEY, SEQ) by that copy, at its commit. docs/live.md, "Your own consumer".

use sim::time::Time;

/// Where the consumer's writes are: a table and its key and sequence columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteLog {
    /// The table (`name` or `schema.name`), as PostgreSQL folds an unquoted name.
    pub table: String,
    /// The column holding the message's key (`1` or `k1`).
    pub key: String,
    /// The column holding the message's sequence number in its key (the state it wrote).
    pub seq: String,
}

/// Prefix of the `application_name` of copy `c`'s sessions: `ordsim-consumer-C`.
pub const APP_PREFIX: &str = "ordsim-consumer-";

fn identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl WriteLog {
    /// Parses `TABLE(KEY,SEQ)`: unquoted SQL identifiers (`[A-Za-z_][A-Za-z0-9_]*`, the table
    /// optionally `schema.table`), folded to lower case as PostgreSQL folds them.
    pub fn parse(spec: &str) -> Result<WriteLog, String> {
        let bad = |why: &str| {
            format!(
                "--writes {spec:?}: {why}; expected TABLE(KEY_COLUMN,SEQ_COLUMN), e.g. \
                 rows(k,state)"
            )
        };
        let s = spec.trim();
        let (table, rest) = s.split_once('(').ok_or_else(|| bad("no \"(\""))?;
        let cols = rest
            .strip_suffix(')')
            .ok_or_else(|| bad("no closing \")\""))?;
        let (key, seq) = cols
            .split_once(',')
            .ok_or_else(|| bad("two columns, separated by a comma"))?;
        let (table, key, seq) = (table.trim(), key.trim(), seq.trim());
        let table_ok = match table.split_once('.') {
            Some((schema, name)) => identifier(schema) && identifier(name),
            None => identifier(table),
        };
        if !table_ok {
            return Err(bad(&format!("{table:?} is not a table name")));
        }
        for c in [key, seq] {
            if !identifier(c) {
                return Err(bad(&format!("{c:?} is not a column name")));
            }
        }
        Ok(WriteLog {
            table: table.to_ascii_lowercase(),
            key: key.to_ascii_lowercase(),
            seq: seq.to_ascii_lowercase(),
        })
    }

    /// The SQL that installs the log on the `target` database: a query that fails, naming what
    /// is missing, unless TABLE has both columns; the log table; the trigger.
    pub fn install_sql(&self) -> String {
        let WriteLog { table, key, seq } = self;
        format!(
            "SELECT {key}, {seq} FROM {table} LIMIT 0;
             CREATE TABLE ordsim_writes (id bigserial PRIMARY KEY, k text, seq text, app text);
             CREATE FUNCTION ordsim_log() RETURNS trigger LANGUAGE plpgsql AS $f$
             BEGIN
               INSERT INTO ordsim_writes (k, seq, app) VALUES (
                 to_jsonb(NEW) ->> TG_ARGV[0], to_jsonb(NEW) ->> TG_ARGV[1],
                 current_setting('application_name'));
               RETURN NULL;
             END $f$;
             CREATE TRIGGER ordsim_log AFTER INSERT OR UPDATE ON {table}
               FOR EACH ROW EXECUTE FUNCTION ordsim_log('{key}', '{seq}');"
        )
    }

    /// The rows of TABLE at the end: (key, seq) as text.
    pub fn final_sql(&self) -> String {
        format!(
            "SELECT {}::text, {}::text FROM {}",
            self.key, self.seq, self.table
        )
    }
}

/// Takes the committed log entries, each once: key, seq, application name, commit instant in
/// microseconds since the Unix epoch.
pub const TAKE_SQL: &str = "DELETE FROM ordsim_writes RETURNING id, k, seq, app, \
     (extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000000)::bigint";

/// One committed write, as the log holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// The log's entry number (insertion order: a tie-break between writes of one commit).
    pub id: i64,
    /// The key column's text.
    pub key: Option<String>,
    /// The seq column's text.
    pub seq: Option<String>,
    /// The writer's `application_name`.
    pub app: Option<String>,
    /// The commit, microseconds since the Unix epoch.
    pub commit_us: i64,
}

/// What a logged write means for the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The message's key.
    pub key: u32,
    /// Its sequence number.
    pub seq: u32,
    /// The copy that wrote it (`None`: a session not named by the harness).
    pub consumer: Option<u32>,
    /// When it was committed, in the recorder's time.
    pub t: Time,
}

/// Reads a key as the stdout protocol does: `1` or `k1`.
fn number(s: &str, prefix: bool) -> Option<u32> {
    let s = s.trim();
    let s = if prefix {
        s.strip_prefix('k').unwrap_or(s)
    } else {
        s
    };
    s.parse().ok()
}

impl Write {
    /// The apply this write records, with `origin_us` (Unix microseconds of the recorder's time
    /// 0); or why it names no message.
    pub fn applied(&self, log: &WriteLog, origin_us: i64) -> Result<Applied, String> {
        let key = self.key.as_deref().and_then(|k| number(k, true));
        let seq = self.seq.as_deref().and_then(|s| number(s, false));
        let (Some(key), Some(seq)) = (key, seq) else {
            return Err(format!(
                "a write to {} with {} = {:?} and {} = {:?}: the key must read as 1 or k1, the \
                 seq as a number",
                log.table, log.key, self.key, log.seq, self.seq
            ));
        };
        let consumer = self
            .app
            .as_deref()
            .and_then(|a| a.strip_prefix(APP_PREFIX))
            .and_then(|c| c.parse().ok());
        Ok(Applied {
            key,
            seq,
            consumer,
            t: (self.commit_us - origin_us).max(0) as Time,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_names_a_table_and_two_columns() {
        let w = WriteLog::parse(" Orders ( Id , Version ) ").expect("parses");
        assert_eq!(
            w,
            WriteLog {
                table: "orders".into(),
                key: "id".into(),
                seq: "version".into()
            }
        );
        assert_eq!(
            WriteLog::parse("app.rows(k,state)").expect("schema").table,
            "app.rows"
        );
        for bad in [
            "rows",
            "rows(k)",
            "rows(k,state",
            "rows(k;drop,state)",
            "1rows(k,state)",
            "rows(k,)",
            "(k,state)",
        ] {
            let e = WriteLog::parse(bad).expect_err(bad);
            assert!(e.contains("expected TABLE(KEY_COLUMN,SEQ_COLUMN)"), "{e}");
        }
    }

    #[test]
    fn the_install_names_the_columns_it_logs() {
        let sql = WriteLog::parse("rows(k,state)").unwrap().install_sql();
        assert!(
            sql.starts_with("SELECT k, state FROM rows LIMIT 0;"),
            "{sql}"
        );
        assert!(sql.contains("AFTER INSERT OR UPDATE ON rows"), "{sql}");
        assert!(sql.contains("ordsim_log('k', 'state')"), "{sql}");
    }

    #[test]
    fn a_write_is_an_apply_of_its_key_and_seq_by_its_copy() {
        let log = WriteLog::parse("rows(k,state)").unwrap();
        let w = |k: &str, s: &str, app: &str| Write {
            id: 1,
            key: Some(k.into()),
            seq: Some(s.into()),
            app: Some(app.into()),
            commit_us: 1_000_250,
        };
        assert_eq!(
            w("k3", "17", "ordsim-consumer-2").applied(&log, 1_000_000),
            Ok(Applied {
                key: 3,
                seq: 17,
                consumer: Some(2),
                t: 250
            })
        );
        let a = w("3", "17", "psql").applied(&log, 1_000_000).unwrap();
        assert_eq!((a.key, a.consumer), (3, None));
        let e = w("k3", "x", "ordsim-consumer-0")
            .applied(&log, 0)
            .expect_err("not a seq");
        assert!(e.contains("state = Some(\"x\")"), "{e}");
        assert!(w("k3", "-1", "").applied(&log, 0).is_err());
    }
}
