//! The console's HTML: one layout, escaping, and the words in French and
//! English. Pages are plain forms and tables: no script runs, and the CSP
//! allows the service's own stylesheet and nothing else.

use std::fmt::Write;

use crate::sessions::Session;

/// A word with its `{}` filled in, unescaped (for a message that is escaped where it is shown).
pub fn plain(l: Lang, key: &str, args: &[&str]) -> String {
    args.iter()
        .fold(t(l, key).to_string(), |m, a| m.replacen("{}", a, 1))
}

/// A role as the reader's language names it.
pub fn role_word(l: Lang, role: crate::users::Role) -> &'static str {
    t(l, &format!("role_{}", role.as_str()))
}

#[cfg(test)]
mod tests;
mod words;

use words::WORDS;

/// The reader's language (its own module: the formats use it without the layout).
pub use crate::lang::Lang;

/// Every word of the console: the layout's, then each area's own table.
pub fn all_words() -> impl Iterator<Item = &'static (&'static str, &'static str, &'static str)> {
    WORDS
        .iter()
        .chain(crate::words::tables().flat_map(|t| t.iter()))
}

pub fn t(lang: Lang, key: &str) -> &'static str {
    all_words()
        .find(|(k, _, _)| *k == key)
        .map(|(_, en, fr)| if lang == Lang::Fr { *fr } else { *en })
        // Marked so that a test finds it on any page.
        .unwrap_or("⟦?⟧")
}

/// A word with its `{}` filled in order (the arguments are escaped).
pub fn tf(lang: Lang, key: &str, args: &[&str]) -> String {
    let mut out = String::new();
    let mut rest = t(lang, key);
    for a in args {
        match rest.split_once("{}") {
            Some((before, after)) => {
                out.push_str(&esc(before));
                out.push_str(&esc(a));
                rest = after;
            }
            None => break,
        }
    }
    out.push_str(&esc(rest));
    out
}

/// A user-management error in the page's language (English: as the error says it).
pub fn user_error(lang: Lang, e: &crate::users::UserError) -> String {
    use crate::users::UserError::*;
    let fr = match e {
        InvalidEmail => "l'e-mail doit ressembler à nom@exemple.com (254 caractères au plus)",
        EmailTaken => "un utilisateur de la console a déjà cet e-mail",
        InvalidRole => "le rôle doit être owner, developer, finance ou support",
        WeakPassword => "le mot de passe doit compter de 12 à 256 caractères",
        InvalidInvitation => "ce lien d'invitation est inconnu, déjà utilisé ou expiré",
        LastOwner => "le dernier propriétaire ne peut pas être retiré",
        _ => return e.to_string(),
    };
    if lang == Lang::Fr {
        fr.to_string()
    } else {
        e.to_string()
    }
}

pub use mmc_http::escape::html as esc;

/// A field of an API answer as text to show (before escaping): a string as
/// it is, null as nothing, any other value as JSON.
pub fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        v => v.to_string(),
    }
}

/// The stylesheet, served at `/console/assets/console.css`.
pub const CSS: &str = include_str!("console.css");

/// A whole page: the navigation for a signed-in person, then `body`.
pub fn page(lang: Lang, session: Option<&Session>, title: &str, body: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html><html lang=\"{}\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · {}</title><link rel=\"stylesheet\" href=\"/console/assets/console.css\"></head><body>",
        lang.code(),
        esc(title),
        t(lang, "title")
    );
    if let Some(s) = session {
        let _ = write!(
            out,
            "<header><nav aria-label=\"{title}\"><strong>{merchant}</strong> \
             <a href=\"/console/overview\">{overview}</a> <a href=\"/console/payments\">{payments}</a>",
            overview = t(lang, "overview"),
            title = t(lang, "title"),
            merchant = esc(&s.merchant_name),
            payments = t(lang, "payments"),
        );
        let _ = write!(out, " <a href=\"/console/links\">{}</a>", t(lang, "links"));
        let scopes = s.role.scopes();
        if scopes.allow("GET", "/api/v1/bulk-payments/").is_ok() {
            let _ = write!(out, " <a href=\"/console/bulk\">{}</a>", t(lang, "bulk"));
        }
        if matches!(
            s.role,
            crate::users::Role::Developer | crate::users::Role::Owner
        ) {
            let _ = write!(
                out,
                " <a href=\"/console/developers\">{}</a>",
                t(lang, "developers")
            );
        }
        if matches!(
            s.role,
            crate::users::Role::Finance | crate::users::Role::Owner
        ) {
            let _ = write!(
                out,
                " <a href=\"/console/finance\">{}</a>",
                t(lang, "finance")
            );
        }
        let _ = write!(out, " <a href=\"/console/team\">{}</a>", t(lang, "team"));
        if s.role.manages_users() {
            let _ = write!(out, " <a href=\"/console/audit\">{}</a>", t(lang, "audit"));
        }
        let _ = write!(
            out,
            " <a href=\"/console/security\">{sec}</a></nav>\
             <form method=\"post\" action=\"/console/environment\" class=\"inline\">{csrf}\
             <label>{envw} <select name=\"environment\">{opts}</select></label> <button>{switch}</button></form>\
             <form method=\"post\" action=\"/console/sign-out\" class=\"inline\">{csrf}<button>{out_}</button></form>\
             <form method=\"get\" class=\"inline\"><label>{langw} <select name=\"lang\">{langs}</select></label> <button>{ok}</button></form>\
             <span class=\"who\">{email} ({role})</span></header>",
            langw = t(lang, "language"),
            langs = [(Lang::Fr, "Français"), (Lang::En, "English")]
                .iter()
                .map(|(l, name)| format!(
                    "<option value=\"{}\"{}>{name}</option>",
                    l.code(),
                    if *l == lang { " selected" } else { "" }
                ))
                .collect::<String>(),
            ok = t(lang, "ok"),
            sec = t(lang, "security"),
            csrf = csrf_field(s),
            envw = t(lang, "environment"),
            opts = ["test", "live"]
                .iter()
                .map(|e| format!(
                    "<option value=\"{e}\"{}>{}</option>",
                    if s.environment.as_str() == *e {
                        " selected"
                    } else {
                        ""
                    },
                    t(lang, &format!("env_{e}"))
                ))
                .collect::<String>(),
            switch = t(lang, "switch"),
            out_ = t(lang, "sign_out"),
            email = esc(&s.email),
            role = t(lang, &format!("role_{}", s.role.as_str())),
        );
    }
    if session.is_some_and(|s| s.environment == mmc_accounts::Environment::Test) {
        let _ = write!(
            out,
            "<p class=\"test-banner\" role=\"note\">{}</p>",
            t(lang, "test_banner")
        );
    }
    // On a phone each row of a table stacks as a card, each value under its
    // column's name (the stylesheet reads `data-label`).
    let body = label_cells(body);
    let _ = write!(
        out,
        "<main><h1>{}</h1>{body}</main></body></html>",
        esc(title)
    );
    out
}

/// Each body cell of each table labelled with its column's heading
/// (`data-label`), so that a row can be read as a card where the columns do
/// not fit. The console writes its tables itself: headings are escaped text,
/// and a cell's content never holds a raw `<td`.
pub fn label_cells(body: &str) -> String {
    let mut out = String::with_capacity(body.len() + body.len() / 8);
    let mut rest = body;
    while let Some(start) = rest.find("<table") {
        let Some(len) = rest[start..].find("</table>") else {
            break;
        };
        let end = start + len + "</table>".len();
        out.push_str(&rest[..start]);
        out.push_str(&label_table(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn label_table(table: &str) -> String {
    let Some((head, body)) = table.split_once("</thead>") else {
        return table.to_string();
    };
    let headings: Vec<String> = head
        .split("<th")
        .skip(1)
        .filter(|cell| cell.starts_with(['>', ' ']))
        .map(|cell| {
            let inner = cell.split_once('>').map(|(_, r)| r).unwrap_or_default();
            let inner = inner.split("</th>").next().unwrap_or_default();
            strip_tags(inner).replace('"', "&quot;")
        })
        .collect();
    let mut out = String::with_capacity(table.len() + table.len() / 4);
    out.push_str(head);
    out.push_str("</thead>");
    let mut col = 0usize;
    let mut rest = body;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let is_cell = (rest.starts_with("<td") || rest.starts_with("<th"))
            && matches!(rest.as_bytes().get(3), Some(b' ' | b'>'));
        if rest.starts_with("<tr") {
            col = 0;
        }
        if is_cell {
            let tag_end = rest.find('>').unwrap_or(rest.len() - 1);
            let tag = &rest[..tag_end];
            let span = tag
                .split_once("colspan=\"")
                .and_then(|(_, v)| v.split('"').next()?.parse::<usize>().ok())
                .unwrap_or(1);
            out.push_str(&rest[..3]);
            if let Some(h) = headings.get(col).filter(|h| !h.is_empty() && span == 1) {
                let _ = write!(out, " data-label=\"{h}\"");
            }
            col += span;
            rest = &rest[3..];
        } else {
            out.push('<');
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    out.replacen("<table", "<table tabindex=\"0\"", 1)
}

/// The text of an HTML fragment the console wrote (tags dropped).
fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for c in html.chars() {
        match c {
            '<' => inside = true,
            '>' => inside = false,
            c if !inside => out.push(c),
            _ => {}
        }
    }
    out.trim().to_string()
}

pub fn csrf_field(s: &Session) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(&s.csrf)
    )
}

/// A message box (`role=alert` for errors, read out by screen readers).
pub fn notice(text: &str, error: bool) -> String {
    if error {
        format!("<p class=\"error\" role=\"alert\">{}</p>", esc(text))
    } else {
        format!("<p class=\"ok\" role=\"status\">{}</p>", esc(text))
    }
}
