//! The page's language (`lang`, else the browser's first choice) and its
//! words in English and French.

use crate::mmc::api::http_types::Request;
use crate::wire;

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Lang {
    En,
    Fr,
}

pub(super) fn lang(req: &Request) -> Lang {
    if let Some(l) = wire::query_param(req, "lang") {
        return if l == "fr" { Lang::Fr } else { Lang::En };
    }
    let accept = wire::header(req, "accept-language")
        .unwrap_or_default()
        .to_ascii_lowercase();
    // The first language listed wins; French speakers are most of our customers.
    match accept.split(',').next().map(str::trim) {
        Some(l) if l.starts_with("fr") => Lang::Fr,
        _ => Lang::En,
    }
}

/// The page's words: (key, English, French).
const WORDS: &[(&str, &str, &str)] = &[
    ("title", "Pay with Mobile Money", "Payer par Mobile Money"),
    ("to", "Payment to", "Paiement à"),
    ("amount", "Amount", "Montant"),
    (
        "operator",
        "Mobile Money operator",
        "Opérateur Mobile Money",
    ),
    ("phone", "Mobile Money number", "Numéro Mobile Money"),
    ("pay", "Pay", "Payer"),
    ("otp", "Code received by SMS", "Code reçu par SMS"),
    (
        "otp_help",
        "Enter the one-time code sent to your phone.",
        "Saisissez le code à usage unique envoyé sur votre téléphone.",
    ),
    ("confirm", "Confirm", "Confirmer"),
    (
        "waiting",
        "Approve the payment on your phone. This page updates by itself.",
        "Validez le paiement sur votre téléphone. Cette page se met à jour toute seule.",
    ),
    (
        "completed",
        "Payment completed. Thank you!",
        "Paiement effectué. Merci !",
    ),
    ("failed", "The payment failed.", "Le paiement a échoué."),
    (
        "insufficient_funds",
        "Your balance is too low.",
        "Votre solde est insuffisant.",
    ),
    (
        "declined_by_customer",
        "The payment was declined on the phone.",
        "Le paiement a été refusé sur le téléphone.",
    ),
    (
        "approval_expired",
        "The approval request expired.",
        "La demande de validation a expiré.",
    ),
    (
        "limit_reached",
        "Your Mobile Money limit is reached.",
        "Votre plafond Mobile Money est atteint.",
    ),
    (
        "payer_not_found",
        "This number has no Mobile Money account with this operator.",
        "Ce numéro n'a pas de compte Mobile Money chez cet opérateur.",
    ),
    (
        "otp_attempts_exceeded",
        "Too many wrong codes.",
        "Trop de codes incorrects.",
    ),
    (
        "busy",
        "Too many payments at this moment: nothing was sent. Try again in a moment.",
        "Trop de paiements en ce moment : rien n'a été envoyé. Réessayez dans un instant.",
    ),
    (
        "try_later",
        "Try again later or with another operator.",
        "Réessayez plus tard ou avec un autre opérateur.",
    ),
    (
        "cancelled",
        "This payment was cancelled.",
        "Ce paiement a été annulé.",
    ),
    (
        "expired",
        "This payment link has expired.",
        "Ce lien de paiement a expiré.",
    ),
    (
        "continue",
        "Continue to the operator to pay",
        "Continuer chez l'opérateur pour payer",
    ),
    (
        "wrong_phone",
        "This number is not a valid mobile number for the country.",
        "Ce numéro n'est pas un numéro mobile valide pour ce pays.",
    ),
    (
        "operator_unavailable",
        "This operator cannot take payments right now. Choose another, or try again later.",
        "Cet opérateur ne peut pas recevoir de paiement pour le moment. Choisissez-en un autre ou réessayez plus tard.",
    ),
    (
        "wrong_operator",
        "Choose an operator from the list.",
        "Choisissez un opérateur dans la liste.",
    ),
    (
        "wrong_otp",
        "Wrong code. Try again.",
        "Code incorrect. Réessayez.",
    ),
    (
        "not_found",
        "This payment link is not valid.",
        "Ce lien de paiement n'est pas valide.",
    ),
    ("try_again", "Please try again.", "Veuillez réessayer."),
    (
        "time_left",
        "Time left to pay: {} min",
        "Temps restant pour payer : {} min",
    ),
];

/// The words of `key` in `lang` (empty for an unknown key).
pub(super) fn t(lang: Lang, key: &str) -> &'static str {
    let (en, fr) = WORDS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map_or(("", ""), |&(_, en, fr)| (en, fr));
    if lang == Lang::Fr { fr } else { en }
}
