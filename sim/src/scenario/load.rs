//! Reading a scenario file: TOML syntax and types (serde), then meaning ([`super::validate`]), with
//! every error pointing at the file, line, column and field.

use super::Scenario;
use std::fmt;
use std::ops::Range;
use std::path::Path;

/// Largest scenario file accepted; anything bigger is surely not a hand-written scenario.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Problems of meaning listed for one file, at most; the rest are counted ("... and N more"), so
/// a file with a hundred thousand bad entries is answered as fast as one with a hundred.
pub const MAX_PROBLEMS_SHOWN: usize = 100;

/// One step of a path into the document: a table key or an array index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathSeg {
    /// A key.
    Key(String),
    /// An index in an array (or array of tables).
    Index(usize),
}

impl From<&str> for PathSeg {
    fn from(s: &str) -> Self {
        PathSeg::Key(s.to_string())
    }
}

impl From<usize> for PathSeg {
    fn from(i: usize) -> Self {
        PathSeg::Index(i)
    }
}

/// A problem with one field, found after parsing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Where, e.g. `fault[2].broker` as `[Key("fault"), Index(2), Key("broker")]`.
    pub path: Vec<PathSeg>,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl FieldError {
    /// A new error at `path`.
    pub fn new(path: Vec<PathSeg>, message: impl Into<String>) -> Self {
        FieldError {
            path,
            message: message.into(),
        }
    }

    /// The path as written by a user: `fault[2].broker`.
    pub fn path_string(&self) -> String {
        path_string(&self.path)
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "field `{}`: {}", self.path_string(), self.message)
    }
}

fn path_string(path: &[PathSeg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            PathSeg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            PathSeg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// Line and column (1-based) in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub column: usize,
}

/// Why a scenario could not be loaded. `Display` gives one line per problem, each naming the file
/// and, where known, the line, column and field.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{}: cannot read: {}", escape(file), escape(reason))]
    Io {
        /// The file.
        file: String,
        /// Why.
        reason: String,
    },
    /// Not TOML, wrong types, unknown fields, bad durations.
    #[error("{}", fmt_one(file, *location, field.as_deref(), message))]
    Syntax {
        /// The file.
        file: String,
        /// Where.
        location: Option<Location>,
        /// The field, when known.
        field: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// Well-formed but meaningless or contradictory values.
    #[error("{}", fmt_many(file, problems, *more))]
    Invalid {
        /// The file.
        file: String,
        /// The problems found, with their location, in the order found; at most
        /// [`MAX_PROBLEMS_SHOWN`].
        problems: Vec<(Option<Location>, FieldError)>,
        /// How many more were found and not listed.
        more: usize,
    },
}

/// `s` with every control or bidirectional character ([`crate::is_unsafe_char`]) but a line feed
/// written as a Rust escape (`\u{1b}`): what a file holds reaches a terminal through these
/// messages (serde's "unknown variant" and "unknown field" quote the input raw), so every problem
/// line is escaped here, in the one place that formats them.
fn escape(s: &str) -> String {
    crate::escape_unsafe(s, |c| c == '\n').into_owned()
}

/// `s` with every number of more than 24 digits written in scientific notation: Rust (and
/// serde) print an `f64` in full, so `1e308` in a file came back as a 309-digit "got 1000...0",
/// and `-1e-300` as 300 zeros. Shorter numbers (every integer type's, a seed) are left as they
/// are, and so are digits inside a name (`c1234...`).
fn shorten_numbers(s: &str) -> String {
    const LONG: usize = 24;
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        let starts = b[i].is_ascii_digit()
            && (i == 0
                || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'.'));
        if !starts {
            let c = s[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8().max(1);
            continue;
        }
        let mut j = i;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j + 1 < b.len() && b[j] == b'.' && b[j + 1].is_ascii_digit() {
            j += 1;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
        }
        let run = &s[i..j];
        let digits = run.bytes().filter(u8::is_ascii_digit).count();
        match run.parse::<f64>() {
            Ok(x) if digits > LONG && x.is_finite() => out.push_str(&format!("{x:e}")),
            _ => out.push_str(run),
        }
        i = j;
    }
    out
}

fn fmt_one(file: &str, loc: Option<Location>, field: Option<&str>, message: &str) -> String {
    let (file, field, message) = (
        escape(file),
        field.map(escape),
        shorten_numbers(&escape(message)),
    );
    let (field, message) = (field.as_deref(), message.as_str());
    let mut s = file;
    if let Some(l) = loc {
        s.push_str(&format!(":{}:{}", l.line, l.column));
    }
    s.push_str(": ");
    if let Some(f) = field.filter(|f| !f.is_empty()) {
        s.push_str(&format!("field `{f}`: "));
    }
    s.push_str(message);
    s
}

fn fmt_many(file: &str, problems: &[(Option<Location>, FieldError)], more: usize) -> String {
    let mut lines: Vec<String> = problems
        .iter()
        .map(|(loc, e)| fmt_one(file, *loc, Some(&e.path_string()), &e.message))
        .collect();
    if more > 0 {
        lines.push(format!(
            "{}: ... and {more} more problem{} (the first {MAX_PROBLEMS_SHOWN} are listed)",
            escape(file),
            if more == 1 { "" } else { "s" }
        ));
    }
    lines.join("\n")
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Why [`read_bounded`] refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A FIFO, device, socket or directory: reading it could block forever or never end.
    #[error("is {0}, not a regular file (give a file, or `-` for standard input)")]
    NotRegular(&'static str),
    /// More bytes than the limit (counted as read, not as the file system reports them).
    #[error("is larger than the {0}-byte limit")]
    TooLarge(u64),
    /// The operating system's error.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// What kind of non-regular file `t` is, for an error message.
fn file_kind(t: &std::fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        return None;
    }
    if t.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if t.is_char_device() {
            return Some("a character device");
        }
        if t.is_block_device() {
            return Some("a block device");
        }
        if t.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

/// Reads a regular file (a symlink is followed to what it names) or, for `-`, standard input, and
/// never more than `limit` bytes: the bound counts the bytes actually read, so a file whose
/// reported size lies (`/proc`, a growing file) is cut off too. A FIFO, device, socket or
/// directory is refused before it is opened (opening a FIFO blocks until a writer comes).
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    if path.as_os_str() == "-" {
        std::io::stdin()
            .lock()
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)?;
    } else {
        let meta = std::fs::metadata(path)?;
        if let Some(kind) = file_kind(&meta.file_type()) {
            return Err(ReadError::NotRegular(kind));
        }
        if meta.len() > limit {
            return Err(ReadError::TooLarge(limit));
        }
        let f = std::fs::File::open(path)?;
        // The path may have been replaced between the two looks: check what was opened.
        if let Some(kind) = file_kind(&f.metadata()?.file_type()) {
            return Err(ReadError::NotRegular(kind));
        }
        f.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    }
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge(limit));
    }
    Ok(bytes)
}

/// The name a scenario path goes by in messages: `-` is standard input.
pub fn display_path(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "<stdin>".into()
    } else {
        path.display().to_string()
    }
}

/// Reads a scenario file's text (at most [`MAX_FILE_BYTES`], UTF-8), without loading it.
pub fn read_scenario_text(path: &Path) -> Result<String, ScenarioError> {
    let file = display_path(path);
    let bytes = read_bounded(path, MAX_FILE_BYTES).map_err(|e| ScenarioError::Io {
        file: file.clone(),
        reason: match e {
            ReadError::TooLarge(l) => {
                format!("larger than the {l}-byte limit for scenario files")
            }
            e => e.to_string(),
        },
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let upto = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = upto.iter().filter(|&&b| b == b'\n').count() + 1;
        ScenarioError::Syntax {
            file,
            location: Some(Location { line, column: 1 }),
            field: None,
            message: "the file is not valid UTF-8 text".into(),
        }
    })
}

/// Reads and loads a scenario file (`-`: standard input). `extra` adds checks the engine cannot
/// know (strategy names and their parameter tables).
pub fn load_file(
    path: &Path,
    extra: &dyn Fn(&Scenario) -> Vec<FieldError>,
) -> Result<Scenario, ScenarioError> {
    let text = read_scenario_text(path)?;
    load_str(&display_path(path), &text, extra)
}

/// Loads a scenario from text; `file` names it in errors.
pub fn load_str(
    file: &str,
    text: &str,
    extra: &dyn Fn(&Scenario) -> Vec<FieldError>,
) -> Result<Scenario, ScenarioError> {
    if text.trim().is_empty() {
        return Err(ScenarioError::Syntax {
            file: file.into(),
            location: None,
            field: None,
            message: "the file is empty; a scenario needs at least `strategies`, [workload], [[broker]] and [consumers]".into(),
        });
    }
    if let Some(at) = bare_cr(text) {
        return Err(ScenarioError::Syntax {
            file: file.into(),
            location: Some(location_of(text, at)),
            field: None,
            message: "a carriage return without a line feed (old Mac line endings?): TOML lines \
                      end in LF or CRLF; convert the file, e.g. with `tr '\\r' '\\n'`"
                .into(),
        });
    }
    let scenario: Scenario = match toml::from_str(text) {
        Ok(s) => s,
        Err(e) => return Err(in_rounds(file, text, e, extra)),
    };
    match meaning(text, &scenario, extra, &[]) {
        (problems, _) if problems.is_empty() => Ok(scenario),
        (problems, more) => Err(ScenarioError::Invalid {
            file: file.into(),
            problems,
            more,
        }),
    }
}

/// The problems of meaning of a scenario read from `text` (validation and `extra`), located in
/// `text`, at most [`MAX_PROBLEMS_SHOWN`], and how many more; those at or under a field in
/// `skip` are left out (the consequences of a problem already reported there).
fn meaning(
    text: &str,
    scenario: &Scenario,
    extra: &dyn Fn(&Scenario) -> Vec<FieldError>,
    skip: &[String],
) -> (Vec<(Option<Location>, FieldError)>, usize) {
    let mut problems = super::validate(scenario);
    problems.extend(extra(scenario));
    problems.retain(|p| {
        let path = p.path_string();
        let table = path.rsplit_once('.').map_or("", |(t, _)| t);
        !skip.iter().any(|s| {
            // A field of the same table whose check names the one reported (a bad `at` read as
            // none: "give either `at` or `rate`") is its consequence too.
            let (s_table, s_key) = s.rsplit_once('.').unwrap_or(("", s));
            path == *s
                || path.starts_with(&format!("{s}."))
                || path.starts_with(&format!("{s}["))
                || (table == s_table && p.message.contains(&format!("`{s_key}`")))
        })
    });
    // Causes before their consequences: a misspelt strategy or broker name also breaks every
    // reference to it ([expect.NAME], [sweep] strategies, consumers.brokers), so the problems with
    // the names themselves come first (a stable sort keeps the rest in file order).
    problems.sort_by_key(|p| !is_name_definition(&p.path));
    let doc = toml_edit::ImDocument::parse(text).ok();
    let more = problems.len().saturating_sub(MAX_PROBLEMS_SHOWN);
    let lines = LineIndex::new(text);
    let problems = problems
        .into_iter()
        .take(MAX_PROBLEMS_SHOWN)
        .map(|mut p| {
            // A `[strategy.NAME]` parameter is read after the file (serde's words, without the
            // reader's suggestion): `partitons` gets "did you mean `partitions`?" as a field of
            // the file does.
            if !p.message.contains("did you mean") {
                p.message = with_suggestion(&p.message);
            }
            let loc = doc
                .as_ref()
                .and_then(|d| span_of(Node::Item(d.as_item()), &p.path))
                .map(|s| lines.location(text, s.start));
            (loc, p)
        })
        .collect();
    (problems, more)
}

/// serde stops at a file's first problem of syntax or type; so that one bad field name does not
/// hide the problems after it, the entry at fault is blanked out (its bytes become spaces, so
/// every offset, line and column stays where it was) and the file is read again, round after
/// round. Once the rest reads, its problems of meaning follow (unless a `[[...]]` entry had to
/// be left out, which renumbers the entries after it). A field reported missing because an
/// earlier round blanked it is a consequence, not reported; the rounds end at a problem that
/// blanking cannot step over (a document that is not TOML, a required table missing).
fn in_rounds(
    file: &str,
    text: &str,
    first: toml::de::Error,
    extra: &dyn Fn(&Scenario) -> Vec<FieldError>,
) -> ScenarioError {
    let mut problems: Vec<(Option<Location>, FieldError)> = Vec::new();
    let mut more = 0;
    let mut reported: Vec<String> = Vec::new();
    let mut blanked_keys: Vec<String> = Vec::new();
    let mut renumbered = false;
    let mut cur = text.to_string();
    let mut err = first;
    let single = |e: &toml::de::Error| {
        let location = e.span().map(|s| location_of(text, s.start));
        let field = e
            .span()
            .and_then(|s| field_at(text, s.clone()).or_else(|| field_of_line(text, s.start)));
        (location, field, with_suggestion(e.message().trim()))
    };
    for _ in 0..2 * MAX_PROBLEMS_SHOWN {
        let missing = err
            .message()
            .strip_prefix("missing field `")
            .and_then(|r| r.split('`').next())
            .map(str::to_string);
        let consequence = missing.as_ref().is_some_and(|m| blanked_keys.contains(m));
        if !consequence {
            let (location, field, message) = single(&err);
            if problems.len() == MAX_PROBLEMS_SHOWN {
                more += 1;
            } else {
                let field = field.unwrap_or_default();
                reported.push(field.clone());
                problems.push((
                    location,
                    FieldError::new(vec![PathSeg::Key(field)], message),
                ));
            }
        }
        let Some(span) = err.span() else { break };
        let Ok(doc) = toml_edit::ImDocument::parse(cur.as_str()) else {
            break;
        };
        let Some(entry) = entry_at(doc.as_item(), &span) else {
            break;
        };
        renumbered |= entry.element;
        let before = cur.clone();
        // A misspelt name with a close match is read as that name (written in place, padded
        // with spaces): what it sets is then checked too, and nothing goes missing. Else the
        // entry is blanked.
        let fixed = respelt(&cur, &err, &entry).filter(|f| {
            let mut t = cur.clone();
            t.replace_range(entry.range.clone(), f);
            toml_edit::ImDocument::parse(t.as_str()).is_ok()
        });
        match fixed {
            Some(f) => cur.replace_range(entry.range.clone(), &f),
            None => {
                blanked_keys.push(entry.key);
                blank(&mut cur, entry.range);
            }
        }
        if cur == before {
            break;
        }
        match toml::from_str::<Scenario>(&cur) {
            Ok(sc) => {
                if !renumbered {
                    let (rest, rest_more) = meaning(&cur, &sc, extra, &reported);
                    more += rest_more;
                    for p in rest {
                        if problems.len() == MAX_PROBLEMS_SHOWN {
                            more += 1;
                        } else {
                            problems.push(p);
                        }
                    }
                }
                break;
            }
            Err(e) => err = e,
        }
    }
    match problems.len() {
        // One problem reads as it always did.
        1 if more == 0 => {
            let (location, e) = problems.remove(0);
            let field = e.path_string();
            ScenarioError::Syntax {
                file: file.into(),
                location,
                field: (!field.is_empty()).then_some(field),
                message: e.message,
            }
        }
        _ => ScenarioError::Invalid {
            file: file.into(),
            problems,
            more,
        },
    }
}

/// An entry of the document to blank out: its byte range, its key, and whether it is an element
/// of an array of tables (leaving it out renumbers the ones after it); for a `key = value` line,
/// the spans of both.
struct Entry {
    range: Range<usize>,
    key: String,
    element: bool,
    pair: Option<(Range<usize>, Range<usize>)>,
}

/// The `key = value` entry rewritten with the name serde's error suggests (an unknown field's
/// key, or an unknown variant's value), as long as it fits in the entry's bytes on one line.
fn respelt(text: &str, err: &toml::de::Error, entry: &Entry) -> Option<String> {
    let (ks, vs) = entry.pair.clone()?;
    let message = with_suggestion(err.message().trim());
    let name = message
        .rsplit_once("; did you mean `")?
        .1
        .strip_suffix("`?")?
        .to_string();
    // Only when the name at fault is the entry's own key or value: inside an inline table
    // (`service = { dist = "exp", ... }`) the entry is the whole table, and writing the name
    // over it (`service="exponential"`) made a second, false problem.
    let at = err.span()?.start;
    let line = if err.message().starts_with("unknown field") && at == ks.start {
        format!("{name}={}", text.get(vs)?)
    } else if err.message().starts_with("unknown variant")
        && at == vs.start
        && text.get(vs.clone())?.starts_with('"')
    {
        format!("{}=\"{name}\"", text.get(ks)?)
    } else {
        return None;
    };
    let len = entry.range.len();
    (line.len() <= len && !line.contains('\n')).then(|| format!("{line:<len$}"))
}

/// The innermost entry (a `key = value` line, else the table) at the start of `span`.
fn entry_at(item: &toml_edit::Item, span: &Range<usize>) -> Option<Entry> {
    match item {
        toml_edit::Item::Table(t) => in_table(t, false, "", span.start),
        _ => None,
    }
}

fn in_table(t: &toml_edit::Table, element: bool, name: &str, at: usize) -> Option<Entry> {
    use toml_edit::Item;
    let inside = |r: &Range<usize>| r.start <= at && at < r.end.max(r.start + 1);
    for (k, v) in t.iter() {
        let found = match v {
            Item::Table(sub) => in_table(sub, false, k, at).or_else(|| {
                // A table without an entry there: the whole table (its header, a field it lacks).
                sub.span().filter(inside).map(|range| Entry {
                    range,
                    key: k.to_string(),
                    element: false,
                    pair: None,
                })
            }),
            Item::ArrayOfTables(a) => a.iter().find_map(|e| in_table(e, true, k, at)),
            _ => {
                let key = t.key(k).and_then(|k| k.span());
                match (key, v.span()) {
                    (Some(ks), Some(vs)) => {
                        let range = ks.start.min(vs.start)..ks.end.max(vs.end);
                        inside(&range).then(|| Entry {
                            range,
                            key: k.to_string(),
                            element: false,
                            pair: Some((ks, vs)),
                        })
                    }
                    _ => None,
                }
            }
        };
        if found.is_some() {
            return found;
        }
    }
    // An element of an array of tables without an entry there: the element itself.
    if element {
        t.span().filter(inside).map(|range| Entry {
            range,
            key: name.to_string(),
            element,
            pair: None,
        })
    } else {
        None
    }
}

/// Every byte of `range` but line ends becomes a space: the entry is gone, every offset stays.
fn blank(text: &mut String, range: Range<usize>) {
    let (start, end) = (range.start.min(text.len()), range.end.min(text.len()));
    let mut bytes = std::mem::take(text).into_bytes();
    for b in &mut bytes[start..end] {
        if *b != b'\n' && *b != b'\r' {
            *b = b' ';
        }
    }
    // Replacing every byte of a multi-byte character keeps the text UTF-8, and so does a range
    // cut inside one (its other bytes stay): replace what does not decode.
    *text = String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
}

/// Whether `path` is where names other fields refer to are defined: `strategies[i]` or
/// `broker[i].name`.
fn is_name_definition(path: &[PathSeg]) -> bool {
    match path {
        [PathSeg::Key(k), PathSeg::Index(_)] => k == "strategies",
        [PathSeg::Key(b), PathSeg::Index(_), PathSeg::Key(n)] => b == "broker" && n == "name",
        _ => false,
    }
}

/// serde's "unknown field `keyz`, expected one of `messages`, `keys`, ..." (or "unknown variant")
/// with "; did you mean `keys`?" added when one of the expected names is close.
fn with_suggestion(message: &str) -> String {
    let word = ["unknown field `", "unknown variant `"]
        .iter()
        .find_map(|p| message.find(p).map(|i| &message[i + p.len()..]))
        .and_then(|rest| rest.split('`').next());
    let Some(word) = word else {
        return message.to_string();
    };
    let Some(expected) = message.find("expected").map(|i| &message[i..]) else {
        return message.to_string();
    };
    // The names are every other piece between backquotes.
    let names = expected.split('`').skip(1).step_by(2);
    format!("{message}{}", crate::suggest::did_you_mean(word, names))
}

/// The byte offset of every line start, for locating many offsets in one pass over the text.
struct LineIndex(Vec<usize>);

impl LineIndex {
    fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex(starts)
    }

    /// The same as [`location_of`], in the time of a binary search and the line's length.
    fn location(&self, text: &str, offset: usize) -> Location {
        let offset = text.floor_char_boundary_compat(offset.min(text.len()));
        let line = self.0.partition_point(|&s| s <= offset).max(1);
        let start = self.0[line - 1];
        Location {
            line,
            column: text[start..offset].chars().count() + 1,
        }
    }
}

/// The offset of the first carriage return not followed by a line feed.
fn bare_cr(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    (0..b.len()).find(|&i| b[i] == b'\r' && b.get(i + 1) != Some(&b'\n'))
}

/// The dotted field a `key = value` line at `offset` sets, read from the text itself (for errors
/// in documents that do not parse, such as an integer too large for TOML): the line's key, under
/// the last `[table]` or `[[array]]` header above it.
fn field_of_line(text: &str, offset: usize) -> Option<String> {
    let offset = text.floor_char_boundary_compat(offset.min(text.len()));
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next().unwrap_or("");
    let (key, _) = line.split_once('=')?;
    let key = key.trim();
    let bare = |k: &str| {
        !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    };
    if !bare(key) {
        return None;
    }
    let table = text[..start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_string())
        .filter(|t| bare(t));
    Some(match table {
        Some(t) => format!("{t}.{key}"),
        None => key.to_string(),
    })
}

/// 1-based line and column of a byte offset.
pub fn location_of(text: &str, offset: usize) -> Location {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary_compat(offset)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Location { line, column }
}

trait FloorBoundary {
    fn floor_char_boundary_compat(&self, i: usize) -> usize;
}

impl FloorBoundary for str {
    fn floor_char_boundary_compat(&self, mut i: usize) -> usize {
        while i > 0 && !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

/// The dotted field path whose value covers `span`, for errors serde reports by span only.
fn field_at(text: &str, span: Range<usize>) -> Option<String> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut path = Vec::new();
    find_path(doc.as_item(), &span, &mut path).then(|| path_string(&path))
}

fn find_path(item: &toml_edit::Item, span: &Range<usize>, path: &mut Vec<PathSeg>) -> bool {
    use toml_edit::Item;
    let contains = |s: Option<Range<usize>>| {
        s.is_some_and(|s| s.start <= span.start && span.end <= s.end.max(s.start + 1))
    };
    let in_table = |t: &toml_edit::Table, path: &mut Vec<PathSeg>| {
        for (k, v) in t.iter() {
            if contains(v.span()) || contains(t.key(k).and_then(|k| k.span())) {
                path.push(PathSeg::Key(k.to_string()));
                find_path(v, span, path);
                return true;
            }
        }
        false
    };
    match item {
        Item::Table(t) => in_table(t, path),
        Item::ArrayOfTables(a) => {
            for (i, t) in a.iter().enumerate() {
                if contains(t.span()) {
                    path.push(PathSeg::Index(i));
                    in_table(t, path);
                    return true;
                }
            }
            false
        }
        Item::Value(toml_edit::Value::InlineTable(t)) => {
            for (k, v) in t.iter() {
                if contains(v.span()) {
                    path.push(PathSeg::Key(k.to_string()));
                    return true;
                }
            }
            false
        }
        _ => false,
    }
}

/// A place in the document: a table-level item or a value inside an inline table or array.
#[derive(Clone, Copy)]
enum Node<'a> {
    Item(&'a toml_edit::Item),
    Table(&'a toml_edit::Table),
    Value(&'a toml_edit::Value),
}

impl Node<'_> {
    fn span(self) -> Option<Range<usize>> {
        match self {
            Node::Item(i) => i.span(),
            Node::Table(t) => t.span(),
            Node::Value(v) => v.span(),
        }
    }
}

/// The source span of the value at `path`, falling back to the nearest enclosing item. Walks by
/// reference: the time is the path's length, whatever the document's size.
fn span_of(node: Node<'_>, path: &[PathSeg]) -> Option<Range<usize>> {
    use toml_edit::{Item, Value};
    let Some((first, rest)) = path.split_first() else {
        return node.span();
    };
    let child: Option<(Node<'_>, Option<Range<usize>>)> = match (node, first) {
        (Node::Item(Item::Table(t)), PathSeg::Key(k)) => t
            .get(k)
            .map(|v| (Node::Item(v), t.key(k).and_then(|k| k.span()))),
        (Node::Item(Item::Value(Value::InlineTable(t))), PathSeg::Key(k))
        | (Node::Value(Value::InlineTable(t)), PathSeg::Key(k)) => t
            .get(k)
            .map(|v| (Node::Value(v), t.key(k).and_then(|k| k.span()))),
        (Node::Item(Item::ArrayOfTables(a)), PathSeg::Index(i)) => {
            a.get(*i).map(|t| (Node::Table(t), t.span()))
        }
        (Node::Item(Item::Value(Value::Array(a))), PathSeg::Index(i))
        | (Node::Value(Value::Array(a)), PathSeg::Index(i)) => {
            a.get(*i).map(|v| (Node::Value(v), v.span()))
        }
        (Node::Table(t), PathSeg::Key(k)) => t
            .get(k)
            .map(|v| (Node::Item(v), t.key(k).and_then(|k| k.span()))),
        _ => None,
    };
    match child {
        Some((c, key_span)) => span_of(c, rest).or(key_span).or_else(|| node.span()),
        None => node.span(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
strategies = ["competing"]
[workload]
messages = 10
rate = "10/s"
keys = 2
[[broker]]
name = "a"
[consumers]
count = 1
service = "1ms"
"#;

    fn none(_: &Scenario) -> Vec<FieldError> {
        Vec::new()
    }

    #[test]
    fn good_file_loads() {
        let s = load_str("x.toml", GOOD, &none).unwrap();
        assert_eq!(s.brokers[0].name, "a");
        let back = load_str("x.toml", &s.to_toml(), &none).unwrap();
        assert_eq!(back.to_toml(), s.to_toml());
    }

    #[test]
    fn unknown_names_get_a_suggestion() {
        assert_eq!(
            with_suggestion("unknown field `keyz`, expected one of `messages`, `keys`, `rate`"),
            "unknown field `keyz`, expected one of `messages`, `keys`, `rate`; did you mean `keys`?"
        );
        assert_eq!(
            with_suggestion("unknown variant `brokr_crash`, expected `broker_crash` or `poison`"),
            "unknown variant `brokr_crash`, expected `broker_crash` or `poison`; did you mean \
             `broker_crash`?"
        );
        let far = "unknown field `zzz`, expected `messages` or `keys`";
        assert_eq!(with_suggestion(far), far);
        assert_eq!(with_suggestion("invalid type"), "invalid type");
    }

    #[test]
    fn unknown_field_names_line_and_column() {
        let bad = GOOD.replace("keys = 2", "keys = 2\nkeyz = 3");
        let e = load_str("x.toml", &bad, &none).unwrap_err().to_string();
        assert!(e.starts_with("x.toml:7:1"), "{e}");
        assert!(e.contains("keyz"), "{e}");
    }

    #[test]
    fn bad_duration_names_field() {
        let bad = GOOD.replace("\"1ms\"", "\"fast\"");
        let e = load_str("x.toml", &bad, &none).unwrap_err().to_string();
        assert!(e.contains("x.toml:11:"), "{e}");
        assert!(e.contains("consumers.service"), "{e}");
        assert!(e.contains("250ms"), "{e}");
    }

    /// `[lease] renew_max` (Service Bus's `MaxAutoLockRenewalDuration`, counted from a session's
    /// acceptance under `servicebus_sessions`) bounds renewal: refused without renewal, taken
    /// with the flavour's (0s: no renewal, as `TimeSpan.Zero` turns it off).
    #[test]
    fn renew_max_needs_renewal() {
        let lease = |flavour: &str, renew_max: &str| {
            format!("flavour = \"{flavour}\"\n{GOOD}[lease]\nduration = \"30s\"\nrenew_max = \"{renew_max}\"\n")
        };
        let e = load_str("x.toml", &lease("activemq", "5m"), &none)
            .unwrap_err()
            .to_string();
        assert!(e.contains("field `lease.renew_max`"), "{e}");
        assert!(e.contains("give renew_every too"), "{e}");
        for max in ["0s", "5m", "1h"] {
            let s = load_str("x.toml", &lease("servicebus", max), &none).unwrap();
            let l = s.lease_policy().unwrap();
            assert_eq!(l.renew_max, Some(crate::time::Dur::parse(max).unwrap()));
            assert!(l.renew_every.is_some());
        }
    }

    /// A bad bound inside `[expect.NAME]` (its text, type, number or fraction) is reported once,
    /// at the bound's own line and column, with its field: it was at the `[expect]` header, as
    /// field `expect`, and again without a field at the strategy's table (`#[serde(flatten)]`
    /// lost the place).
    #[test]
    fn a_bad_bound_is_reported_at_its_own_line() {
        for (bound, says) in [
            ("\"> zero\"", "invalid bound \"> zero\""),
            ("\"=> 0\"", "invalid bound \"=> 0\""),
            ("\"< nan\"", "must be finite"),
            ("true", "invalid type: boolean `true`"),
            (
                "{ value = \"> 0\", fraction = 1.5 }",
                "fraction must be in (0, 1]",
            ),
            (
                "{ value = \"> x\", fraction = 0.5 }",
                "invalid bound \"> x\"",
            ),
        ] {
            for table in ["all", "competing"] {
                let file = format!(
                    "{GOOD}[expect]\nseeds = \"1..3\"\n[expect.{table}]\nlost = 0\nduplicates = {bound}\n"
                );
                let e = load_str("x.toml", &file, &none).unwrap_err().to_string();
                let at = format!("x.toml:16:14: field `expect.{table}.duplicates`: ");
                assert!(
                    e.starts_with(&format!("error: {at}")) || e.starts_with(&at),
                    "{e}"
                );
                assert!(e.contains(says), "{bound}: {e}");
                assert_eq!(e.lines().count(), 1, "reported once: {e}");
            }
        }
        // The rest of [expect] still reads as before.
        let file =
            format!("{GOOD}[expect]\nseeds = \"1..3\"\nfraction = 0.5\n[expect.all]\nlost = 0\n");
        let s = load_str("x.toml", &file, &none).unwrap();
        let x = s.expect.unwrap();
        assert_eq!(x.fraction, 0.5);
        assert_eq!(x.seeds.unwrap().to_string(), "1..3");
        assert_eq!(x.bounds["all"]["lost"].to_string(), "== 0");
    }

    /// A problem of meaning in serde's words (a `[strategy.NAME]` table is read after the file,
    /// by the strategy) gets the suggestion a misspelt field of the file gets; one that has a
    /// suggestion already keeps its own.
    #[test]
    fn problems_of_meaning_in_serdes_words_get_a_suggestion() {
        let extra = |_: &Scenario| {
            vec![
                FieldError::new(
                    vec![PathSeg::Key("workload".into()), PathSeg::Key("keys".into())],
                    "unknown field `partitons`, expected `partitions` or `assignor`",
                ),
                FieldError::new(
                    vec![PathSeg::Key("workload".into()), PathSeg::Key("rate".into())],
                    "unknown variant `x`, expected `a` or `b`; did you mean `a`?",
                ),
            ]
        };
        let e = load_str("x.toml", GOOD, &extra).unwrap_err().to_string();
        assert!(
            e.contains("expected `partitions` or `assignor`; did you mean `partitions`?"),
            "{e}"
        );
        assert_eq!(e.matches("did you mean").count(), 2, "{e}");
    }

    /// A misspelt name inside an inline table is reported once: it was read as a misspelling of
    /// the whole entry (`service = { dist = "exp", ... }` rewritten `service="exponential"`),
    /// which added "field `consumers`: invalid duration \"exponential\"".
    #[test]
    fn a_misspelt_name_in_an_inline_table_is_reported_once() {
        for (service, says) in [
            (
                "{ dist = \"exp\", mean = \"5ms\" }",
                "x.toml:11:20: field `consumers.service.dist`: unknown variant `exp`",
            ),
            (
                "{ dist = \"exponential\", meen = \"5ms\" }",
                "field `consumers.service`: unknown field `meen`",
            ),
        ] {
            let bad = GOOD.replace("service = \"1ms\"", &format!("service = {service}"));
            let e = load_str("x.toml", &bad, &none).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        // A misspelt entry of its own is still read as the name it is close to, and what it
        // sets is checked too.
        let bad = GOOD.replace("keys = 2", "keyz = 0");
        let e = load_str("x.toml", &bad, &none).unwrap_err().to_string();
        assert!(e.contains("did you mean `keys`?"), "{e}");
        assert!(
            e.contains("field `workload.keys`: must be between 1"),
            "{e}"
        );
    }

    /// An `f64` far from 1 is shown in scientific notation in an error, not as its 309 digits;
    /// integers (a u64 seed, an i64) and digits in names are left alone.
    #[test]
    fn huge_and_tiny_numbers_are_shown_short() {
        assert_eq!(
            shorten_numbers(&format!("got {}, and {}", 1e308, -1e-300)),
            "got 1e308, and -1e-300"
        );
        assert_eq!(
            shorten_numbers(&format!("in [0, 1], got {}.", 1.5e40)),
            "in [0, 1], got 1.5e40."
        );
        for kept in [
            "seed 18446744073709551615, -9223372036854775808, 0.5, 3.14159",
            "consumer c12345678901234567890123456789 and x_123456789012345678901234567",
            "é 1 ü",
        ] {
            assert_eq!(shorten_numbers(kept), kept);
        }
        let bad = GOOD.replace("keys = 2", "keys = 2\npoison_fraction = 1e308");
        let e = load_str("x.toml", &bad, &none).unwrap_err().to_string();
        assert!(
            e.ends_with("must be a probability in [0, 1], got 1e308"),
            "{e}"
        );
        let bad = GOOD.replace("count = 1", "count = 1\nprefetch = -1e-300");
        let e = load_str("x.toml", &bad, &none).unwrap_err().to_string();
        assert!(e.contains("floating point `-1e-300`"), "{e}");
    }

    /// A bare number where a duration distribution, a rate or a seed range goes reads as a
    /// duration's does: `0` is a zero duration (the rules say so), any other number "has no
    /// unit" with an example of what to write; they were "invalid type: integer, expected a
    /// string" (or "a duration") with nothing to write instead.
    #[test]
    fn bare_numbers_are_read_as_the_rules_say() {
        let zero = GOOD.replace("service = \"1ms\"", "service = 0");
        let s = load_str("x.toml", &zero, &none).unwrap();
        assert_eq!(s.consumers.service.0.mean_micros(), 0.0);
        for (from, to, says) in [
            (
                "service = \"1ms\"",
                "service = 5",
                "x.toml:11:11: field `consumers.service`: a bare number (5) has no unit; write e.g. \"5ms\"",
            ),
            (
                "service = \"1ms\"",
                "service = 1.5",
                "field `consumers.service`: a bare number (1.5) has no unit; write e.g. \"1.5s\"",
            ),
            (
                "rate = \"10/s\"",
                "rate = 100",
                "x.toml:5:8: field `workload.rate`: a bare number (100) has no unit; write a count per unit, e.g. \"100/s\"",
            ),
            (
                "rate = \"10/s\"",
                "rate = 0.5",
                "field `workload.rate`: a bare number (0.5) has no unit",
            ),
        ] {
            let bad = GOOD.replace(from, to);
            let e = load_str("x.toml", &bad, &none).unwrap_err().to_string();
            assert!(e.contains(says), "{to}: {e}");
        }
        let seeds = GOOD.to_string() + "[expect]\nseeds = 5\n[expect.all]\nlost = 0\n";
        let e = load_str("x.toml", &seeds, &none).unwrap_err().to_string();
        assert!(
            e.contains(
                "field `expect.seeds`: a bare number (5): write the seeds as a string, \"5\""
            ),
            "{e}"
        );
        // A fault's `for` (a distribution too) likewise.
        let f = GOOD.to_string() + "[[fault]]\nkind = \"db_outage\"\nat = \"1s\"\nfor = 7\n";
        let e = load_str("x.toml", &f, &none).unwrap_err().to_string();
        assert!(
            e.contains("field `fault[0].for`: a bare number (7) has no unit"),
            "{e}"
        );
    }

    #[test]
    fn validation_errors_are_located() {
        let bad = GOOD.replace("count = 1", "count = 0");
        let e = load_str("x.toml", &bad, &none).unwrap_err().to_string();
        assert!(e.contains("x.toml:10:9: field `consumers.count`"), "{e}");
    }

    #[test]
    fn a_setting_that_needs_another_is_refused_without_it() {
        for (extra, field, needs) in [
            (
                "max_poll_interval = \"1s\"",
                "consumers.max_poll_interval",
                "receive = \"batch\"",
            ),
            (
                "restart_takes_over = true",
                "consumers.restart_takes_over",
                "crash_detection = \"timeout\"",
            ),
            (
                "commit_interval = \"1s\"",
                "consumers.commit_interval",
                "commit = \"interval\"",
            ),
        ] {
            let bad = GOOD.replace("service = \"1ms\"", &format!("service = \"1ms\"\n{extra}"));
            let e = load_str("x.toml", &bad, &none).unwrap_err().to_string();
            // Line 12, column of the value.
            let col = extra.find('=').unwrap() + 3;
            assert!(
                e.contains(&format!("x.toml:12:{col}: field `{field}`")),
                "{e}"
            );
            assert!(e.contains(needs), "{e}");
        }
        // With what each needs (or a flavour that has it), all three load.
        let with = GOOD.replace(
            "service = \"1ms\"",
            "service = \"1ms\"\nreceive = \"batch\"\nmax_poll_interval = \"1s\"\n\
             crash_detection = \"timeout\"\nrestart_takes_over = true\n\
             commit = \"interval\"\ncommit_interval = \"1s\"",
        );
        load_str("x.toml", &with, &none).unwrap();
        let kafka = format!(
            "flavour = \"kafka\"\n{}",
            GOOD.replace(
                "service = \"1ms\"",
                "service = \"1ms\"\nmax_poll_interval = \"1s\"\nrestart_takes_over = true\n\
                 client = \"plain\"\ncommit_interval = \"1s\""
            )
        );
        load_str("x.toml", &kafka, &none).unwrap();
        // Spring Kafka's container (the default client) does not auto-commit.
        let spring = kafka.replace("client = \"plain\"\n", "");
        let e = load_str("x.toml", &spring, &none).unwrap_err().to_string();
        assert!(e.contains("client = \"plain\""), "{e}");
    }

    /// Kafka's metadata refresh and offset reset are refused, each in a sentence, where there are
    /// no partitions to add; under `kafka` (and `native`) they load, a bad value named.
    #[test]
    fn kafkas_metadata_settings_are_refused_on_another_broker() {
        let with = |flavour: &str, producers: &str, consumers: &str| {
            format!(
                "flavour = \"{flavour}\"\n{}",
                GOOD.replace(
                    "service = \"1ms\"",
                    &format!("service = \"1ms\"\n{consumers}")
                )
                .replace(
                    "[consumers]",
                    &format!("[producers]\n{producers}\n[consumers]")
                )
            )
        };
        for (producers, consumers, field) in [
            (
                "metadata_max_age = \"1m\"",
                "",
                "producers.metadata_max_age",
            ),
            (
                "",
                "metadata_max_age = \"1m\"",
                "consumers.metadata_max_age",
            ),
            (
                "",
                "auto_offset_reset = \"earliest\"",
                "consumers.auto_offset_reset",
            ),
        ] {
            let e = load_str("x.toml", &with("rabbitmq", producers, consumers), &none)
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("field `{field}`")), "{e}");
            assert!(e.contains("needs flavour = \"kafka\""), "{e}");
            for flavour in ["kafka", "native"] {
                load_str("x.toml", &with(flavour, producers, consumers), &none).unwrap();
            }
        }
        let e = load_str(
            "x.toml",
            &with("kafka", "", "auto_offset_reset = \"none\""),
            &none,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("auto_offset_reset"), "{e}");
        // The flavour's defaults: Kafka's 5 min and latest; none elsewhere.
        let d = crate::scenario::Flavour::Kafka.defaults();
        assert_eq!(d.metadata_max_age, Some(crate::time::Dur::from_secs(300)));
        assert_eq!(
            d.auto_offset_reset,
            Some(crate::scenario::OffsetReset::Latest)
        );
        let d = crate::scenario::Flavour::Rabbitmq.defaults();
        assert_eq!((d.metadata_max_age, d.auto_offset_reset), (None, None));
    }

    /// `[consumers] client` names a Kafka consumer: refused, in a sentence, on another broker.
    #[test]
    fn a_kafka_client_is_refused_on_another_broker() {
        let with = |flavour: &str| {
            format!(
                "flavour = \"{flavour}\"\n{}",
                GOOD.replace("service = \"1ms\"", "service = \"1ms\"\nclient = \"plain\"")
            )
        };
        let e = load_str("x.toml", &with("activemq"), &none)
            .unwrap_err()
            .to_string();
        assert!(e.contains("field `consumers.client`"), "{e}");
        assert!(e.contains("needs flavour = \"kafka\""), "{e}");
        load_str("x.toml", &with("kafka"), &none).unwrap();
        load_str("x.toml", &with("native"), &none).unwrap();
    }

    /// A bad field name does not hide what follows: unknown fields, a bad type, and the problems
    /// of meaning, each with its line, column, field and what is allowed, in one answer.
    #[test]
    fn every_problem_of_a_file_is_reported_at_once() {
        let bad = GOOD
            .replace("messages = 10", "messages = 10\nkeyz = 3")
            .replace("name = \"a\"", "name = \"a\"\npersistant = true")
            .replace("count = 1", "count = 0\nprefetch = \"ten\"")
            + "[[fault]]\nkind = \"consumer_crash\"\nat = \"1s\"\nconsumr = 0\n\
               [expect.competing]\np99_latency = \"< 100\"\n";
        let e = load_str("x.toml", &bad, &none).unwrap_err().to_string();
        let lines: Vec<&str> = e.lines().collect();
        for want in [
            "x.toml:5:1: field `workload.keyz`: unknown field `keyz`",
            "x.toml:10:1: field `broker[0].persistant`: unknown field `persistant`",
            "; did you mean `persistent`?",
            "x.toml:13:12: field `consumers.prefetch`: invalid type: string \"ten\"",
            "x.toml:18:1: field `fault[0].consumr`: unknown field `consumr`",
            "; did you mean `consumer`?",
            "x.toml:12:9: field `consumers.count`",
            "x.toml:20:15: field `expect.competing.p99_latency`: no summary figure named \"p99_latency\"",
            "; did you mean `latency_ms_p99`?",
        ] {
            assert!(
                lines.iter().any(|l| l.contains(want)),
                "{want} not in:\n{e}"
            );
        }
        // A misspelt name with a close match is read as that name: what it sets is checked too.
        assert!(
            e.contains("x.toml:18:10: field `fault[0].consumer`: no consumer 0"),
            "{e}"
        );
        assert_eq!(lines.len(), 7, "{e}");
        // Line and column are those of the file as written: blanking moved nothing.
        assert!(lines.iter().all(|l| l.starts_with("x.toml:")), "{e}");
    }

    /// A field that a required one's problem would leave missing is not reported as missing.
    #[test]
    fn a_blanked_required_field_is_not_reported_missing() {
        let bad = GOOD.replace("service = \"1ms\"", "service = \"fast\"\nprefech = 3");
        let e = load_str("x.toml", &bad, &none).unwrap_err().to_string();
        assert!(e.contains("x.toml:11:11: field `consumers.service`"), "{e}");
        assert!(!e.contains("missing field"), "{e}");
        // One problem reads as it always did.
        let one = GOOD.replace("keys = 2", "keys = 2\nkeyz = 3");
        let e = load_str("x.toml", &one, &none).unwrap_err();
        assert!(matches!(e, ScenarioError::Syntax { .. }), "{e}");
    }

    /// A check that names a field already reported (read as absent) is not reported beside it.
    #[test]
    fn a_check_naming_a_reported_field_is_its_consequence() {
        let bad = GOOD.to_string()
            + "[[fault]]\nkind = \"consumer_crash\"\nat = \"5000000000h\"\nconsumer = 0\n";
        let e = load_str("x.toml", &bad, &none).unwrap_err().to_string();
        assert!(e.contains("field `fault[0].at`: duration"), "{e}");
        assert!(!e.contains("give either"), "{e}");
        // Other problems of the same table still show.
        let two = bad.replace("consumer = 0", "consumer = 9");
        let e = load_str("x.toml", &two, &none).unwrap_err().to_string();
        assert!(e.contains("fault[0].consumer"), "{e}");
    }

    #[test]
    fn empty_and_garbage_do_not_panic() {
        assert!(load_str("x.toml", "", &none).is_err());
        assert!(load_str("x.toml", "[[[", &none).is_err());
        assert!(load_str("x.toml", "strategies = 3", &none).is_err());
    }
}
