//! `--set PATH=VALUE`: setting a dotted path in a scenario's TOML document, keeping its layout (so
//! errors still point at the user's lines).

/// Sets `path` in a TOML document to `raw` (parsed as a TOML value, else taken as a string).
/// Integer segments index arrays (`fault.0.at`, `broker.1.persistent`); missing tables are created.
pub fn set_path(doc: &mut toml_edit::DocumentMut, path: &str, raw: &str) -> Result<(), String> {
    let value: toml_edit::Value = raw
        .parse::<toml_edit::Value>()
        .unwrap_or_else(|_| toml_edit::Value::from(raw));
    let segs: Vec<&str> = path.split('.').map(str::trim).collect();
    set_in_table(doc.as_table_mut(), &segs, value)
}

fn set_in_table(
    table: &mut dyn toml_edit::TableLike,
    segs: &[&str],
    value: toml_edit::Value,
) -> Result<(), String> {
    let (seg, rest) = segs.split_first().ok_or("empty path")?;
    if rest.is_empty() {
        table.insert(seg, toml_edit::Item::Value(value));
        return Ok(());
    }
    if table.get(seg).is_none() {
        // An index into an array the file does not have (`fault.0.for` without a [[fault]]):
        // creating a table there read as "invalid type: map, expected a sequence".
        if let Ok(i) = rest[0].parse::<usize>() {
            return Err(format!(
                "the file has no {seg} entries: index {i} does not exist (add a [[{seg}]] entry \
                 to the file, then set its fields)"
            ));
        }
        let mut t = toml_edit::Table::new();
        t.set_implicit(true);
        table.insert(seg, toml_edit::Item::Table(t));
    }
    let item = table.get_mut(seg).ok_or("table vanished")?;
    set_in_item(item, seg, rest, value)
}

fn set_in_item(
    item: &mut toml_edit::Item,
    name: &str,
    segs: &[&str],
    value: toml_edit::Value,
) -> Result<(), String> {
    let index = |seg: &str, len: usize| -> Result<usize, String> {
        let i: usize = seg
            .parse()
            .map_err(|_| format!("{name} is an array: expected an index after it, not {seg:?}"))?;
        if i < len {
            Ok(i)
        } else {
            Err(format!(
                "{name} has {len} entries: index {i} does not exist"
            ))
        }
    };
    match item {
        toml_edit::Item::Table(t) => set_in_table(t, segs, value),
        toml_edit::Item::Value(toml_edit::Value::InlineTable(t)) => set_in_table(t, segs, value),
        toml_edit::Item::ArrayOfTables(a) => {
            let i = index(segs[0], a.len())?;
            if segs.len() == 1 {
                return Err(format!(
                    "{name}.{i} is a whole table: name one of its fields"
                ));
            }
            let t = a.get_mut(i).ok_or("index checked")?;
            set_in_table(t, &segs[1..], value)
        }
        toml_edit::Item::Value(toml_edit::Value::Array(a)) => {
            let i = index(segs[0], a.len())?;
            if segs.len() > 1 {
                return Err(format!("{name}.{i} is an array element: it has no fields"));
            }
            a.replace(i, value);
            Ok(())
        }
        _ => Err(format!(
            "{name} is a value, not a table: it has no field {:?}",
            segs[0]
        )),
    }
}
