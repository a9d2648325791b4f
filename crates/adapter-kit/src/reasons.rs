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
    /// A table, one line per code of ours: `ours: THEIR_CODE THEIR_OTHER`
    /// (no provider puts a space in a code). Declared through
    /// [`Reasons::table`], which refuses a malformed one at compile time.
    pub codes: &'static str,
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
    /// `codes` checked: every line blank or `ours: THEIRS…`, one code of
    /// ours (no space in it) and at least one of theirs. In a `const`, a
    /// malformed table fails the build.
    pub const fn table(codes: &'static str) -> &'static str {
        let bytes = codes.as_bytes();
        // Per line: colons seen, words of ours, a space after one of ours, one of theirs.
        let (mut i, mut colons, mut ours, mut spaced, mut theirs) = (0, 0, 0, false, false);
        while i <= bytes.len() {
            let b = if i < bytes.len() { bytes[i] } else { b'\n' };
            match b {
                b'\n' => {
                    let blank = colons == 0 && ours == 0;
                    assert!(
                        blank || colons == 1 && ours == 1 && theirs,
                        "each line of a failure-code table is `ours: THEIRS…`"
                    );
                    (colons, ours, spaced, theirs) = (0, 0, false, false);
                }
                b':' => colons += 1,
                b' ' | b'\t' | b'\r' => spaced = true,
                _ if colons > 0 => theirs = true,
                _ if ours == 0 || spaced => (ours, spaced) = (ours + 1, false),
                _ => {}
            }
            i += 1;
        }
        codes
    }

    /// Our code for the provider's `theirs` ([`OPERATOR_ERROR`] for any it
    /// does not list).
    pub fn code(&self, theirs: &str) -> &'static str {
        let rows = self.codes.lines().filter_map(|line| line.split_once(':'));
        rows.map(|(ours, codes)| (ours.trim(), codes))
            .find(|(_, codes)| codes.split_ascii_whitespace().any(|c| c == theirs))
            .map_or(OPERATOR_ERROR, |(ours, _)| ours)
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
        codes: Reasons::table(
            "
            insufficient_funds: LOW NO_FUNDS
            declined_by_customer: NO
            ",
        ),
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
    fn the_python_kit_says_our_words_as_we_do() {
        let python = include_str!("../python/mmc_adapter/reasons.py");
        let words = &python[python.find("OUR_WORDS: Dict").expect("OUR_WORDS")..];
        let words = &words[..words.find("\n}").expect("its end")];
        for (code, said) in OUR_WORDS {
            let entry = format!("\n    \"{code}\": \"{said}\",");
            assert!(words.contains(&entry), "{code}: {said}");
        }
        assert_eq!(words.matches("\n    \"").count(), OUR_WORDS.len());
    }

    #[test]
    fn a_malformed_table_is_refused() {
        for table in [
            "insufficient_funds LOW",
            "insufficient_funds:",
            ": LOW",
            "insufficient funds: LOW",
            "insufficient_funds: LOW: NO",
            "declined_by_customer: NO\n  insufficient_funds",
        ] {
            let refused = std::panic::catch_unwind(|| Reasons::table(table));
            assert!(refused.is_err(), "{table:?}");
        }
        let fine = "\n  insufficient_funds:\tLOW  NO_FUNDS \r\n\n  declined_by_customer: NO\n  ";
        assert_eq!(Reasons::table(fine), fine);
    }

    #[test]
    fn every_listed_code_is_ours_and_any_other_an_operator_error() {
        for reasons in [&PLAIN, &WORDED] {
            for (theirs, ours) in [
                ("LOW", "insufficient_funds"),
                ("NO_FUNDS", "insufficient_funds"),
                ("NO", "declined_by_customer"),
                ("NEW_CODE", OPERATOR_ERROR),
                ("LOW NO_FUNDS", OPERATOR_ERROR),
                ("insufficient_funds", OPERATOR_ERROR),
                (" ", OPERATOR_ERROR),
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
