//! A fresh code from the person's authenticator, asked again right before
//! the actions that move the most money: approving a bulk payout in live,
//! and a live refund above `console.refund_code_above`. A code is accepted
//! once, so the one asked here is read from the authenticator now: a
//! session left open, or taken over, does not approve on its own. One of
//! the person's recovery codes stands in for the authenticator's, once.

use crate::html::{self, t};
use crate::sessions::Session;
use crate::users::{Factor, UserError, Users};
use crate::web::ConsoleError;
use crate::{Console, blocking};
use mmc_common::clock::system_now_ms;

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
        .map_err(crate::web::user_error)?
        .ok_or(ConsoleError::SecondFactorRequired)?;
    let now = system_now_ms() / 1000;
    blocking(|| passes(&c.users, &s.user_id, &factor, code, Some(purpose), now))
        .map_err(crate::web::user_error)?
        .map(|_| ())
        .ok_or_else(|| refused("code_wrong"))
}

/// Which of a person's second factors a code passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passed {
    Authenticator,
    RecoveryCode,
}

/// Whether `code` passes the user's enabled second `factor`, spending it:
/// a code of the authenticator newer than the last one accepted, or one of
/// their recovery codes not used before. With a `purpose` (an action asked
/// again, see [`check`]), the same request submitted again with the same
/// code passes again; without one (signing in), a code passes once.
pub fn passes(
    users: &Users,
    user_id: &str,
    factor: &Factor,
    code: &str,
    purpose: Option<&str>,
    now_secs: u64,
) -> Result<Option<Passed>, UserError> {
    if let Some(step) = crate::totp::verify(&factor.secret, code, now_secs) {
        let spent = match purpose {
            None => {
                factor.last_step.is_none_or(|last| step > last)
                    && users.spend_totp_step(user_id, step)?
            }
            Some(purpose) => {
                factor.last_step.is_none_or(|used| step >= used)
                    && users.spend_totp_step_for(user_id, step, purpose)?
            }
        };
        return Ok(spent.then_some(Passed::Authenticator));
    }
    let spent = users.spend_recovery_code(user_id, code, purpose)?;
    Ok(spent.then_some(Passed::RecoveryCode))
}

/// [`check`] before the audited action `(action, subject)`: a refusal is
/// written to the audit log as that action refused, with why.
pub fn check_audited(
    c: &Console,
    req: &crate::web::Req,
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

/// The form field that asks for the code: an authenticator's six digits
/// or a recovery code, so no digits-only keyboard or pattern.
pub fn field(l: html::Lang) -> String {
    format!(
        "<label>{} <small>{}</small><input name=\"code\" autocomplete=\"one-time-code\" autocapitalize=\"none\" spellcheck=\"false\" required></label>",
        t(l, "fresh_code"),
        t(l, "sec_or_recovery"),
    )
}
