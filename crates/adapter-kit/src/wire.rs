//! Conventions providers' wire formats share, written once: phone numbers,
//! free text cut to what a field accepts, bodies read as JSON, loose JSON
//! fields, and what a success must say before it is believed.

use std::fmt::Display;

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer};
use serde_json::Value;

use crate::types::Settled;

/// A phone number's digits only: E.164 without its `+`, the MSISDN most
/// providers want.
pub fn digits(phone: &str) -> String {
    phone.chars().filter(char::is_ascii_digit).collect()
}

/// Free text as a provider's field takes it: the characters `keep` keeps, at
/// most `max` of them, trimmed.
pub fn clean(text: impl Iterator<Item = char>, keep: impl Fn(char) -> bool, max: usize) -> String {
    let kept: String = text.filter(|c| keep(*c)).take(max).collect();
    kept.trim().to_string()
}

/// Free text cut to a field's length, counted in characters (never inside one).
pub fn clip(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// The base letter of the accented letters of French names and words, for
/// fields that take ASCII only.
pub fn fold_accent(c: char) -> char {
    match c {
        'à' | 'â' | 'ä' | 'á' | 'ã' => 'a',
        'À' | 'Â' | 'Ä' | 'Á' | 'Ã' => 'A',
        'é' | 'è' | 'ê' | 'ë' => 'e',
        'É' | 'È' | 'Ê' | 'Ë' => 'E',
        'î' | 'ï' | 'í' => 'i',
        'Î' | 'Ï' | 'Í' => 'I',
        'ô' | 'ö' | 'ó' | 'õ' => 'o',
        'Ô' | 'Ö' | 'Ó' | 'Õ' => 'O',
        'ù' | 'û' | 'ü' | 'ú' => 'u',
        'Ù' | 'Û' | 'Ü' | 'Ú' => 'U',
        'ç' => 'c',
        'Ç' => 'C',
        'ñ' => 'n',
        'Ñ' => 'N',
        other => other,
    }
}

/// `body` read as `T`, or why not (`unreadable <what>: …`).
pub fn parse<T: DeserializeOwned>(what: &str, body: &[u8]) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("unreadable {what}: {e}"))
}

/// `value`, part of a body already read, as `T`, or why not
/// (`unreadable <what>: …`).
pub fn from_value<T: DeserializeOwned>(what: &str, value: Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| format!("unreadable {what}: {e}"))
}

/// What a success says was moved. A success that does not say its amount
/// and currency cannot be believed (`<what> without its amount and currency`):
/// the service compares them with what was asked.
pub fn settled(
    what: impl Display,
    amount: &Option<String>,
    currency: &Option<String>,
    party: Option<String>,
) -> Result<Settled, String> {
    match (amount, currency) {
        (Some(amount), Some(currency)) => Ok(Settled {
            amount: amount.clone(),
            currency: currency.clone(),
            party,
        }),
        _ => Err(format!("{what} without its amount and currency")),
    }
}

/// For `#[serde(default, deserialize_with = …)]`: a JSON string or number as
/// text; anything else (null, absent) is none.
pub fn text_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        Some(Value::String(s)) => Some(s),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_clipped_by_characters_not_bytes() {
        assert_eq!(clip("Koné", 4), "Koné");
        assert_eq!(clip("éèà", 2), "éè");
        assert_eq!(clip("", 3), "");
    }

    #[test]
    fn phone_numbers_keep_their_digits() {
        assert_eq!(digits("+229 01 66-00-00-01"), "2290166000001");
        assert_eq!(digits(""), "");
    }

    #[test]
    fn text_keeps_what_the_field_takes_cut_and_trimmed() {
        let alnum = |c: char| c.is_ascii_alphanumeric() || c == ' ';
        assert_eq!(clean(" Côte d'Ivoire ".chars(), alnum, 40), "Cte dIvoire");
        let folded = " Côte d'Ivoire ".chars().map(fold_accent);
        assert_eq!(clean(folded, alnum, 40), "Cote dIvoire");
        assert_eq!(clean("abcdef".chars(), alnum, 3), "abc");
        assert_eq!(clean("  ab".chars(), alnum, 3), "a", "cut before trimmed");
    }

    #[test]
    fn a_success_is_believed_only_when_it_says_what_was_moved() {
        let s = settled("x", &Some("1500".into()), &Some("XOF".into()), None).unwrap();
        assert_eq!((s.amount.as_str(), s.currency.as_str()), ("1500", "XOF"));
        assert_eq!(
            settled("a SUCCESSFUL transfer", &Some("1".into()), &None, None),
            Err("a SUCCESSFUL transfer without its amount and currency".into())
        );
        assert!(settled("x", &None, &Some("XOF".into()), None).is_err());
    }

    #[test]
    fn a_part_of_a_body_is_read_or_says_why_not() {
        let value = serde_json::json!({"n": 1});
        assert_eq!(
            from_value::<Value>("event data", value.clone()),
            Ok(value.clone())
        );
        let err = from_value::<String>("event data", value).unwrap_err();
        assert!(err.starts_with("unreadable event data: "), "{err}");
    }

    #[test]
    fn loose_fields_read_strings_and_numbers_as_text() {
        #[derive(Deserialize)]
        struct Loose {
            #[serde(default, deserialize_with = "text_or_number")]
            code: Option<String>,
        }
        let read = |json: &str| parse::<Loose>("loose", json.as_bytes()).map(|l| l.code);
        assert_eq!(read(r#"{"code":4001}"#), Ok(Some("4001".into())));
        assert_eq!(read(r#"{"code":"E1"}"#), Ok(Some("E1".into())));
        assert_eq!(read(r#"{"code":null}"#), Ok(None));
        assert_eq!(read("{}"), Ok(None));
        assert!(
            read("<html>")
                .unwrap_err()
                .starts_with("unreadable loose: ")
        );
    }
}
