//! A provider's failure codes, declared once as a table: each of its codes
//! → ours, worded for people by the provider's own message, else by ours.
//! A code the table does not name (a code the provider adds later) is
//! `operator_error`, its code kept in the message: nothing unknown is ever
//! taken for the customer's doing.

use crate::types::Failure;

/// What a provider's failure codes mean.
pub struct Reasons {
    /// As messages name it (`Wave`, `pawaPay`).
    pub provider: &'static str,
    /// The provider's codes → ours.
    pub codes: &'static [(&'static [&'static str], &'static str)],
    /// Our words for our codes, when the provider gives no message of its own.
    pub words: &'static [(&'static str, &'static str)],
}

/// Ours for a failure whose cause we cannot tell.
pub const OPERATOR_ERROR: &str = "operator_error";

/// Our words for our codes, for a provider that gives no message of its own
/// (`words: OUR_WORDS`): said to the people who read a payment, so they
/// name what happened, not the provider's code.
pub const OUR_WORDS: &[(&str, &str)] = &[
    ("declined_by_customer", "The customer declined the payment."),
    ("approval_expired", "The customer did not approve in time."),
    ("insufficient_funds", "The customer's balance is too low."),
    (
        "payer_not_found",
        "No mobile money account for this number.",
    ),
    (
        "recipient_not_found",
        "No mobile money account for the recipient's number.",
    ),
    (
        "limit_reached",
        "The account's transaction limit is reached.",
    ),
    (
        "recipient_not_allowed",
        "The recipient's account may not receive this payment.",
    ),
    (
        "account_blocked",
        "The customer's mobile money account is not active.",
    ),
    (
        "phone_invalid",
        "The phone number is not valid for this operator.",
    ),
    ("cancelled", "The operation was cancelled at the operator."),
];

impl Reasons {
    /// Our code for the provider's `theirs` ([`OPERATOR_ERROR`] for any it
    /// does not list).
    pub fn code(&self, theirs: &str) -> &'static str {
        self.codes
            .iter()
            .find(|(codes, _)| codes.contains(&theirs))
            .map_or(OPERATOR_ERROR, |(_, ours)| ours)
    }

    /// The failure the provider reports with `code` (absent or empty: it
    /// gave none) and `message`: its words `<provider>: <message> (<code>)`,
    /// else ours for the code, else `<provider> failure: <code>.`; without
    /// a code, [`OPERATOR_ERROR`].
    pub fn failure(&self, code: Option<&str>, message: Option<&str>) -> Failure {
        let provider = self.provider;
        let Some(theirs) = code.filter(|c| !c.is_empty()) else {
            let message = format!("{provider} reported a failure without a reason.");
            return crate::failure(OPERATOR_ERROR, &message);
        };
        self.worded(self.code(theirs), theirs, message)
    }

    /// The failure `ours` that the provider reported as `theirs` and
    /// `message`, worded as [`Reasons::failure`] words it: for a provider
    /// whose code means another of ours in some operations.
    pub fn worded(&self, ours: &str, theirs: &str, message: Option<&str>) -> Failure {
        let provider = self.provider;
        let words = self.words.iter().find(|(code, _)| *code == ours);
        let message = match (message, words) {
            (Some(m), _) => format!("{provider}: {m} ({theirs})"),
            (None, Some((_, words))) => words.to_string(),
            (None, None) => format!("{provider} failure: {theirs}."),
        };
        crate::failure(ours, &message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Reasons = Reasons {
        provider: "Test",
        codes: &[
            (&["LOW", "NO_FUNDS"], "insufficient_funds"),
            (&["NO"], "declined_by_customer"),
        ],
        words: &[],
    };

    const WORDED: Reasons = Reasons {
        words: &[("insufficient_funds", "The balance is too low.")],
        ..PLAIN
    };

    #[test]
    fn our_words_name_each_code_once() {
        let codes: Vec<&str> = OUR_WORDS.iter().map(|(code, _)| *code).collect();
        let mut unique = codes.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), codes.len(), "{codes:?}");
        assert!(
            !codes.contains(&OPERATOR_ERROR),
            "its cause is said by its code"
        );
        let reasons = Reasons {
            words: OUR_WORDS,
            ..PLAIN
        };
        let f = reasons.failure(Some("NO"), None);
        assert_eq!(f.message, "The customer declined the payment.");
    }

    #[test]
    fn every_listed_code_is_ours_and_any_other_an_operator_error() {
        for reasons in [&PLAIN, &WORDED] {
            for (theirs, ours) in [
                ("LOW", "insufficient_funds"),
                ("NO_FUNDS", "insufficient_funds"),
                ("NO", "declined_by_customer"),
                ("NEW_CODE", OPERATOR_ERROR),
                ("low", OPERATOR_ERROR),
                ("", OPERATOR_ERROR),
            ] {
                assert_eq!(reasons.code(theirs), ours, "{theirs}");
            }
        }
    }

    #[test]
    fn a_failure_is_worded_by_the_provider_else_by_us_else_by_its_code() {
        let (said, none) = (Some("too little"), None);
        for (reasons, code, message, expected) in [
            (
                &PLAIN,
                Some("LOW"),
                said,
                ("insufficient_funds", "Test: too little (LOW)"),
            ),
            (
                &PLAIN,
                Some("LOW"),
                none,
                ("insufficient_funds", "Test failure: LOW."),
            ),
            (
                &PLAIN,
                Some("NEW"),
                said,
                (OPERATOR_ERROR, "Test: too little (NEW)"),
            ),
            (
                &PLAIN,
                Some("NEW"),
                none,
                (OPERATOR_ERROR, "Test failure: NEW."),
            ),
            (
                &WORDED,
                Some("LOW"),
                said,
                ("insufficient_funds", "Test: too little (LOW)"),
            ),
            (
                &WORDED,
                Some("NO_FUNDS"),
                none,
                ("insufficient_funds", "The balance is too low."),
            ),
            (
                &WORDED,
                Some("NO"),
                none,
                ("declined_by_customer", "Test failure: NO."),
            ),
            (
                &WORDED,
                Some("NEW"),
                none,
                (OPERATOR_ERROR, "Test failure: NEW."),
            ),
        ] {
            let f = reasons.failure(code, message);
            assert_eq!(
                (f.code.as_str(), f.message.as_str()),
                expected,
                "{code:?} {message:?}"
            );
        }
        // No code, or an empty one: the cause cannot be told, whatever was said.
        for reasons in [&PLAIN, &WORDED] {
            for code in [None, Some("")] {
                for message in [said, none] {
                    let f = reasons.failure(code, message);
                    assert_eq!(f.code, OPERATOR_ERROR);
                    assert_eq!(f.message, "Test reported a failure without a reason.");
                }
            }
        }
    }
}
