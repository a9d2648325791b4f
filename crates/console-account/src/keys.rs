//! API keys for `developer` and `owner`: listed (never the key itself),
//! created with a name and scopes (the key shown once, on the page the form
//! redirects to) and revoked once confirmed, through the same
//! [`mmc_accounts::Accounts`] calls as `mmc keys`: a revoked key is
//! refused by this node from the next request (its cache entry goes with
//! it) and by every other node within the key cache's half second. A key
//! made here remembers who made it: maker-checker counts it as that person.

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use std::fmt::Write;

use mmc_accounts::scopes::{Scope, Scopes};
use mmc_accounts::{Environment, KeyInfo, KeyRequest, PersonKey};
use mmc_console_kit::format::Zone;
use mmc_console_kit::html::{self, esc, t};
use mmc_console_kit::sessions::Session;
use mmc_console_kit::users::Role;
use mmc_console_kit::web::{self, ConsoleError, Req, check_csrf};
use mmc_console_kit::{Console, blocking};
use mmc_http::App;

type Resp = Response<Full<Bytes>>;

/// Keys and webhooks are the developer's and the owner's.
pub fn developer(s: &Session) -> Result<(), ConsoleError> {
    match s.role {
        Role::Developer | Role::Owner => Ok(()),
        _ => Err(ConsoleError::Forbidden("developer or owner role".into())),
    }
}

/// The scopes a person may give a key: an owner any; a developer any in
/// test (no money moves there), in live only their role's own, so no key
/// of theirs moves money their role may not.
pub fn grantable(role: Role, environment: Environment) -> Scopes {
    match (role, environment) {
        (Role::Owner, _) | (Role::Developer, Environment::Test) => Scopes::all(),
        (role, _) => role.scopes(),
    }
}

/// The start of a developer page: its status and what a form put above it
/// (`top`, else 200 and nothing), the notice of an action just done
/// (`?done=`), and the links between the pages.
pub fn opening(l: html::Lang, req: &Req, top: Option<(u16, String)>) -> (u16, String) {
    let (status, mut body) = top.unwrap_or((200, String::new()));
    if let Some(done) = req.param("done") {
        body.push_str(&html::notice(&format!("{} ({done})", t(l, "done")), false));
    }
    body.push_str(&tabs(l));
    (status, body)
}

/// Links between the developer pages.
pub fn tabs(l: html::Lang) -> String {
    format!(
        "<p><a href=\"/console/developers\">{}</a> · <a href=\"/console/developers/webhooks\">{}</a> · \
         <a href=\"/console/developers/events\">{}</a></p>",
        t(l, "api_keys"),
        t(l, "endpoints"),
        t(l, "deliveries")
    )
}

/// The developer pages' words: (key, English, French), looked up by [`mmc_console_kit::html::t`].
pub const WORDS: &[(&str, &str, &str)] = &[
    ("keys_name", "Name", "Nom"),
    ("keys_key", "Key", "Clé"),
    ("keys_never", "never", "jamais"),
    (
        "keys_name_hint",
        "What the key is for, e.g. \"Shop website\" (1 to 64 characters)",
        "À quoi sert la clé, p. ex. « Site de la boutique » (1 à 64 caractères)",
    ),
    (
        "keys_bad_name",
        "Give the key a name of 1 to 64 characters, to tell it apart later.",
        "Donnez à la clé un nom de 1 à 64 caractères, pour la reconnaître ensuite.",
    ),
    (
        "keys_new_title",
        "Your new API key",
        "Votre nouvelle clé d'API",
    ),
    (
        "keys_gone",
        "This key was shown once and is never shown again. If it was not saved, revoke it and create another.",
        "Cette clé a été affichée une fois et ne le sera plus jamais. Si elle n'a pas été enregistrée, révoquez-la et créez-en une autre.",
    ),
    ("keys_back", "Back to the API keys", "Retour aux clés d'API"),
    (
        "keys_revoke_title",
        "Revoke an API key",
        "Révoquer une clé d'API",
    ),
    (
        "keys_revoke_ask",
        "Revoke the key \"{}\" ({})? Every program that uses it is refused from its next request; this cannot be undone.",
        "Révoquer la clé « {} » ({}) ? Tout programme qui l'utilise sera refusé dès sa prochaine requête ; c'est irréversible.",
    ),
    ("keys_revoke_yes", "Revoke this key", "Révoquer cette clé"),
    ("keys_keep", "Keep it", "La garder"),
    (
        "keys_revoked_done",
        "The key \"{}\" ({}) is revoked: the API refuses it from now on.",
        "La clé « {} » ({}) est révoquée : l'API la refuse désormais.",
    ),
    ("keys_unnamed", "(no name)", "(sans nom)"),
];

/// What a new key is kept under until the page that shows it once.
const KEY_ONCE: &str = "api_key";

fn create_form(l: html::Lang, s: &Session, req: &Req) -> String {
    let chosen = req.fields("scope");
    let boxes: String = grantable(s.role, s.environment)
        .iter()
        .map(|sc| {
            let checked = if chosen.iter().any(|c| c == sc.as_str()) {
                " checked"
            } else {
                ""
            };
            format!(
                "<label class=\"check\"><input type=\"checkbox\" name=\"scope\" value=\"{0}\"{checked}> {0}</label>",
                sc.as_str()
            )
        })
        .collect();
    format!(
        "<h2>{create}</h2><form method=\"post\" action=\"/console/developers/keys\">{csrf}\
         <input type=\"hidden\" name=\"idempotency_key\" value=\"{request}\">\
         <label>{name} <small>{hint}</small><input name=\"name\" required maxlength=\"{max}\" value=\"{value}\"></label>\
         <fieldset><legend>{scopes} ({env})</legend>{boxes}</fieldset><button>{create}</button></form>",
        create = t(l, "create_key"),
        csrf = html::csrf_field(s),
        request = uuid::Uuid::new_v4(),
        name = t(l, "keys_name"),
        hint = t(l, "keys_name_hint"),
        max = mmc_accounts::MAX_KEY_NAME_CHARS,
        value = esc(&req.field("name").unwrap_or_default()),
        scopes = t(l, "scopes"),
        env = s.environment.as_str(),
    )
}

/// A key as people tell it apart: its name and its first characters.
fn named(l: html::Lang, k: &KeyInfo) -> (String, String) {
    let name = k
        .name
        .clone()
        .unwrap_or_else(|| t(l, "keys_unnamed").to_string());
    let prefix = k
        .prefix
        .as_ref()
        .map_or_else(|| k.id.clone(), |p| format!("{p}…"));
    (name, prefix)
}

fn environment_keys(app: &App, s: &Session) -> Result<Vec<KeyInfo>, ConsoleError> {
    blocking(|| app.accounts.list_keys(&s.merchant_id, s.environment))
        .map_err(|e| ConsoleError::Unavailable(e.to_string()))
}

/// `GET /console/developers`: the environment's keys, and a form for a new one.
pub fn page(
    app: &App,
    c: &Console,
    req: &Req,
    s: &Session,
    top: Option<(u16, String)>,
) -> Result<Resp, ConsoleError> {
    developer(s)?;
    let l = req.lang;
    let zone = Zone::Utc;
    let keys = environment_keys(app, s)?;
    let team =
        blocking(|| c.users.list(&s.merchant_id)).map_err(mmc_console_kit::web::user_error)?;
    let made_by = |k: &KeyInfo| match &k.made_by {
        None => t(l, "service_key").to_string(),
        Some(id) => team
            .iter()
            .find(|u| &u.id == id)
            .map(|u| u.email.clone())
            .unwrap_or_else(|| mmc_accounts::actor_id(id)),
    };
    let (status, mut body) = opening(l, req, top);
    // What the revocation just done was (a reload shows it again, and does nothing).
    if let Some(k) = req
        .param("revoked")
        .and_then(|id| keys.iter().find(|k| k.id == id && k.revoked_ms.is_some()))
    {
        let (name, prefix) = named(l, k);
        body.push_str(&html::notice(
            &html::tf(l, "keys_revoked_done", &[&name, &prefix]),
            false,
        ));
    }
    let _ = write!(
        body,
        "<h2>{}</h2><table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "api_keys"),
        t(l, "keys_name"),
        t(l, "keys_key"),
        t(l, "scopes"),
        t(l, "made_by"),
        t(l, "created"),
        t(l, "last_used"),
        t(l, "status"),
        t(l, "action"),
    );
    for k in &keys {
        let state = match k.revoked_ms {
            Some(at) => format!("{} {}", t(l, "revoked"), zone.when(at)),
            None => t(l, "active").to_string(),
        };
        let action = if k.revoked_ms.is_none() {
            format!(
                "<a href=\"/console/developers/keys/{}/revoke\">{}…</a>",
                esc(&k.id),
                t(l, "revoke")
            )
        } else {
            String::new()
        };
        let last_used = k
            .last_used_ms
            .map_or_else(|| t(l, "keys_never").to_string(), |ms| zone.when(ms));
        let (name, prefix) = named(l, k);
        let _ = write!(
            body,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{action}</td></tr>",
            esc(&name),
            esc(&prefix),
            esc(&k.scopes.to_string().replace(',', ", ")),
            esc(&made_by(k)),
            esc(&zone.when(k.created_ms)),
            esc(&last_used),
            esc(&state),
        );
    }
    body.push_str("</tbody></table>");
    body.push_str(&create_form(l, s, req));
    Ok(web::page_response(
        status,
        html::page(l, Some(s), t(l, "developers"), &body),
    ))
}

/// The session's cookie token: what the new key is sealed under until shown.
fn session_token(req: &Req) -> Result<String, ConsoleError> {
    req.cookie(mmc_console_kit::sessions::COOKIE)
        .ok_or(ConsoleError::NotSignedIn)
}

/// Where a key just made is shown, once.
const SHOWN: &str = "/console/developers/keys/new";

/// `POST /console/developers/keys`: a named key with the chosen scopes,
/// then a redirect to the page that shows it once. The form's idempotency
/// key makes a second submit of the same form (a reload, a double click)
/// lead to the same key's page, not to a second key.
pub fn create(app: &App, c: &Console, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    developer(s)?;
    check_csrf(req, s)?;
    let l = req.lang;
    let allowed = grantable(s.role, s.environment);
    let mut chosen = Vec::new();
    for name in req.fields("scope") {
        match Scope::parse(&name) {
            Some(sc) if allowed.contains(sc) => chosen.push(name),
            _ => return Err(ConsoleError::Forbidden(name)),
        }
    }
    let refused = |key| page(app, c, req, s, Some((400, html::notice(t(l, key), true))));
    let Ok(name) = mmc_accounts::key_name(&req.field("name").unwrap_or_default()) else {
        return refused("keys_bad_name");
    };
    let Ok(scopes) = Scopes::parse(&chosen.join(",")) else {
        return refused("no_scope");
    };
    let request = req.field("idempotency_key");
    if let Some(request) = &request {
        let before = blocking(|| {
            app.accounts
                .requested_key(&s.merchant_id, &s.user_id, request)
        })
        .map_err(|e| ConsoleError::Unavailable(e.to_string()))?;
        if before.is_some() {
            return Ok(web::redirect(SHOWN));
        }
    }
    let asked = KeyRequest {
        user_id: &s.user_id,
        name: &name,
        request: request.as_deref(),
    };
    let audit = ("key.create", None, req.client.as_deref());
    let made = blocking(|| {
        c.audit.act(
            s,
            audit,
            || {
                app.accounts
                    .create_person_key(&s.merchant_id, s.environment, scopes, &asked)
            },
            |made| match made {
                PersonKey::Made(k) => (Some(k.id.clone()), Some(format!("{name}: {scopes}"))),
                PersonKey::MadeBefore { id } => (Some(id.clone()), None),
            },
        )
    })?
    .map_err(|e| ConsoleError::Unavailable(e.to_string()))?;
    if let PersonKey::Made(k) = made {
        let token = session_token(req)?;
        let kept = format!("{}\n{}", k.id, k.key);
        blocking(|| c.users.keep_once(&token, KEY_ONCE, &kept))
            .map_err(mmc_console_kit::web::user_error)?;
    }
    Ok(web::redirect(SHOWN))
}

/// `GET /console/developers/keys/new`: the key just made, shown this once;
/// a reload finds it gone, and says so.
pub fn shown(app: &App, c: &Console, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    developer(s)?;
    let l = req.lang;
    let token = session_token(req)?;
    let kept = blocking(|| c.users.take_once(&token, KEY_ONCE))
        .map_err(mmc_console_kit::web::user_error)?;
    let back = format!(
        "<p><a href=\"/console/developers\">{}</a></p>",
        t(l, "keys_back")
    );
    let Some((id, key)) = kept.as_deref().and_then(|k| k.split_once('\n')) else {
        let body = format!("{}{back}", html::notice(t(l, "keys_gone"), false));
        return Ok(web::page_response(
            200,
            html::page(l, Some(s), t(l, "keys_new_title"), &body),
        ));
    };
    let name = environment_keys(app, s)?
        .iter()
        .find(|k| k.id == id)
        .map(|k| named(l, k).0)
        .unwrap_or_default();
    blocking(|| c.audit.key_shown(s, id, req.client.as_deref()))?;
    let body = format!(
        "{}<p>{}: <strong>{}</strong></p><p><code class=\"secret\">{}</code></p>{back}",
        html::notice(t(l, "key_once"), false),
        t(l, "keys_name"),
        esc(&name),
        esc(key)
    );
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "keys_new_title"), &body),
    ))
}

/// The active key `id` of this merchant and environment, as the page lists them.
fn listed_key(app: &App, s: &Session, id: &str) -> Result<KeyInfo, ConsoleError> {
    environment_keys(app, s)?
        .into_iter()
        .find(|k| k.id == id)
        .ok_or(ConsoleError::NotFound)
}

/// `GET /console/developers/keys/{id}/revoke`: what revoking would do, to confirm.
pub fn revoke_page(app: &App, req: &Req, s: &Session, id: &str) -> Result<Resp, ConsoleError> {
    developer(s)?;
    let l = req.lang;
    let k = listed_key(app, s, id)?;
    if k.revoked_ms.is_some() {
        return Ok(web::redirect(&format!(
            "/console/developers?revoked={}",
            url_part(id)
        )));
    }
    let (name, prefix) = named(l, &k);
    let body = format!(
        "<p>{ask}</p><form method=\"post\" action=\"/console/developers/keys/{id}/revoke\">{csrf}\
         <button class=\"danger\">{yes}</button> <a href=\"/console/developers\">{keep}</a></form>",
        ask = html::tf(l, "keys_revoke_ask", &[&name, &prefix]),
        id = esc(id),
        csrf = html::csrf_field(s),
        yes = t(l, "keys_revoke_yes"),
        keep = t(l, "keys_keep"),
    );
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "keys_revoke_title"), &body),
    ))
}

fn url_part(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// `POST /console/developers/keys/{id}/revoke`: refused from the next
/// request; then the list, saying which key was revoked. A key already
/// revoked is left as it is (a form sent again changes nothing).
pub fn revoke(
    app: &App,
    c: &Console,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    developer(s)?;
    check_csrf(req, s)?;
    let done = format!("/console/developers?revoked={}", url_part(id));
    // Only a key of this merchant and environment, as the page lists them.
    if listed_key(app, s, id)?.revoked_ms.is_some() {
        return Ok(web::redirect(&done));
    }
    let audit = ("key.revoke", Some(id), req.client.as_deref());
    blocking(|| {
        c.audit.act(
            s,
            audit,
            || app.accounts.revoke_merchant_key(&s.merchant_id, id),
            |_| (None, None),
        )
    })?
    .map_err(|e| ConsoleError::Unavailable(e.to_string()))?;
    Ok(web::redirect(&done))
}
