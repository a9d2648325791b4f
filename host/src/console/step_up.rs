//! A fresh code from the person's authenticator, asked again right before
//! the actions that move the most money: approving a bulk payout in live,
//! and a live refund above `console.refund_code_above`. A code is accepted
//! once, so the one asked here is read from the authenticator now: a
//! session left open, or taken over, does not approve on its own.

use super::html::{self, t};
use super::sessions::Session;
use super::web::ConsoleError;
use super::{Console, blocking};
use crate::clock::system_now_ms;

/// Ok if `code` is a code of the person's second factor not used before
/// (the step it matched is spent for `purpose`), or used only for this same
/// `purpose` (the request submitted again); else a refusal that says what
/// to do. `purpose` names the request: with a refund's Idempotency-Key in
/// it, a double submit replays the same refund rather than fail after it.
pub fn check(
    c: &Console,
    l: html::Lang,
    s: &Session,
    code: Option<&str>,
    purpose: &str,
) -> Result<(), ConsoleError> {
    let refused = |key| ConsoleError::Refused(403, t(l, key).into());
    let code = code
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| refused("code_needed"))?;
    let factor = blocking(|| c.users.current_totp(&s.user_id))
        .map_err(super::auth::user_error)?
        .ok_or(ConsoleError::SecondFactorRequired)?;
    let step = super::totp::verify(&factor.secret, code, system_now_ms() / 1000)
        .filter(|step| factor.last_step.is_none_or(|used| *step >= used))
        .ok_or_else(|| refused("code_wrong"))?;
    let spent = blocking(|| c.users.spend_totp_step_for(&s.user_id, step, purpose))
        .map_err(super::auth::user_error)?;
    if !spent {
        return Err(refused("code_wrong"));
    }
    Ok(())
}

/// [`check`] before the audited action `(action, subject)`: a refusal is
/// written to the audit log as that action refused, with why.
pub fn check_audited(
    c: &Console,
    req: &super::web::Req,
    s: &Session,
    (action, subject): (&str, &str),
    purpose: &str,
) -> Result<(), ConsoleError> {
    let Err(refused) = check(c, req.lang, s, req.field("code").as_deref(), purpose) else {
        return Ok(());
    };
    let audit = (action, Some(subject), req.client.as_deref());
    let why = || Err::<(), _>(format!("no fresh second-factor code: {refused}"));
    blocking(|| c.audit.act(s, audit, why, |_| (None, None)))?.ok();
    Err(refused)
}

/// The form field that asks for the code.
pub fn field(l: html::Lang) -> String {
    format!(
        "<label>{}<input name=\"code\" inputmode=\"numeric\" autocomplete=\"one-time-code\" pattern=\"[0-9 ]*\" required></label>",
        t(l, "fresh_code")
    )
}
