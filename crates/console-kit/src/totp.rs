//! Time-based one-time passwords (RFC 6238 over RFC 4226's HOTP), the
//! second factor authenticator apps speak: HMAC-SHA1, 30-second steps, six
//! digits. A code is accepted one step either side of now (clocks drift),
//! and never twice: the step it matched is kept and later codes must be newer.

use hmac::{Hmac, Mac};

/// The second factor's words: (key, English, French), looked up by [`crate::html::t`].
pub const WORDS: &[(&str, &str, &str)] = &[
    (
        "sec_or_recovery",
        "(or one of your recovery codes)",
        "(ou l'un de vos codes de secours)",
    ),
    (
        "sec_scan",
        "Scan this QR code with your authenticator app (Google Authenticator, Microsoft Authenticator, FreeOTP…):",
        "Scannez ce code QR avec votre application d'authentification (Google Authenticator, Microsoft Authenticator, FreeOTP…) :",
    ),
    ("sec_codes", "Recovery codes", "Codes de secours"),
    (
        "sec_codes_left",
        "{} of {} recovery codes left.",
        "Codes de secours restants : {} sur {}.",
    ),
    (
        "sec_codes_what",
        "If you lose your phone, each code signs you in once in place of a code from your authenticator.",
        "Si vous perdez votre téléphone, chaque code vous connecte une fois à la place d'un code de votre application d'authentification.",
    ),
    (
        "sec_codes_save",
        "Save these ten recovery codes now (print them or keep them in a password manager): they are shown only this once. Each works once.",
        "Enregistrez ces dix codes de secours maintenant (imprimez-les ou gardez-les dans un gestionnaire de mots de passe) : ils ne sont affichés qu'une seule fois. Chacun ne sert qu'une fois.",
    ),
    (
        "sec_codes_gone",
        "Your recovery codes were shown once and are not shown again. If you did not save them, make a new set below.",
        "Vos codes de secours ont été affichés une fois et ne le seront plus. Si vous ne les avez pas enregistrés, créez-en de nouveaux ci-dessous.",
    ),
    (
        "sec_codes_ask",
        "To make a new set, enter your current password or a code",
        "Pour en créer de nouveaux, saisissez votre mot de passe actuel ou un code",
    ),
    (
        "sec_codes_renew",
        "Make a new set (the old codes stop working)",
        "Créer de nouveaux codes (les anciens ne fonctionneront plus)",
    ),
];

pub const STEP_SECS: u64 = 30;
const DIGITS: u32 = 6;

/// The HOTP value of `counter` under `key`, `digits` long (RFC 4226 §5.3).
fn hotp(key: &[u8], counter: u64, digits: u32) -> u32 {
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(&counter.to_be_bytes());
    let digest = mac.finalize().into_bytes();
    let offset = (digest[digest.len() - 1] & 0x0f) as usize;
    let bin = u32::from_be_bytes([
        digest[offset] & 0x7f,
        digest[offset + 1],
        digest[offset + 2],
        digest[offset + 3],
    ]);
    bin % 10u32.pow(digits)
}

/// The six-digit code of `secret` at Unix time `unix_secs`.
pub fn code_at(secret: &[u8], unix_secs: u64) -> String {
    let v = hotp(secret, unix_secs / STEP_SECS, DIGITS);
    format!("{v:06}")
}

/// The step a presented code matches (now, or one step either side), if any.
pub fn verify(secret: &[u8], code: &str, unix_secs: u64) -> Option<u64> {
    let code = code.trim().replace(' ', "");
    if code.len() != DIGITS as usize || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let now = unix_secs / STEP_SECS;
    [now, now.saturating_sub(1), now + 1]
        .into_iter()
        .find(|step| {
            let expected = code_at(secret, step * STEP_SECS);
            // Compared without an early exit.
            expected
                .bytes()
                .zip(code.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
        })
}

const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// RFC 4648 base32 without padding: how authenticator apps take a secret.
pub fn base32(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let v = buf.iter().fold(0u64, |acc, b| (acc << 8) | *b as u64);
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..chars {
            out.push(ALPHABET[((v >> (35 - i * 5)) & 31) as usize] as char);
        }
    }
    out
}

pub fn from_base32(text: &str) -> Option<Vec<u8>> {
    let mut bits = 0u64;
    let mut n = 0;
    let mut out = Vec::new();
    for c in text.trim_end_matches('=').bytes() {
        let v = ALPHABET.iter().position(|a| *a == c.to_ascii_uppercase())? as u64;
        bits = (bits << 5) | v;
        n += 5;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
            bits &= (1 << n) - 1;
        }
    }
    Some(out)
}

/// The `otpauth://` URI an authenticator app reads (typed or from a QR code).
pub fn otpauth_uri(issuer: &str, account: &str, secret_b32: &str) -> String {
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    format!(
        "otpauth://totp/{}:{}?secret={secret_b32}&issuer={}&digits=6&period=30",
        enc(issuer),
        enc(account),
        enc(issuer)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6238 appendix B, the SHA-1 column (eight digits there).
    #[test]
    fn rfc_6238_test_vectors() {
        let seed = b"12345678901234567890";
        for (time, expected) in [
            (59u64, 94287082u32),
            (1111111109, 7081804),
            (1111111111, 14050471),
            (1234567890, 89005924),
            (2000000000, 69279037),
            (20000000000, 65353130),
        ] {
            assert_eq!(hotp(seed, time / STEP_SECS, 8), expected, "T = {time}");
            // The six digits an app shows are the same value's last six.
            assert_eq!(code_at(seed, time), format!("{:06}", expected % 1_000_000));
        }
    }

    /// RFC 4226 appendix D: HOTP values for counters 0 to 9.
    #[test]
    fn rfc_4226_hotp_values() {
        let expected = [
            755224, 287082, 359152, 969429, 338314, 254676, 287922, 162583, 399871, 520489,
        ];
        for (counter, want) in expected.iter().enumerate() {
            assert_eq!(hotp(b"12345678901234567890", counter as u64, 6), *want);
        }
    }

    #[test]
    fn codes_are_taken_one_step_either_side_and_not_further() {
        let secret = b"a secret of twenty b";
        let t = 1_700_000_000;
        assert_eq!(verify(secret, &code_at(secret, t), t), Some(t / STEP_SECS));
        assert!(verify(secret, &code_at(secret, t - 30), t).is_some());
        assert!(verify(secret, &code_at(secret, t + 30), t).is_some());
        assert!(verify(secret, &code_at(secret, t - 90), t).is_none());
        assert!(verify(secret, "12345", t).is_none());
        assert!(verify(secret, "abcdef", t).is_none());
    }

    #[test]
    fn base32_round_trips_as_rfc_4648_says() {
        assert_eq!(base32(b"foobar"), "MZXW6YTBOI");
        assert_eq!(
            base32(b"12345678901234567890"),
            "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"
        );
        assert_eq!(from_base32("MZXW6YTBOI").unwrap(), b"foobar");
        assert_eq!(from_base32("mzxw6ytboi======").unwrap(), b"foobar");
        assert!(from_base32("1!").is_none());
    }
}
