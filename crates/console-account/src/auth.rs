//! Signing in and out, accepting an invitation, the second factor, and the
//! environment a session works in.

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;

use mmc_accounts::Environment;
use mmc_common::clock::system_now_ms;
use mmc_console_kit::html::{self, esc, t};
use mmc_console_kit::password_checks::Busy;
use mmc_console_kit::sessions::{SESSION_TTL_MS, Session};
use mmc_console_kit::users::{Factor, UserError};
use mmc_console_kit::web::user_error;
use mmc_console_kit::web::{self, ConsoleError, Req, check_csrf, same};
use mmc_console_kit::{Console, blocking};

type Resp = Response<Full<Bytes>>;

/// The cookie that ties a signed-out form to the browser that loaded it
/// (double-submit CSRF token, before there is a session to hold one).
const PRE: &str = "mmc_console_pre";

fn pre_token(req: &Req) -> String {
    req.cookie(PRE)
        .filter(|v| v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| mmc_console_kit::users::random_hex(16))
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
         <label>{code} <small>{or_recovery}</small><input name=\"code\" autocomplete=\"one-time-code\" autocapitalize=\"none\" spellcheck=\"false\"></label>\
         <button>{s}</button></form><p lang=\"{other}\"><a href=\"/console/sign-in?lang={other}\">{other_name}</a></p>",
        msg = message.map(|m| html::notice(m, true)).unwrap_or_default(),
        e = t(l, "email"),
        p = t(l, "password"),
        code = t(l, "code"),
        or_recovery = t(l, "sec_or_recovery"),
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
/// first (see [`mmc_console_kit::password_checks`]), then the attempt is counted
/// before the password is checked (see [`mmc_console_kit::throttle`]).
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
    let password_right = found.is_some();
    let passed = match found {
        None => None,
        Some(cred) => match cred.totp_secret {
            None => Some((cred.user, false)),
            Some(secret) => {
                // An authenticator's code or a recovery code; one seen
                // before (replayed) is refused like a wrong one.
                let factor = Factor {
                    secret,
                    last_step: cred.totp_last_step,
                };
                let code = req.field("code").unwrap_or_default();
                let now = system_now_ms() / 1000;
                let user = &cred.user.id;
                blocking(|| {
                    mmc_console_kit::step_up::passes(&c.users, user, &factor, &code, None, now)
                })
                .map_err(user_error)?
                .map(|_| (cred.user, true))
            }
        },
    };
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
        body.push_str(&format!("<p>{}</p>", t(l, "totp_on")));
        if req.param("done").as_deref() == Some(CODES_SHOWN) {
            body.push_str(&codes_shown_once(c, req)?);
        }
        body.push_str(&recovery_section(c, l, s)?);
        body.push_str(&format!(
            "<form method=\"post\" action=\"/console/security\">{csrf}\
             <input type=\"hidden\" name=\"action\" value=\"replace\">\
             <label>{replace}<input name=\"code\" inputmode=\"numeric\" autocomplete=\"one-time-code\" required></label>\
             <button>{confirm}</button></form>",
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
                let uri = mmc_console_kit::totp::otpauth_uri(&s.merchant_name, &s.email, &secret);
                // The URI always fits a QR code (a short secret and names).
                let qr = mmc_console_kit::qr::svg(&uri).unwrap_or_default();
                body.push_str(&format!(
                    "<p>{scan}</p><figure class=\"qr\" id=\"totp-qr\">{qr}</figure>\
                     <p>{intro}</p><p><code id=\"totp-secret\">{secret}</code></p><p><code>{uri}</code></p>\
                     <form method=\"post\" action=\"/console/security\">{csrf}\
                     <input type=\"hidden\" name=\"action\" value=\"confirm\">\
                     <label>{code}<input name=\"code\" inputmode=\"numeric\" autocomplete=\"one-time-code\" required></label>\
                     <button>{confirm}</button></form>",
                    scan = t(l, "sec_scan"),
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

/// `?done=` of the page a new set of recovery codes redirects to.
const CODES_SHOWN: &str = "codes";
/// What the codes are kept under until that page shows them.
const CODES_ONCE: &str = "recovery_codes";

/// The session's cookie token: what a shown-once value is sealed under.
fn session_token(req: &Req) -> Result<String, ConsoleError> {
    req.cookie(mmc_console_kit::sessions::COOKIE)
        .ok_or(ConsoleError::NotSignedIn)
}

/// The recovery codes just made, the one time they are shown; on a reload
/// they are gone, and the page says so.
fn codes_shown_once(c: &Console, req: &Req) -> Result<String, ConsoleError> {
    let l = req.lang;
    let token = session_token(req)?;
    let Some(codes) = blocking(|| c.users.take_once(&token, CODES_ONCE)).map_err(user_error)?
    else {
        return Ok(html::notice(t(l, "sec_codes_gone"), false));
    };
    let list: String = codes
        .lines()
        .map(|code| format!("<li><code>{}</code></li>", esc(code)))
        .collect();
    Ok(format!(
        "{}<ol id=\"recovery-codes\" class=\"codes\">{list}</ol>",
        html::notice(t(l, "sec_codes_save"), false)
    ))
}

/// How many recovery codes are left, and a form for a new set (asked with
/// the current password or a code).
fn recovery_section(c: &Console, l: html::Lang, s: &Session) -> Result<String, ConsoleError> {
    let left = blocking(|| c.users.recovery_codes_left(&s.user_id)).map_err(user_error)?;
    let (left, all) = (
        left.to_string(),
        mmc_console_kit::users::RECOVERY_CODES.to_string(),
    );
    Ok(format!(
        "<h2>{title}</h2><p id=\"recovery-left\">{left}</p><p>{what}</p>\
         <form method=\"post\" action=\"/console/security\">{csrf}\
         <input type=\"hidden\" name=\"action\" value=\"recovery\"><fieldset><legend>{ask}</legend>\
         <label>{current}<input name=\"password\" type=\"password\" autocomplete=\"current-password\"></label>\
         <label>{code} <small>{or_recovery}</small><input name=\"code\" autocomplete=\"one-time-code\" autocapitalize=\"none\" spellcheck=\"false\"></label>\
         </fieldset><button>{renew}</button></form>",
        title = t(l, "sec_codes"),
        left = html::tf(l, "sec_codes_left", &[&left, &all]),
        what = t(l, "sec_codes_what"),
        csrf = html::csrf_field(s),
        ask = t(l, "sec_codes_ask"),
        current = t(l, "current_password"),
        code = t(l, "code"),
        or_recovery = t(l, "sec_or_recovery"),
        renew = t(l, "sec_codes_renew"),
    ))
}

/// Keeps `codes` for the page the form redirects to, and redirects there.
fn show_codes_once(c: &Console, req: &Req, codes: &[String]) -> Result<Resp, ConsoleError> {
    let token = session_token(req)?;
    blocking(|| c.users.keep_once(&token, CODES_ONCE, &codes.join("\n"))).map_err(user_error)?;
    Ok(web::redirect(&format!(
        "/console/security?done={CODES_SHOWN}"
    )))
}

/// A new set of recovery codes in place of the old, once the person gives
/// their current password or a code (of the authenticator, or one of the
/// codes): a session left open does not make a set for someone else.
async fn renew_codes(c: &Console, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    if let Some(code) = req.field("code") {
        let purpose = format!("recovery codes {}", s.token_hash);
        if let Err(refused) = mmc_console_kit::step_up::check(c, l, s, Some(&code), &purpose) {
            return security_page(c, req, s, Some((&refused.to_string(), true)));
        }
    } else if !current_password_checks(c, req, s).await? {
        return security_page(c, req, s, Some((t(l, "wrong_password"), true)));
    }
    let audit = (
        "user.recovery_codes_renewed",
        Some(s.user_id.as_str()),
        req.client.as_deref(),
    );
    let renew = || c.users.renew_recovery_codes(&s.user_id);
    let codes = blocking(|| c.audit.act(s, audit, renew, |_| (None, None)))?.map_err(user_error)?;
    show_codes_once(c, req, &codes)
}

/// A place to check the signed-in person's current password, once the
/// guess is counted against their account and client as sign-in's are.
async fn throttled_place(
    c: &Console,
    s: &Session,
    client: &str,
) -> Result<mmc_console_kit::password_checks::Permit, ConsoleError> {
    let place = c
        .password_checks
        .permit()
        .await
        .map_err(|Busy| ConsoleError::Busy)?;
    if let Some(wait) = blocking(|| c.throttle.reserve(&s.email, client))? {
        c.metrics.console_sign_in_refused("throttled");
        return Err(ConsoleError::RateLimited(wait));
    }
    Ok(place)
}

/// Whether the form's `password` is the person's current one, checked as
/// sign-in checks one: throttled per account and client, in a place.
async fn current_password_checks(
    c: &Console,
    req: &Req,
    s: &Session,
) -> Result<bool, ConsoleError> {
    let client = req.client.clone().unwrap_or_default();
    let place = throttled_place(c, s, &client).await?;
    let password = req.field("password").unwrap_or_default();
    let found = place
        .check_here(|| c.users.check_password(&s.email, &password))
        .map_err(user_error)?;
    let right = found.is_some_and(|cred| cred.user.id == s.user_id);
    if right {
        blocking(|| c.throttle.succeeded(&s.email, &client))?;
    }
    Ok(right)
}

pub async fn security_action(c: &Console, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    match req.field("action").as_deref() {
        Some("password") => return change_password(c, req, s).await,
        Some("replace") if s.totp_enabled => return replace_factor(c, req, s),
        Some("recovery") if s.totp_enabled => return renew_codes(c, req, s).await,
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
                .and_then(|b| mmc_console_kit::totp::from_base32(&b))
                .ok_or(ConsoleError::NotFound)?;
            let code = req.field("code").unwrap_or_default();
            let Some(step) = mmc_console_kit::totp::verify(&secret, &code, system_now_ms() / 1000)
            else {
                return security_page(c, req, s, Some((t(req.lang, "bad_credentials"), true)));
            };
            let audit = (
                "user.totp_enabled",
                Some(s.user_id.as_str()),
                req.client.as_deref(),
            );
            let enable = || c.users.enable_totp(&s.user_id, step);
            let codes = blocking(|| c.audit.act(s, audit, enable, |_| (None, None)))?
                .map_err(user_error)?;
            blocking(|| c.sessions.mark_mfa(&s.token_hash))?;
            show_codes_once(c, req, &codes)
        }
        _ => Err(ConsoleError::NotFound),
    }
}

/// A new authenticator in place of the current one, once a code of the
/// current one is given: the session may then enrol the new one.
fn replace_factor(c: &Console, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    let code = req.field("code");
    let purpose = format!("replace {}", s.token_hash);
    if let Err(refused) = mmc_console_kit::step_up::check(c, req.lang, s, code.as_deref(), &purpose)
    {
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
    let place = throttled_place(c, s, &client).await?;
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

/// Whether a role in `s`'s environment is allowed to work at all (owner
/// and finance in live need a session that passed a second factor).
pub fn admitted(s: &Session) -> Result<(), ConsoleError> {
    if s.environment == Environment::Live && s.role.needs_second_factor_in_live() && !s.mfa {
        return Err(ConsoleError::SecondFactorRequired);
    }
    Ok(())
}
