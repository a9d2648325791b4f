//! Signing in and out, accepting an invitation, the second factor, and the
//! environment a session works in.

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;

use super::html::{self, esc, t};
use super::password_checks::Busy;
use super::sessions::{SESSION_TTL_MS, Session};
use super::users::UserError;
use super::web::{self, ConsoleError, Req, check_csrf, same};
use super::{Console, blocking};
use crate::accounts::Environment;
use crate::clock::system_now_ms;

type Resp = Response<Full<Bytes>>;

/// The cookie that ties a signed-out form to the browser that loaded it
/// (double-submit CSRF token, before there is a session to hold one).
const PRE: &str = "mmc_console_pre";

fn pre_token(req: &Req) -> String {
    req.cookie(PRE)
        .filter(|v| v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| super::users::random_hex(16))
}

fn check_pre(req: &Req) -> Result<(), ConsoleError> {
    match (req.cookie(PRE), req.field("pre")) {
        (Some(c), Some(f)) if same(&c, &f) => Ok(()),
        _ => Err(ConsoleError::Csrf),
    }
}

fn anonymous_form(c: &Console, req: &Req, status: u16, title: &str, inner: &str) -> Resp {
    let pre = pre_token(req);
    let body = inner.replace(
        "{pre}",
        &format!("<input type=\"hidden\" name=\"pre\" value=\"{pre}\">"),
    );
    web::with_cookie(
        web::page_response(status, html::page(req.lang, None, title, &body)),
        &web::cookie(PRE, &pre, c.secure_cookies, None),
    )
}

pub fn sign_in_page(c: &Console, req: &Req, status: u16, message: Option<&str>) -> Resp {
    let l = req.lang;
    let inner = format!(
        "{msg}<form method=\"post\" action=\"/console/sign-in\">{{pre}}\
         <label>{e}<input name=\"email\" type=\"email\" autocomplete=\"username\" required></label>\
         <label>{p}<input name=\"password\" type=\"password\" autocomplete=\"current-password\" required></label>\
         <label>{code}<input name=\"code\" inputmode=\"numeric\" autocomplete=\"one-time-code\" pattern=\"[0-9 ]*\"></label>\
         <button>{s}</button></form><p lang=\"{other}\"><a href=\"/console/sign-in?lang={other}\">{other_name}</a></p>",
        msg = message.map(|m| html::notice(m, true)).unwrap_or_default(),
        e = t(l, "email"),
        p = t(l, "password"),
        code = t(l, "code"),
        s = t(l, "sign_in"),
        other = if l == html::Lang::Fr { "en" } else { "fr" },
        other_name = if l == html::Lang::Fr {
            "English"
        } else {
            "Français"
        },
    );
    anonymous_form(c, req, status, t(l, "sign_in"), &inner)
}

/// `POST /console/sign-in`: email, password and, when the user has one, a
/// code from their authenticator. A place for the password check is taken
/// first (see [`super::password_checks`]), then the attempt is counted
/// before the password is checked (see [`super::throttle`]).
pub async fn sign_in(c: &Console, req: &Req) -> Result<Resp, ConsoleError> {
    check_pre(req)?;
    let place = c
        .password_checks
        .permit()
        .await
        .map_err(|Busy| ConsoleError::Busy)?;
    let email = req.field("email").unwrap_or_default();
    let client = req.client.clone().unwrap_or_default();
    if let Some(wait) = blocking(|| c.throttle.reserve(&email, &client))? {
        c.metrics.console_sign_in_refused("throttled");
        return Err(ConsoleError::RateLimited(wait));
    }
    let password = req.field("password").unwrap_or_default();
    let (users, account) = (c.users.clone(), email.clone());
    let checked = place
        .check(move |memory| users.check_password_in(&account, &password, memory))
        .await;
    let found = match checked {
        Ok(found) => found.map_err(user_error)?,
        Err(Busy) => {
            // Not checked: the attempt is not one.
            blocking(|| c.throttle.release(&email, &client))?;
            return Err(ConsoleError::Busy);
        }
    };
    let now_secs = system_now_ms() / 1000;
    let password_right = found.is_some();
    let passed = found.and_then(|cred| match &cred.totp_secret {
        None => Some((cred.user, false)),
        Some(secret) => {
            let step = super::totp::verify(secret, &req.field("code")?, now_secs)?;
            // A code seen before (replayed) is refused like a wrong one.
            let fresh = cred.totp_last_step.is_none_or(|last| step > last)
                && blocking(|| c.users.spend_totp_step(&cred.user.id, step)).unwrap_or(false);
            fresh.then_some((cred.user, true))
        }
    });
    let Some((user, mfa)) = passed else {
        blocking(|| {
            c.audit
                .sign_in_refused(&email, password_right, req.client.as_deref())
        })?;
        return Ok(sign_in_page(
            c,
            req,
            401,
            Some(t(req.lang, "bad_credentials")),
        ));
    };
    blocking(|| c.throttle.succeeded(&email, &client))?;
    let token = blocking(|| c.sessions.open(&user.id, mfa, req.client.as_deref()))?;
    if let Some(s) = blocking(|| c.sessions.find(&token))? {
        blocking(|| c.audit.signed_in(&s, mfa, req.client.as_deref()))?;
    }
    Ok(signed_in(c, &token))
}

fn signed_in(c: &Console, token: &str) -> Resp {
    web::with_cookie(
        web::redirect("/console/payments"),
        &web::session_cookie(token, c.secure_cookies, Some(SESSION_TTL_MS / 1000)),
    )
}

pub fn sign_out(c: &Console, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    blocking(|| {
        c.audit
            .record(s, "session.sign_out", None, None, req.client.as_deref())
    })?;
    blocking(|| c.sessions.close(&s.token_hash))?;
    Ok(web::with_cookie(
        web::redirect("/console/sign-in"),
        &web::session_cookie("", c.secure_cookies, Some(0)),
    ))
}

pub fn invite_page(
    c: &Console,
    req: &Req,
    token: &str,
    message: Option<&str>,
) -> Result<Resp, ConsoleError> {
    let user = blocking(|| c.users.invited(token))
        .map_err(user_error)?
        .ok_or(ConsoleError::NotFound)?;
    let l = req.lang;
    let inner = format!(
        "{msg}<p>{email}</p><form method=\"post\" action=\"/console/invite/{token}\">{{pre}}\
         <label>{p}<input name=\"password\" type=\"password\" autocomplete=\"new-password\" minlength=\"12\" required></label>\
         <label>{p2}<input name=\"password2\" type=\"password\" autocomplete=\"new-password\" minlength=\"12\" required></label>\
         <button>{s}</button></form>",
        msg = message.map(|m| html::notice(m, true)).unwrap_or_default(),
        email = esc(&user.email),
        token = esc(token),
        p = t(l, "password"),
        p2 = t(l, "password_again"),
        s = t(l, "set_password"),
    );
    let status = if message.is_some() { 400 } else { 200 };
    Ok(anonymous_form(
        c,
        req,
        status,
        t(l, "choose_password"),
        &inner,
    ))
}

pub async fn accept_invite(c: &Console, req: &Req, token: &str) -> Result<Resp, ConsoleError> {
    check_pre(req)?;
    let password = req.field("password").unwrap_or_default();
    if req.field("password2").unwrap_or_default() != password {
        return invite_page(c, req, token, Some(t(req.lang, "passwords_differ")));
    }
    // Hashing the new password is a password check's cost.
    let place = c
        .password_checks
        .permit()
        .await
        .map_err(|Busy| ConsoleError::Busy)?;
    let user = match place.check_here(|| c.users.accept(token, &password)) {
        Ok(user) => user,
        Err(UserError::WeakPassword) => {
            return invite_page(
                c,
                req,
                token,
                Some(&html::user_error(req.lang, &UserError::WeakPassword)),
            );
        }
        Err(e) => return Err(user_error(e)),
    };
    // The person who chose the password sets up the second factor here: a
    // session opened by a password alone may not.
    let token = blocking(|| c.sessions.open_from_link(&user.id, req.client.as_deref()))?;
    if let Some(s) = blocking(|| c.sessions.find(&token))? {
        blocking(|| c.audit.link_accepted(&s, req.client.as_deref()))?;
    }
    Ok(signed_in(c, &token))
}

/// `POST /console/environment`: test or live. Owners and finance work in
/// live only in a session signed in with a second factor.
pub fn switch_environment(c: &Console, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    let env = req
        .field("environment")
        .and_then(|e| Environment::parse(&e))
        .ok_or(ConsoleError::NotFound)?;
    if env == Environment::Live && s.role.needs_second_factor_in_live() && !s.mfa {
        return Err(ConsoleError::SecondFactorRequired);
    }
    blocking(|| c.sessions.set_environment(&s.token_hash, env))?;
    Ok(web::redirect("/console/payments"))
}

pub fn security_page(
    c: &Console,
    req: &Req,
    s: &Session,
    message: Option<(&str, bool)>,
) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let mut body = message
        .map(|(m, err)| html::notice(m, err))
        .unwrap_or_default();
    if s.totp_enabled {
        body.push_str(&format!(
            "<p>{on}</p><form method=\"post\" action=\"/console/security\">{csrf}\
             <input type=\"hidden\" name=\"action\" value=\"replace\">\
             <label>{replace}<input name=\"code\" inputmode=\"numeric\" autocomplete=\"one-time-code\" required></label>\
             <button>{confirm}</button></form>",
            on = t(l, "totp_on"),
            csrf = html::csrf_field(s),
            replace = t(l, "totp_replace"),
            confirm = t(l, "confirm"),
        ));
    } else if !s.may_enrol {
        body.push_str(&format!(
            "<p>{}</p><p>{}</p>",
            t(l, "totp_off"),
            t(l, "enrol_by_link")
        ));
    } else {
        body.push_str(&format!("<p>{}</p>", t(l, "totp_off")));
        match blocking(|| c.users.pending_totp(&s.user_id)).map_err(user_error)? {
            Some(secret) => {
                let uri = super::totp::otpauth_uri(&s.merchant_name, &s.email, &secret);
                body.push_str(&format!(
                    "<p>{intro}</p><p><code id=\"totp-secret\">{secret}</code></p><p><code>{uri}</code></p>\
                     <form method=\"post\" action=\"/console/security\">{csrf}\
                     <input type=\"hidden\" name=\"action\" value=\"confirm\">\
                     <label>{code}<input name=\"code\" inputmode=\"numeric\" autocomplete=\"one-time-code\" required></label>\
                     <button>{confirm}</button></form>",
                    intro = t(l, "totp_secret"),
                    secret = esc(&secret),
                    uri = esc(&uri),
                    csrf = html::csrf_field(s),
                    code = t(l, "code"),
                    confirm = t(l, "confirm"),
                ));
            }
            None => body.push_str(&format!(
                "<form method=\"post\" action=\"/console/security\">{}<input type=\"hidden\" name=\"action\" value=\"start\"><button>{}</button></form>",
                html::csrf_field(s),
                t(l, "totp_start")
            )),
        }
    }
    body.push_str(&format!(
        "<h2>{title}</h2><form method=\"post\" action=\"/console/security\">{csrf}\
         <input type=\"hidden\" name=\"action\" value=\"password\">\
         <label>{current}<input name=\"password\" type=\"password\" autocomplete=\"current-password\" required></label>\
         <label>{new}<input name=\"new_password\" type=\"password\" autocomplete=\"new-password\" minlength=\"12\" required></label>\
         <label>{again}<input name=\"new_password2\" type=\"password\" autocomplete=\"new-password\" minlength=\"12\" required></label>\
         <button>{title}</button></form>",
        title = t(l, "change_password"),
        csrf = html::csrf_field(s),
        current = t(l, "current_password"),
        new = t(l, "new_password"),
        again = t(l, "password_again"),
    ));
    let status = if message.is_some_and(|(_, err)| err) {
        400
    } else {
        200
    };
    Ok(web::page_response(
        status,
        html::page(l, Some(s), t(l, "security"), &body),
    ))
}

pub async fn security_action(c: &Console, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    match req.field("action").as_deref() {
        Some("password") => return change_password(c, req, s).await,
        Some("replace") if s.totp_enabled => return replace_factor(c, req, s),
        _ => {}
    }
    if s.totp_enabled {
        return Ok(web::redirect("/console/security"));
    }
    // A second factor is enrolled by whoever holds the session the one-time
    // link opened, or who just passed the current factor; never on a
    // password alone (a password someone else knows would add their phone).
    if !s.may_enrol {
        return Err(ConsoleError::Refused(
            403,
            t(req.lang, "enrol_by_link").into(),
        ));
    }
    match req.field("action").as_deref() {
        Some("start") => {
            blocking(|| c.users.start_totp(&s.user_id)).map_err(user_error)?;
            Ok(web::redirect("/console/security"))
        }
        Some("confirm") => {
            let secret = blocking(|| c.users.pending_totp(&s.user_id))
                .map_err(user_error)?
                .and_then(|b| super::totp::from_base32(&b))
                .ok_or(ConsoleError::NotFound)?;
            let code = req.field("code").unwrap_or_default();
            let Some(step) = super::totp::verify(&secret, &code, system_now_ms() / 1000) else {
                return security_page(c, req, s, Some((t(req.lang, "bad_credentials"), true)));
            };
            let audit = (
                "user.totp_enabled",
                Some(s.user_id.as_str()),
                req.client.as_deref(),
            );
            let enable = || c.users.enable_totp(&s.user_id, step);
            blocking(|| c.audit.act(s, audit, enable, |_| (None, None)))?.map_err(user_error)?;
            blocking(|| c.sessions.mark_mfa(&s.token_hash))?;
            Ok(web::redirect("/console/security"))
        }
        _ => Err(ConsoleError::NotFound),
    }
}

/// A new authenticator in place of the current one, once a code of the
/// current one is given: the session may then enrol the new one.
fn replace_factor(c: &Console, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    let code = req.field("code");
    let purpose = format!("replace {}", s.token_hash);
    if let Err(refused) = super::step_up::check(c, req.lang, s, code.as_deref(), &purpose) {
        let why = refused.to_string();
        return security_page(c, req, s, Some((&why, true)));
    }
    blocking(|| c.users.start_totp(&s.user_id)).map_err(user_error)?;
    blocking(|| c.audit.factor_replaced(s, req.client.as_deref()))?;
    blocking(|| c.sessions.allow_enrolment(&s.token_hash))?;
    Ok(web::redirect("/console/security"))
}

/// The password change of the security page. Guessing the current
/// password is throttled as sign-in is, per account and per client, and
/// its check waits for a place as sign-in's does.
async fn change_password(c: &Console, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let client = req.client.clone().unwrap_or_default();
    let new = req.field("new_password").unwrap_or_default();
    if req.field("new_password2").unwrap_or_default() != new {
        return security_page(c, req, s, Some((t(l, "passwords_differ"), true)));
    }
    let place = c
        .password_checks
        .permit()
        .await
        .map_err(|Busy| ConsoleError::Busy)?;
    if let Some(wait) = blocking(|| c.throttle.reserve(&s.email, &client))? {
        c.metrics.console_sign_in_refused("throttled");
        return Err(ConsoleError::RateLimited(wait));
    }
    let current = req.field("password").unwrap_or_default();
    let audit = (
        "user.password_changed",
        Some(s.user_id.as_str()),
        req.client.as_deref(),
    );
    // A wrong current password is a refused change, in the log as one.
    let change =
        || match c
            .users
            .change_password(&s.user_id, &s.email, &current, &new, &s.token_hash)
        {
            Ok(false) => Err(UserError::WrongPassword),
            other => other,
        };
    let changed = place.check_here(|| c.audit.act(s, audit, change, |_| (None, None)))?;
    // The current password was right unless it was wrong: its attempt is given back.
    if !matches!(changed, Err(UserError::WrongPassword)) {
        blocking(|| c.throttle.succeeded(&s.email, &client))?;
    }
    match changed {
        Ok(_) => Ok(web::redirect("/console/security?done=password")),
        Err(UserError::WrongPassword) => {
            security_page(c, req, s, Some((t(l, "wrong_password"), true)))
        }
        Err(UserError::WeakPassword) => security_page(
            c,
            req,
            s,
            Some((&html::user_error(l, &UserError::WeakPassword), true)),
        ),
        Err(e) => Err(user_error(e)),
    }
}

pub fn user_error(e: UserError) -> ConsoleError {
    match e {
        UserError::Storage(e) => ConsoleError::Unavailable(e.to_string()),
        UserError::UnknownUser | UserError::UnknownMerchant(_) => ConsoleError::NotFound,
        other => ConsoleError::Refused(400, other.to_string()),
    }
}

/// Whether a role in `s`'s environment is allowed to work at all (owner
/// and finance in live need a session that passed a second factor).
pub fn admitted(s: &Session) -> Result<(), ConsoleError> {
    if s.environment == Environment::Live && s.role.needs_second_factor_in_live() && !s.mfa {
        return Err(ConsoleError::SecondFactorRequired);
    }
    Ok(())
}
