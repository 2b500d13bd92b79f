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

/// `s` with every control character but a line feed written as a Rust escape (`\u{1b}`): what a
/// file holds reaches a terminal through these messages (serde's "unknown variant" and "unknown
/// field" quote the input raw), so every problem line is escaped here, in the one place that
/// formats them.
fn escape(s: &str) -> String {
    if !s.chars().any(|c| c.is_control() && c != '\n') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() && c != '\n' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn fmt_one(file: &str, loc: Option<Location>, field: Option<&str>, message: &str) -> String {
    let (file, field, message) = (escape(file), field.map(escape), escape(message));
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
    let scenario: Scenario = toml::from_str(text).map_err(|e| {
        let location = e.span().map(|s| location_of(text, s.start));
        let message = with_suggestion(e.message().trim());
        let field = e
            .span()
            .and_then(|s| field_at(text, s.clone()).or_else(|| field_of_line(text, s.start)));
        ScenarioError::Syntax {
            file: file.into(),
            location,
            field,
            message,
        }
    })?;
    let mut problems = super::validate(&scenario);
    problems.extend(extra(&scenario));
    // Causes before their consequences: a misspelt strategy or broker name also breaks every
    // reference to it ([expect.NAME], [sweep] strategies, consumers.brokers), so the problems with
    // the names themselves come first (a stable sort keeps the rest in file order).
    problems.sort_by_key(|p| !is_name_definition(&p.path));
    if problems.is_empty() {
        return Ok(scenario);
    }
    let doc = toml_edit::ImDocument::parse(text).ok();
    let more = problems.len().saturating_sub(MAX_PROBLEMS_SHOWN);
    let lines = LineIndex::new(text);
    let problems = problems
        .into_iter()
        .take(MAX_PROBLEMS_SHOWN)
        .map(|p| {
            let loc = doc
                .as_ref()
                .and_then(|d| span_of(Node::Item(d.as_item()), &p.path))
                .map(|s| lines.location(text, s.start));
            (loc, p)
        })
        .collect();
    Err(ScenarioError::Invalid {
        file: file.into(),
        problems,
        more,
    })
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
                 commit_interval = \"1s\""
            )
        );
        load_str("x.toml", &kafka, &none).unwrap();
    }

    #[test]
    fn empty_and_garbage_do_not_panic() {
        assert!(load_str("x.toml", "", &none).is_err());
        assert!(load_str("x.toml", "[[[", &none).is_err());
        assert!(load_str("x.toml", "strategies = 3", &none).is_err());
    }
}
