//! Reading a scenario file: TOML syntax and types (serde), then meaning ([`super::validate`]), with
//! every error pointing at the file, line, column and field.

use super::Scenario;
use std::fmt;
use std::ops::Range;
use std::path::Path;

/// Largest scenario file accepted; anything bigger is surely not a hand-written scenario.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

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
    #[error("{file}: cannot read: {reason}")]
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
    #[error("{}", fmt_many(file, problems))]
    Invalid {
        /// The file.
        file: String,
        /// Every problem found, with its location.
        problems: Vec<(Option<Location>, FieldError)>,
    },
}

fn fmt_one(file: &str, loc: Option<Location>, field: Option<&str>, message: &str) -> String {
    let mut s = file.to_string();
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

fn fmt_many(file: &str, problems: &[(Option<Location>, FieldError)]) -> String {
    problems
        .iter()
        .map(|(loc, e)| fmt_one(file, *loc, Some(&e.path_string()), &e.message))
        .collect::<Vec<_>>()
        .join("\n")
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Reads and loads a scenario file. `extra` adds checks the engine cannot know (strategy names and
/// their parameter tables).
pub fn load_file(
    path: &Path,
    extra: &dyn Fn(&Scenario) -> Vec<FieldError>,
) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let io = |reason: String| ScenarioError::Io {
        file: file.clone(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| io(e.to_string()))?;
    if meta.is_dir() {
        return Err(io("is a directory, not a scenario file".into()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(io(format!(
            "{} bytes is larger than the {MAX_FILE_BYTES}-byte limit for scenario files",
            meta.len()
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| io(e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let upto = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = upto.iter().filter(|&&b| b == b'\n').count() + 1;
        ScenarioError::Syntax {
            file: file.clone(),
            location: Some(Location { line, column: 1 }),
            field: None,
            message: "the file is not valid UTF-8 text".into(),
        }
    })?;
    load_str(&file, &text, extra)
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
    let scenario: Scenario = toml::from_str(text).map_err(|e| {
        let location = e.span().map(|s| location_of(text, s.start));
        let message = e.message().trim().to_string();
        let field = e.span().and_then(|s| field_at(text, s));
        ScenarioError::Syntax {
            file: file.into(),
            location,
            field,
            message,
        }
    })?;
    let mut problems = super::validate(&scenario);
    problems.extend(extra(&scenario));
    if problems.is_empty() {
        return Ok(scenario);
    }
    let doc = toml_edit::ImDocument::parse(text).ok();
    let problems = problems
        .into_iter()
        .map(|p| {
            let loc = doc
                .as_ref()
                .and_then(|d| span_of(d.as_item(), &p.path))
                .map(|s| location_of(text, s.start));
            (loc, p)
        })
        .collect();
    Err(ScenarioError::Invalid {
        file: file.into(),
        problems,
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

/// The source span of the value at `path`, falling back to the nearest enclosing item.
fn span_of(item: &toml_edit::Item, path: &[PathSeg]) -> Option<Range<usize>> {
    let Some((first, rest)) = path.split_first() else {
        return item.span();
    };
    let child = match (item, first) {
        (toml_edit::Item::Table(t), PathSeg::Key(k)) => t
            .get(k)
            .map(|v| (v.clone(), t.key(k).and_then(|k| k.span()))),
        (toml_edit::Item::Value(toml_edit::Value::InlineTable(t)), PathSeg::Key(k)) => {
            t.get(k).map(|v| {
                (
                    toml_edit::Item::Value(v.clone()),
                    t.key(k).and_then(|k| k.span()),
                )
            })
        }
        (toml_edit::Item::ArrayOfTables(a), PathSeg::Index(i)) => a
            .get(*i)
            .map(|t| (toml_edit::Item::Table(t.clone()), t.span())),
        (toml_edit::Item::Value(toml_edit::Value::Array(a)), PathSeg::Index(i)) => a
            .get(*i)
            .map(|v| (toml_edit::Item::Value(v.clone()), v.span())),
        _ => None,
    };
    match child {
        Some((c, key_span)) => span_of(&c, rest).or(key_span).or_else(|| item.span()),
        None => item.span(),
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
    fn empty_and_garbage_do_not_panic() {
        assert!(load_str("x.toml", "", &none).is_err());
        assert!(load_str("x.toml", "[[[", &none).is_err());
        assert!(load_str("x.toml", "strategies = 3", &none).is_err());
    }
}
