//! The team: the merchant's users and their roles; owners invite, reset
//! and remove people (a reset or a removal ends their sessions at once) and
//! read the audit log. An invitation's link, and a reset's new one, go to
//! the member by mail when the service has a relay, so the owner never
//! holds them; after a reset the member approves no payout for a day, as
//! the page and the log say.

use std::fmt::Write;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;

use mmc_common::clock::system_now_ms;
use mmc_console_kit::audit::Outcome;
use mmc_console_kit::format::Zone;
use mmc_console_kit::html::plain;
use mmc_console_kit::html::role_word;
use mmc_console_kit::html::{self, esc, t, tf};
use mmc_console_kit::sessions::Session;
use mmc_console_kit::users::{Role, UserError};
use mmc_console_kit::web::user_error;
use mmc_console_kit::web::{self, ConsoleError, Req, check_csrf};
use mmc_console_kit::{Console, blocking};

type Resp = Response<Full<Bytes>>;

fn owner_only(s: &Session) -> Result<(), ConsoleError> {
    if s.role.manages_users() {
        Ok(())
    } else {
        Err(ConsoleError::Forbidden("owner".into()))
    }
}

pub fn page(
    c: &Console,
    req: &Req,
    s: &Session,
    notice: Option<(u16, String)>,
) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let users = blocking(|| c.users.list(&s.merchant_id)).map_err(user_error)?;
    let holds =
        blocking(|| c.users.approval_holds(&s.merchant_id, system_now_ms())).map_err(user_error)?;
    let mut body = match &notice {
        Some((status, m)) => html::notice(m, *status >= 400),
        None => match req.param("done").as_deref() {
            Some("removed") => html::notice(
                &plain(
                    l,
                    "member_removed",
                    &[&req.param("who").unwrap_or_default()],
                ),
                false,
            ),
            Some("zone") => html::notice(t(l, "zone_saved"), false),
            _ => String::new(),
        },
    };
    let _ = write!(
        body,
        "<table><thead><tr><th>{}</th><th>{}</th><th></th></tr></thead><tbody>",
        t(l, "email"),
        t(l, "role")
    );
    for u in &users {
        // Each leads to a confirmation that says what it does.
        let remove = if s.role.manages_users() && u.id != s.user_id {
            format!(
                "<a class=\"button\" href=\"/console/team/{id}/reset\">{reset}</a> \
                 <a class=\"button danger\" href=\"/console/team/{id}/remove\">{remove}</a>",
                id = esc(&u.id),
                reset = t(l, "reset_access"),
                remove = t(l, "remove")
            )
        } else {
            String::new()
        };
        let _ = write!(
            body,
            "<tr><td>{}{}{}</td><td>{}</td><td>{remove}</td></tr>",
            esc(&u.email),
            if u.invited {
                format!(" ({})", t(l, "invited"))
            } else {
                String::new()
            },
            match holds.get(&u.id) {
                Some(until) => format!(
                    "<br><small class=\"hold\">{}</small>",
                    esc(&plain(l, "approvals_held", &[&s.zone.when(*until)]))
                ),
                None => String::new(),
            },
            role_word(l, u.role)
        );
    }
    body.push_str("</tbody></table>");
    if s.role.manages_users() {
        let roles: String = Role::ALL
            .iter()
            // The least role unless the owner chooses another.
            .map(|r| {
                let selected = if *r == Role::Support { " selected" } else { "" };
                format!(
                    "<option value=\"{}\"{selected}>{}</option>",
                    r.as_str(),
                    role_word(l, *r)
                )
            })
            .collect();
        let _ = write!(
            body,
            "<h2>{inv}</h2><form method=\"post\" action=\"/console/team/invite\">{csrf}<fieldset>\
             <label>{e}<input name=\"email\" type=\"email\" required></label>\
             <label>{r}<select name=\"role\">{roles}</select></label><button>{inv}</button></fieldset></form>",
            inv = t(l, "invite"),
            csrf = html::csrf_field(s),
            e = t(l, "email"),
            r = t(l, "role"),
        );
    }
    if s.role.manages_users() {
        body.push_str(&sessions_section(c, l, s)?);
        body.push_str(&zone_form(l, s));
    }
    let status = notice.map_or(200, |(st, _)| st);
    Ok(web::page_response(
        status,
        html::page(l, Some(s), t(l, "team"), &body),
    ))
}

/// Owners see who is signed in, from where, and can end a session.
fn sessions_section(c: &Console, l: html::Lang, s: &Session) -> Result<String, ConsoleError> {
    let sessions = blocking(|| c.sessions.list(&s.merchant_id))?;
    let mut out = format!(
        "<h2>{}</h2><table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th></th></tr></thead><tbody>",
        t(l, "sessions"),
        t(l, "who"),
        t(l, "when"),
        t(l, "environment"),
        t(l, "where")
    );
    for v in &sessions {
        let end = if v.token_hash == s.token_hash {
            String::new()
        } else {
            format!(
                "<form method=\"post\" action=\"/console/team/sessions/{}/end\">{}<button class=\"danger\">{}</button></form>",
                esc(&v.token_hash),
                html::csrf_field(s),
                t(l, "end_session")
            )
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{end}</td></tr>",
            esc(&v.email),
            s.zone.when(v.created_ms),
            esc(&v.environment),
            esc(v.client.as_deref().unwrap_or_default()),
        );
    }
    out.push_str("</tbody></table>");
    Ok(out)
}

/// `POST /console/team/sessions/{hash}/end` (owners).
pub fn end_session(
    c: &Console,
    req: &Req,
    s: &Session,
    token_hash: &str,
) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    owner_only(s)?;
    let end = || match c.sessions.end(&s.merchant_id, token_hash) {
        Ok(Some(email)) => Ok(email),
        Ok(None) => Err(ConsoleError::NotFound),
        Err(e) => Err(e.into()),
    };
    let audit = ("session.end", None, req.client.as_deref());
    blocking(|| {
        c.audit
            .act(s, audit, end, |email| (None, Some(email.clone())))
    })??;
    Ok(web::redirect("/console/team"))
}

/// `POST /console/team/invite` (owners). With a mail relay the one-time
/// link goes to the new member's address and the owner never sees it (an
/// owner who could open it would become a second person of their own,
/// able to approve their own batches); without one it is shown, once.
pub async fn invite(
    c: &Console,
    base_url: &str,
    req: &Req,
    s: &Session,
) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    owner_only(s)?;
    let l = req.lang;
    let email = req.field("email").unwrap_or_default();
    let Some(role) = req.field("role").and_then(|r| Role::parse(&r)) else {
        return page(
            c,
            req,
            s,
            Some((400, html::user_error(l, &UserError::InvalidRole))),
        );
    };
    let client = req.client.as_deref();
    let entry = blocking(|| c.audit.begin(s, "user.invite", None, None, client))?;
    let invitation = match blocking(|| c.users.invite(&s.merchant_id, &email, role)) {
        Ok(i) => i,
        Err(e) => {
            let why = e.to_string();
            blocking(|| c.audit.finish(entry, Outcome::Refused, None, Some(&why)))?;
            return match e {
                e @ UserError::Storage(_) => Err(user_error(e)),
                e => page(c, req, s, Some((400, html::user_error(l, &e)))),
            };
        }
    };
    let invited = format!("{} as {}", invitation.user.email, role.as_str());
    let subject = Some(invitation.user.id.as_str());
    let Some(mailer) = &c.mailer else {
        let detail = format!("{invited}; link shown to {}", s.email);
        blocking(|| c.audit.finish(entry, Outcome::Done, subject, Some(&detail)))?;
        return Ok(link_page(
            req,
            s,
            base_url,
            &invitation,
            ("invite", "invite_link"),
            "",
        ));
    };
    let to = invitation.user.email.clone();
    let link = format!("{base_url}{}", invitation.path);
    let mail_subject = plain(l, "invite_mail_subject", &[&s.merchant_name]);
    let text = plain(
        l,
        "invite_mail_body",
        &[&s.email, &s.merchant_name, role_word(l, role), &link],
    );
    let (status, detail, notice) = match mailer.send(&to, &mail_subject, text).await {
        Ok(()) => (
            201,
            format!("{invited}; link mailed to {to}"),
            plain(l, "invite_mailed", &[&to]),
        ),
        Err(e) => (
            502,
            format!("{invited}; the link could not be mailed ({e})"),
            plain(l, "invite_not_mailed", &[&to, &e.to_string()]),
        ),
    };
    blocking(|| c.audit.finish(entry, Outcome::Done, subject, Some(&detail)))?;
    page(c, req, s, Some((status, notice)))
}

/// The page that shows a one-time sign-in link, once, with what else the
/// owner should know (`more`, plain text).
fn link_page(
    req: &Req,
    s: &Session,
    base_url: &str,
    invitation: &mmc_console_kit::users::Invitation,
    (title, says): (&str, &str),
    more: &str,
) -> Resp {
    let l = req.lang;
    let link = format!("{base_url}{}", invitation.path);
    let more = if more.is_empty() {
        String::new()
    } else {
        format!("<p>{}</p>", esc(more))
    };
    let body = format!(
        "<p role=\"status\">{}</p><p><code id=\"invite-link\">{}</code></p>{more}<p><a href=\"/console/team\">{}</a></p>",
        tf(l, says, &[&invitation.user.email]),
        esc(&link),
        t(l, "back")
    );
    web::page_response(201, html::page(l, Some(s), t(l, title), &body))
}

/// `POST /console/team/{id}/reset` (owners): a member who lost their
/// password or authenticator gets a new one-time link; their password,
/// second factor and sessions end in the same write, and they approve no
/// payout for [`APPROVAL_HOLD_MS`](mmc_console_kit::users::APPROVAL_HOLD_MS). With a
/// mail relay the link goes to the member's address and the owner never
/// sees it; without one it is shown to the owner, once.
pub async fn reset(
    c: &Console,
    base_url: &str,
    req: &Req,
    s: &Session,
    user_id: &str,
) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    owner_only(s)?;
    let l = req.lang;
    if user_id == s.user_id {
        return page(c, req, s, Some((400, t(l, "self_reset").into())));
    }
    if !claim_form(c, req, s)? {
        return page(c, req, s, Some((409, t(l, "already_done").into())));
    }
    let client = req.client.as_deref();
    let entry = blocking(|| c.audit.begin(s, "user.reset", Some(user_id), None, client))?;
    let invitation = match blocking(|| c.users.reset_member(&s.merchant_id, user_id)) {
        Ok(i) => i,
        Err(e) => {
            let why = e.to_string();
            blocking(|| c.audit.finish(entry, Outcome::Refused, None, Some(&why)))?;
            return Err(match e {
                UserError::UnknownUser => ConsoleError::NotFound,
                e => user_error(e),
            });
        }
    };
    let email = invitation.user.email.clone();
    let held = s
        .zone
        .when(invitation.approvals_held_until_ms.unwrap_or_default());
    let hold = plain(l, "reset_hold", &[&email, &held]);
    let Some(mailer) = &c.mailer else {
        let detail = format!(
            "{email}; link shown to {}; approvals held until {held}",
            s.email
        );
        blocking(|| c.audit.finish(entry, Outcome::Done, None, Some(&detail)))?;
        return Ok(link_page(
            req,
            s,
            base_url,
            &invitation,
            ("reset_access", "reset_link"),
            &hold,
        ));
    };
    let link = format!("{base_url}{}", invitation.path);
    let subject = plain(l, "reset_mail_subject", &[&s.merchant_name]);
    let text = plain(
        l,
        "reset_mail_body",
        &[&s.email, &s.merchant_name, &link, &held, &s.email],
    );
    let (status, detail, notice) = match mailer.send(&email, &subject, text).await {
        Ok(()) => (
            200,
            format!("{email}; link mailed to {email}; approvals held until {held}"),
            format!("{} {hold}", plain(l, "reset_mailed", &[&email])),
        ),
        Err(e) => (
            502,
            format!("{email}; the link could not be mailed ({e}); approvals held until {held}"),
            format!(
                "{} {hold}",
                plain(l, "reset_not_mailed", &[&email, &e.to_string()])
            ),
        ),
    };
    blocking(|| c.audit.finish(entry, Outcome::Done, None, Some(&detail)))?;
    page(c, req, s, Some((status, notice)))
}

/// `POST /console/team/{id}/remove` (owners).
pub fn remove(c: &Console, req: &Req, s: &Session, user_id: &str) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    owner_only(s)?;
    if user_id == s.user_id {
        return page(c, req, s, Some((400, t(req.lang, "self_remove").into())));
    }
    if !claim_form(c, req, s)? {
        return page(c, req, s, Some((409, t(req.lang, "already_done").into())));
    }
    let audit = ("user.remove", Some(user_id), req.client.as_deref());
    let removed = blocking(|| {
        c.audit.act(
            s,
            audit,
            || c.users.remove(&s.merchant_id, user_id),
            |u| (None, Some(u.email.clone())),
        )
    })?;
    let gone = match removed {
        Ok(u) => u.email,
        Err(e @ mmc_console_kit::users::UserError::LastOwner) => {
            return page(c, req, s, Some((409, html::user_error(req.lang, &e))));
        }
        Err(e) => return Err(user_error(e)),
    };
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    q.append_pair("done", "removed").append_pair("who", &gone);
    Ok(web::redirect(&format!("/console/team?{}", q.finish())))
}

/// Whether the form's one-time key is claimed now (false: it was carried
/// out already, by a reload or a second click). A form without a key is
/// refused, as one that expired.
fn claim_form(c: &Console, req: &Req, s: &Session) -> Result<bool, ConsoleError> {
    let key = req
        .field("form_key")
        .filter(|k| !k.is_empty() && k.len() <= 64)
        .ok_or_else(|| ConsoleError::Refused(400, t(req.lang, "incomplete").into()))?;
    Ok(blocking(|| c.forms.claim(&s.merchant_id, &key))?)
}

/// `GET /console/team/{id}/reset` and `…/remove` (owners): what it does to
/// whom, then the confirming form, carried out once.
pub fn confirm(
    c: &Console,
    req: &Req,
    s: &Session,
    user_id: &str,
    what: &str,
) -> Result<Resp, ConsoleError> {
    owner_only(s)?;
    let l = req.lang;
    let users = blocking(|| c.users.list(&s.merchant_id)).map_err(user_error)?;
    let member = users
        .iter()
        .find(|u| u.id == user_id)
        .ok_or(ConsoleError::NotFound)?;
    let (title, question, danger) = match what {
        "remove" => ("remove", "confirm_remove", " class=\"danger\""),
        _ => ("reset_access", "confirm_reset", ""),
    };
    let body = format!(
        "<p>{q}</p><form method=\"post\" action=\"/console/team/{id}/{what}\">{csrf}\
         <input type=\"hidden\" name=\"form_key\" value=\"{key}\">\
         <button{danger}>{confirm}</button> <a href=\"/console/team\">{back}</a></form>",
        q = html::tf(l, question, &[&member.email, role_word(l, member.role)]),
        id = esc(user_id),
        csrf = html::csrf_field(s),
        key = mmc_console_kit::once::Forms::key(),
        confirm = t(l, title),
        back = t(l, "back"),
    );
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, title), &body),
    ))
}

/// The merchant's time zone, that the console shows every time in.
fn zone_form(l: html::Lang, s: &Session) -> String {
    let options: String = Zone::ALL
        .iter()
        .map(|z| {
            format!(
                "<option value=\"{}\"{}>{}</option>",
                z.name(),
                if *z == s.zone { " selected" } else { "" },
                esc(z.describe(l))
            )
        })
        .collect();
    format!(
        "<h2>{title}</h2><form method=\"post\" action=\"/console/team/zone\">{csrf}<fieldset>\
         <label>{label}<select name=\"zone\">{options}</select></label><button>{save}</button></fieldset></form>",
        title = t(l, "time_zone"),
        csrf = html::csrf_field(s),
        label = t(l, "time_zone_label"),
        save = t(l, "save"),
    )
}

/// `POST /console/team/zone` (owners): the merchant's time zone.
pub fn set_zone(
    app: &mmc_http::App,
    c: &Console,
    req: &Req,
    s: &Session,
) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    owner_only(s)?;
    let Some(zone) = req.field("zone").and_then(|z| Zone::parse(&z)) else {
        return page(c, req, s, Some((400, t(req.lang, "bad_zone").into())));
    };
    let audit = ("merchant.time_zone", None, req.client.as_deref());
    blocking(|| {
        c.audit.act(
            s,
            audit,
            || app.accounts.set_time_zone(&s.merchant_id, zone.name()),
            |_| (None, Some(zone.name().to_string())),
        )
    })?
    .map_err(|e| ConsoleError::Unavailable(e.to_string()))?;
    Ok(web::redirect("/console/team?done=zone"))
}
