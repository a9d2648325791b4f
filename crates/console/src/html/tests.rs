use super::*;

#[test]
fn words_exist_in_both_languages_and_escape() {
    for (k, en, fr) in all_words() {
        let found = all_words().filter(|w| w.0 == *k);
        assert_eq!(found.count(), 1, "{k} once");
        assert!(!en.is_empty() && !fr.is_empty(), "{k}");
        assert_eq!(en.matches("{}").count(), fr.matches("{}").count(), "{k}");
    }
    assert_eq!(
        tf(Lang::Fr, "confirm_cancel", &["<p>"]),
        "Annuler le paiement &lt;p&gt; ?"
    );
    assert_eq!(Lang::pick(None, None, Some("fr-FR,fr;q=0.9")), Lang::Fr);
    assert_eq!(Lang::pick(Some("en"), Some("fr"), None), Lang::En);
}

/// Every word the console's code asks for by name is in a table: a key
/// named in `t(l, "…")`, `tf(…)` or `plain(…)` that is not would show
/// as `⟦?⟧`.
#[test]
fn every_word_asked_for_exists() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let code = std::fs::read_to_string(&path).unwrap();
        for call in ["t(", "tf(", "plain("] {
            for (at, _) in code.match_indices(call) {
                let before = code[..at].chars().last().unwrap_or(' ');
                if before.is_alphanumeric() || before == '_' {
                    continue;
                }
                let args = &code[at + call.len()..];
                let Some((lang, rest)) = args.split_once(',') else {
                    continue;
                };
                let lang = lang.trim();
                if !["l", "lang", "req.lang", "Lang::En", "Lang::Fr"].contains(&lang) {
                    continue;
                }
                let Some(key) = rest.trim_start().strip_prefix('"') else {
                    continue;
                };
                let key = key.split('"').next().unwrap();
                let named = key
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
                if named && !all_words().any(|(k, _, _)| *k == key) {
                    missing.push(format!("{}: {key}", path.display()));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "words asked for but missing: {missing:?}"
    );
}

#[test]
fn table_cells_carry_their_column_name() {
    let page = "<p>x</p><table><thead><tr><th>Ref</th><th><abbr title=\"a\">Amt</abbr></th></tr></thead>\
                <tbody><tr><td><a href=\"/p\">r1</a></td><td>5</td></tr>\
                <tr><td colspan=\"2\">total</td></tr></tbody>\
                <tfoot><tr><th>All</th><td>9</td></tr></tfoot></table><td>";
    let out = label_cells(page);
    assert!(out.contains("<table tabindex=\"0\">"), "{out}");
    assert!(
        out.contains(
            "<td data-label=\"Ref\"><a href=\"/p\">r1</a></td><td data-label=\"Amt\">5</td>"
        ),
        "{out}"
    );
    assert!(out.contains("<td colspan=\"2\">total</td>"), "{out}");
    assert!(
        out.contains("<th data-label=\"Ref\">All</th><td data-label=\"Amt\">9</td>"),
        "{out}"
    );
    assert!(out.ends_with("</table><td>"), "{out}");
    assert!(out.contains("<thead><tr><th>Ref</th>"), "{out}");
}
