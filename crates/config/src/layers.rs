//! Layering the configuration: a file's table over the defaults, then
//! `MMC_*` variables, each naming a path (`MMC_STORAGE__URL`) and a value.

pub(super) fn parse_value(raw: &str) -> toml::Value {
    // `x = <raw>` parses numbers, booleans, arrays and inline tables; anything else is a string.
    format!("x = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("x"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

pub(super) fn set_path(tree: &mut toml::Table, path: &[String], value: toml::Value) {
    match path {
        [] => {}
        [last] => {
            tree.insert(last.clone(), value);
        }
        [first, rest @ ..] => {
            let entry = tree
                .entry(first.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if !entry.is_table() {
                *entry = toml::Value::Table(toml::Table::new());
            }
            if let toml::Value::Table(t) = entry {
                set_path(t, rest, value);
            }
        }
    }
}

pub(super) fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}
