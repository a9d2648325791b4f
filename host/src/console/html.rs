//! The console's HTML: one layout, escaping, and the words in French and
//! English. Pages are plain forms and tables: no script runs, and the CSP
//! allows the service's own stylesheet and nothing else.

use std::fmt::Write;

use super::sessions::Session;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    En,
    Fr,
}

impl Lang {
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Fr => "fr",
        }
    }

    /// `?lang=` first, then the `mmc_lang` cookie, then Accept-Language.
    pub fn pick(query: Option<&str>, cookie: Option<&str>, accept: Option<&str>) -> Lang {
        let parse = |s: &str| match s.trim().get(..2) {
            Some(p) if p.eq_ignore_ascii_case("fr") => Some(Lang::Fr),
            Some(p) if p.eq_ignore_ascii_case("en") => Some(Lang::En),
            _ => None,
        };
        query
            .and_then(parse)
            .or_else(|| cookie.and_then(parse))
            .or_else(|| accept.and_then(|a| a.split(',').find_map(parse)))
            .unwrap_or(Lang::En)
    }
}

/// The console's words: (key, English, French).
const WORDS: &[(&str, &str, &str)] = &[
    ("title", "Merchant console", "Console marchand"),
    ("sign_in", "Sign in", "Se connecter"),
    ("sign_out", "Sign out", "Se déconnecter"),
    ("email", "Email", "E-mail"),
    ("password", "Password", "Mot de passe"),
    ("password_again", "Password again", "Mot de passe (encore)"),
    (
        "change_password",
        "Change password",
        "Changer de mot de passe",
    ),
    (
        "current_password",
        "Current password",
        "Mot de passe actuel",
    ),
    ("new_password", "New password", "Nouveau mot de passe"),
    (
        "wrong_password",
        "The current password is wrong.",
        "Le mot de passe actuel est incorrect.",
    ),
    (
        "password_changed",
        "Password changed. Your other sessions have ended.",
        "Mot de passe changé. Vos autres sessions ont été fermées.",
    ),
    (
        "code",
        "Authenticator code (if enabled)",
        "Code de l'application d'authentification (si activée)",
    ),
    (
        "bad_credentials",
        "Wrong email, password or code.",
        "E-mail, mot de passe ou code incorrect.",
    ),
    (
        "busy",
        "The console is busy. Try again in a few seconds.",
        "La console est occupée. Réessayez dans quelques secondes.",
    ),
    (
        "too_large",
        "This form is larger than the console accepts.",
        "Ce formulaire dépasse ce que la console accepte.",
    ),
    (
        "unread",
        "This form could not be read. Try again.",
        "Ce formulaire n’a pas pu être lu. Réessayez.",
    ),
    (
        "throttled",
        "Too many sign-in attempts. Try again in {} minutes.",
        "Trop de tentatives de connexion. Réessayez dans {} minutes.",
    ),
    ("payments", "Payments", "Paiements"),
    ("team", "Team", "Équipe"),
    ("audit", "Audit log", "Journal d'audit"),
    ("security", "Security", "Sécurité"),
    ("status", "Status", "Statut"),
    ("operator", "Operator", "Opérateur"),
    ("from", "From", "Du"),
    ("to", "To", "Au"),
    ("reference", "Reference", "Référence"),
    ("phone", "Phone", "Téléphone"),
    ("filter", "Filter", "Filtrer"),
    ("export_csv", "Export CSV", "Exporter en CSV"),
    ("amount", "Amount", "Montant"),
    ("created", "Created", "Créé le"),
    ("older", "Older", "Plus anciens"),
    ("none", "Nothing here.", "Rien ici."),
    ("any", "Any", "Tous"),
    ("refund", "Refund", "Rembourser"),
    ("cancel", "Cancel payment", "Annuler le paiement"),
    ("confirm", "Confirm", "Confirmer"),
    ("back", "Back", "Retour"),
    ("reason", "Reason", "Motif"),
    (
        "amount_blank",
        "Amount (blank: what remains)",
        "Montant (vide : le reste)",
    ),
    (
        "confirm_refund",
        "Refund {} of payment {}?",
        "Rembourser {} du paiement {} ?",
    ),
    (
        "confirm_cancel",
        "Cancel payment {}?",
        "Annuler le paiement {} ?",
    ),
    ("refunds", "Refunds", "Remboursements"),
    ("timeline", "Timeline", "Historique"),
    ("route", "Route", "Acheminement"),
    ("route_tried", "Tried before", "Essayé avant"),
    ("operator_calls", "Operator calls", "Appels à l'opérateur"),
    ("deliveries", "Webhook deliveries", "Livraisons de webhooks"),
    ("done", "Done.", "C'est fait."),
    ("users", "Users", "Utilisateurs"),
    ("role", "Role", "Rôle"),
    ("invite", "Invite", "Inviter"),
    ("remove", "Remove", "Retirer"),
    ("invited", "invited", "invité"),
    (
        "invite_link",
        "Send this one-time link to {}; it works once, for 72 hours:",
        "Envoyez ce lien à usage unique à {} ; il sert une fois, pendant 72 heures :",
    ),
    ("who", "Who", "Qui"),
    ("what", "What", "Quoi"),
    ("when", "When", "Quand"),
    ("where", "From", "Depuis"),
    ("action", "Action", "Action"),
    ("environment", "Environment", "Environnement"),
    ("switch", "Switch", "Changer"),
    (
        "totp_on",
        "Two-factor authentication is on.",
        "L'authentification à deux facteurs est activée.",
    ),
    (
        "totp_off",
        "Two-factor authentication is off.",
        "L'authentification à deux facteurs est désactivée.",
    ),
    (
        "totp_start",
        "Set up two-factor authentication",
        "Activer l'authentification à deux facteurs",
    ),
    (
        "totp_secret",
        "Add this key to your authenticator app, then enter the code it shows:",
        "Ajoutez cette clé à votre application d'authentification, puis saisissez le code affiché :",
    ),
    (
        "totp_needed",
        "Your role needs two-factor authentication to work in live: set it up under Security, then sign in again with a code.",
        "Votre rôle exige l'authentification à deux facteurs en live : activez-la dans Sécurité, puis reconnectez-vous avec un code.",
    ),
    (
        "forbidden",
        "Your role does not allow this",
        "Votre rôle ne le permet pas",
    ),
    (
        "csrf",
        "This form expired or came from another site. Reload the page and try again.",
        "Ce formulaire a expiré ou vient d'un autre site. Rechargez la page et réessayez.",
    ),
    ("not_found", "Not found.", "Introuvable."),
    (
        "choose_password",
        "Choose your password",
        "Choisissez votre mot de passe",
    ),
    (
        "passwords_differ",
        "The two passwords differ.",
        "Les deux mots de passe diffèrent.",
    ),
    (
        "set_password",
        "Set password and sign in",
        "Enregistrer et se connecter",
    ),
    ("error", "Something went wrong", "Une erreur s'est produite"),
    ("batch", "Bulk payout", "Paiement groupé"),
    ("sessions", "Sessions", "Sessions"),
    ("resend", "Resend", "Renvoyer"),
    ("attempts", "attempts", "tentatives"),
    ("end_session", "End", "Terminer"),
    (
        "bad_date",
        "{}: a date as YYYY-MM-DD, not '{}'.",
        "{} : une date au format AAAA-MM-JJ, pas « {} ».",
    ),
    (
        "bad_amount",
        "Amount: a whole number of at least 1, such as 2 000.",
        "Montant : un nombre entier d'au moins 1, par exemple 2 000.",
    ),
    (
        "bad_action",
        "action: approve or reject.",
        "action : approuver ou rejeter.",
    ),
    (
        "incomplete",
        "The confirmation is incomplete; start again.",
        "La confirmation est incomplète ; recommencez.",
    ),
    (
        "self_remove",
        "You cannot remove yourself.",
        "Vous ne pouvez pas vous retirer vous-même.",
    ),
    ("reset_access", "Reset access", "Réinitialiser l'accès"),
    (
        "reset_link",
        "{}'s password, second factor and sessions are cleared. Send them this one-time link to choose a new password; it works once, for 72 hours:",
        "Le mot de passe, le second facteur et les sessions de {} sont effacés. Envoyez-lui ce lien à usage unique pour choisir un nouveau mot de passe ; il sert une fois, pendant 72 heures :",
    ),
    (
        "self_reset",
        "Change your own password on the Security page.",
        "Changez votre propre mot de passe sur la page Sécurité.",
    ),
    ("all_remaining", "all that remains", "tout ce qui reste"),
    ("approve", "Approve", "Approuver"),
    ("reject", "Reject", "Rejeter"),
    ("completed_at", "Completed", "Réussi le"),
    ("refunded_total", "Refunded", "Remboursé"),
    (
        "refund_in_progress",
        "Refund in progress",
        "Remboursement en cours",
    ),
    (
        "refund_remaining",
        "Can still be refunded",
        "Encore remboursable",
    ),
    (
        "amount_at_most",
        "Amount (at most {})",
        "Montant ({} au plus)",
    ),
    (
        "refund_too_much",
        "{} is more than can still be refunded ({}).",
        "{} dépasse ce qui peut encore être remboursé ({}).",
    ),
    (
        "nothing_to_refund",
        "This payment has been refunded in full: nothing remains to refund.",
        "Ce paiement a été remboursé en totalité : il ne reste rien à rembourser.",
    ),
    (
        "not_refundable",
        "Only a completed payment can be refunded; this one is: {}.",
        "Seul un paiement réussi peut être remboursé ; celui-ci est : {}.",
    ),
    (
        "not_cancellable",
        "Only a payment still in progress can be cancelled; this one is: {}.",
        "Seul un paiement encore en cours peut être annulé ; celui-ci est : {}.",
    ),
    (
        "refund_instead",
        "Refund it instead.",
        "Remboursez-le plutôt.",
    ),
    (
        "confirm_approve",
        "Approve batch {}: {} payouts, {} in all? They are paid at once.",
        "Approuver le lot {} : {} paiements, {} au total ? Ils sont payés aussitôt.",
    ),
    (
        "not_waiting",
        "This batch no longer waits for approval; it is: {}.",
        "Ce lot n'attend plus d'approbation ; il est : {}.",
    ),
    (
        "batch_approved",
        "Batch approved: its payouts are being paid.",
        "Lot approuvé : ses paiements sont en cours.",
    ),
    (
        "batch_rejected",
        "Batch rejected: nothing will be paid.",
        "Lot rejeté : rien ne sera payé.",
    ),
    ("role_owner", "Owner", "Propriétaire"),
    ("role_developer", "Developer", "Développeur"),
    ("role_finance", "Finance", "Finance"),
    ("role_support", "Support", "Support"),
    (
        "confirm_remove",
        "Remove {} ({}) from the team? They lose access at once and their sessions end.",
        "Retirer {} ({}) de l'équipe ? Cette personne perd l'accès aussitôt et ses sessions sont fermées.",
    ),
    (
        "confirm_reset",
        "Reset the access of {} ({})? Their password, second factor and sessions are cleared, they get a new one-time link and may approve no payout for a day.",
        "Réinitialiser l'accès de {} ({}) ? Son mot de passe, son second facteur et ses sessions sont effacés ; cette personne reçoit un nouveau lien à usage unique et ne peut approuver aucun paiement pendant un jour.",
    ),
    (
        "member_removed",
        "{} was removed from the team; their sessions have ended.",
        "{} a été retiré de l'équipe ; ses sessions ont été fermées.",
    ),
    (
        "already_done",
        "This was already done: nothing was repeated.",
        "C'était déjà fait : rien n'a été répété.",
    ),
    ("time_zone", "Time zone", "Fuseau horaire"),
    (
        "time_zone_label",
        "Times on the console are shown in",
        "Les heures de la console sont affichées en",
    ),
    ("save", "Save", "Enregistrer"),
    (
        "zone_saved",
        "Time zone saved: every time is now shown in it.",
        "Fuseau horaire enregistré : toutes les heures y sont désormais affichées.",
    ),
    (
        "bad_zone",
        "Choose a time zone from the list.",
        "Choisissez un fuseau horaire dans la liste.",
    ),
    (
        "forbidden_role",
        "Your role ({}) does not allow this. An owner of your team can do it, or give you a role that may.",
        "Votre rôle ({}) ne le permet pas. Un propriétaire de votre équipe peut le faire, ou vous donner un rôle qui le permet.",
    ),
    (
        "unavailable",
        "The console cannot answer right now. Nothing was changed; try again in a minute.",
        "La console ne peut pas répondre pour l'instant. Rien n'a été modifié ; réessayez dans une minute.",
    ),
    (
        "next_second_factor",
        "Set up a second factor",
        "Configurer un second facteur",
    ),
    ("next_team", "See who is on your team", "Voir votre équipe"),
    (
        "next_reload",
        "Start again from the overview",
        "Recommencer depuis l'aperçu",
    ),
    ("next_payments", "Go to the payments", "Aller aux paiements"),
    ("env_test", "Test", "Test"),
    ("env_live", "Live", "Production"),
    ("language", "Language", "Langue"),
    ("ok", "OK", "OK"),
    (
        "payment_cancelled",
        "Payment cancelled.",
        "Paiement annulé.",
    ),
    (
        "resent",
        "The event is being delivered again to your webhooks.",
        "L'événement est de nouveau livré à vos webhooks.",
    ),
    (
        "refund_asked",
        "Refund requested: its status shows below as it goes.",
        "Remboursement demandé : son statut s'affiche ci-dessous à mesure.",
    ),
    ("search", "Reference or phone", "Référence ou téléphone"),
    (
        "search_hint",
        "start of a reference, end of a phone",
        "début de référence, fin de numéro",
    ),
    (
        "bad_search",
        "Search: at most 100 characters.",
        "Recherche : 100 caractères au plus.",
    ),
    (
        "test_banner",
        "Test data — nothing here moves real money",
        "Données de test — rien ici ne déplace d'argent réel",
    ),
];

/// Every word of the console: this file's, then each area's own table.
fn all_words() -> impl Iterator<Item = &'static (&'static str, &'static str, &'static str)> {
    WORDS
        .iter()
        .chain(super::words::TABLES.iter().flat_map(|t| t.iter()))
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
pub fn user_error(lang: Lang, e: &super::users::UserError) -> String {
    use super::users::UserError::*;
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

pub use crate::http::escape::html as esc;

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
            super::users::Role::Developer | super::users::Role::Owner
        ) {
            let _ = write!(
                out,
                " <a href=\"/console/developers\">{}</a>",
                t(lang, "developers")
            );
        }
        if matches!(
            s.role,
            super::users::Role::Finance | super::users::Role::Owner
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
    if session.is_some_and(|s| s.environment == crate::accounts::Environment::Test) {
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

#[cfg(test)]
mod tests {
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
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/console");
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
}
