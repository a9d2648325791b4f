//! API keys for `developer` and `owner`: listed (never the key itself),
//! created with scopes (the key shown once) and revoked, through the same
//! [`crate::accounts::Accounts`] calls as `mmc keys`: a revoked key is
//! refused by this node from the next request (its cache entry goes with
//! it) and by every other node within the key cache's half second. A key
//! made here remembers who made it: maker-checker counts it as that person.

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use std::fmt::Write;

use super::html::{self, esc, t, when};
use super::sessions::Session;
use super::users::Role;
use super::web::{self, ConsoleError, Req, check_csrf};
use super::{Console, blocking};
use crate::accounts::Environment;
use crate::http::App;
use crate::scopes::{Scope, Scopes};

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

fn create_form(l: html::Lang, s: &Session) -> String {
    let boxes: String = grantable(s.role, s.environment)
        .iter()
        .map(|sc| {
            format!(
                "<label class=\"check\"><input type=\"checkbox\" name=\"scope\" value=\"{0}\"> {0}</label>",
                sc.as_str()
            )
        })
        .collect();
    format!(
        "<h2>{create}</h2><form method=\"post\" action=\"/console/developers/keys\">{csrf}\
         <fieldset><legend>{scopes} ({env})</legend>{boxes}</fieldset><button>{create}</button></form>",
        create = t(l, "create_key"),
        csrf = html::csrf_field(s),
        scopes = t(l, "scopes"),
        env = s.environment.as_str(),
    )
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
    let keys = blocking(|| app.accounts.list_keys(&s.merchant_id, s.environment))
        .map_err(|e| ConsoleError::Unavailable(e.to_string()))?;
    let team = blocking(|| c.users.list(&s.merchant_id)).map_err(super::auth::user_error)?;
    let made_by = |k: &crate::accounts::KeyInfo| match &k.made_by {
        None => t(l, "service_key").to_string(),
        Some(id) => team
            .iter()
            .find(|u| &u.id == id)
            .map(|u| u.email.clone())
            .unwrap_or_else(|| crate::accounts::actor_id(id)),
    };
    let (status, mut body) = opening(l, req, top);
    let _ = write!(
        body,
        "<h2>{}</h2><table><thead><tr><th>id</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "api_keys"),
        t(l, "scopes"),
        t(l, "made_by"),
        t(l, "created"),
        t(l, "status"),
        t(l, "action"),
    );
    for k in &keys {
        let state = match k.revoked_ms {
            Some(at) => format!("{} {}", t(l, "revoked"), when(at)),
            None => t(l, "active").to_string(),
        };
        let action = if k.revoked_ms.is_none() {
            format!(
                "<form method=\"post\" action=\"/console/developers/keys/{}/revoke\" class=\"inline\">{}<button class=\"danger\">{}</button></form>",
                esc(&k.id),
                html::csrf_field(s),
                t(l, "revoke")
            )
        } else {
            String::new()
        };
        let _ = write!(
            body,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{action}</td></tr>",
            esc(&k.id),
            esc(&k.scopes.to_string().replace(',', ", ")),
            esc(&made_by(k)),
            when(k.created_ms),
            esc(&state),
        );
    }
    body.push_str("</tbody></table>");
    body.push_str(&create_form(l, s));
    Ok(web::page_response(
        status,
        html::page(l, Some(s), t(l, "developers"), &body),
    ))
}

/// `POST /console/developers/keys`: a key with the chosen scopes, shown once.
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
    let Ok(scopes) = Scopes::parse(&chosen.join(",")) else {
        return page(
            app,
            c,
            req,
            s,
            Some((400, html::notice(t(l, "no_scope"), true))),
        );
    };
    let audit = ("key.create", None, req.client.as_deref());
    let created = blocking(|| {
        c.audit.act(
            s,
            audit,
            || {
                app.accounts
                    .create_person_key(&s.merchant_id, s.environment, scopes, &s.user_id)
            },
            |k| (Some(k.id.clone()), Some(scopes.to_string())),
        )
    })?
    .map_err(|e| ConsoleError::Unavailable(e.to_string()))?;
    blocking(|| c.audit.key_shown(s, &created.id, req.client.as_deref()))?;
    let shown = format!(
        "{}<p><code class=\"secret\">{}</code></p>",
        html::notice(t(l, "key_once"), false),
        esc(&created.key)
    );
    page(app, c, req, s, Some((201, shown)))
}

/// `POST /console/developers/keys/{id}/revoke`: refused from the next request.
pub fn revoke(
    app: &App,
    c: &Console,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    developer(s)?;
    check_csrf(req, s)?;
    // Only a key of this merchant and environment, as the page lists them.
    let listed = blocking(|| app.accounts.list_keys(&s.merchant_id, s.environment))
        .map_err(|e| ConsoleError::Unavailable(e.to_string()))?;
    if !listed.iter().any(|k| k.id == id) {
        return Err(ConsoleError::NotFound);
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
    Ok(web::redirect("/console/developers?done=revoke"))
}
