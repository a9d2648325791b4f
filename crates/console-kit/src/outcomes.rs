//! Outcomes in words: the status of a payment, refund, payout or batch as
//! the reader's language says it, and for a failure the reason and what to
//! do next, from the API's `failure_code` (never the code alone).

use crate::html::{Lang, esc, t};

/// Statuses, reasons and refund motives: (key, English, French).
pub const WORDS: &[(&str, &str, &str)] = &[
    ("st_pending", "Pending", "En attente"),
    ("st_processing", "In progress", "En cours"),
    (
        "st_awaiting_otp",
        "Waiting for the customer's code",
        "En attente du code du client",
    ),
    (
        "st_awaiting_payment",
        "Waiting for the customer",
        "En attente du client",
    ),
    ("st_completed", "Completed", "Réussi"),
    ("st_failed", "Failed", "Échoué"),
    ("st_cancelled", "Cancelled", "Annulé"),
    ("st_expired", "Expired", "Expiré"),
    ("st_refunded", "Refunded", "Remboursé"),
    (
        "st_pending_validation",
        "Waiting for approval",
        "En attente d'approbation",
    ),
    ("st_partially_completed", "Partly paid", "Payé en partie"),
    ("st_rejected", "Rejected", "Rejeté"),
    ("st_needs_review", "To review", "À vérifier"),
    ("st_succeeded", "Completed", "Réussi"),
    // Failure reasons: what happened, then what to do next.
    (
        "why_insufficient_funds",
        "The customer's balance is too low.",
        "Le solde du client est insuffisant.",
    ),
    (
        "next_insufficient_funds",
        "Ask the customer to top up, then create a new payment.",
        "Demandez au client de recharger son compte, puis créez un nouveau paiement.",
    ),
    (
        "why_declined_by_customer",
        "The customer declined the payment on the phone.",
        "Le client a refusé le paiement sur son téléphone.",
    ),
    (
        "next_declined_by_customer",
        "Check with the customer before trying again.",
        "Vérifiez avec le client avant de réessayer.",
    ),
    (
        "why_approval_expired",
        "The customer did not approve in time.",
        "Le client n'a pas validé à temps.",
    ),
    (
        "next_approval_expired",
        "Create a new payment and ask the customer to approve it on the phone straight away.",
        "Créez un nouveau paiement et demandez au client de le valider tout de suite sur son téléphone.",
    ),
    (
        "why_otp_attempts_exceeded",
        "Too many wrong one-time codes were entered.",
        "Trop de codes à usage unique erronés ont été saisis.",
    ),
    (
        "next_otp_attempts_exceeded",
        "Create a new payment; the customer will receive a new code.",
        "Créez un nouveau paiement ; le client recevra un nouveau code.",
    ),
    (
        "why_payer_not_found",
        "This number has no mobile money account with this operator.",
        "Ce numéro n'a pas de compte mobile money chez cet opérateur.",
    ),
    (
        "next_payer_not_found",
        "Check the number and the operator with the customer.",
        "Vérifiez le numéro et l'opérateur avec le client.",
    ),
    (
        "why_recipient_not_found",
        "The recipient's number has no mobile money account.",
        "Le numéro du bénéficiaire n'a pas de compte mobile money.",
    ),
    (
        "next_recipient_not_found",
        "Check the recipient's number, then pay again.",
        "Vérifiez le numéro du bénéficiaire, puis payez à nouveau.",
    ),
    (
        "why_recipient_not_allowed",
        "The recipient's account may not receive this payment.",
        "Le compte du bénéficiaire ne peut pas recevoir ce paiement.",
    ),
    (
        "next_recipient_not_allowed",
        "The recipient should contact their operator.",
        "Le bénéficiaire doit contacter son opérateur.",
    ),
    (
        "why_limit_reached",
        "The account's transaction limit is reached.",
        "Le plafond de transactions du compte est atteint.",
    ),
    (
        "next_limit_reached",
        "Try a smaller amount, or again once the limit resets.",
        "Essayez un montant plus petit, ou à nouveau quand le plafond est rétabli.",
    ),
    (
        "why_account_blocked",
        "The customer's mobile money account is not active.",
        "Le compte mobile money du client n'est pas actif.",
    ),
    (
        "next_account_blocked",
        "The customer should contact their operator.",
        "Le client doit contacter son opérateur.",
    ),
    (
        "why_phone_invalid",
        "The phone number is not valid for this operator.",
        "Le numéro n'est pas valide pour cet opérateur.",
    ),
    (
        "next_phone_invalid",
        "Check the number and the operator.",
        "Vérifiez le numéro et l'opérateur.",
    ),
    (
        "why_cancelled",
        "The operation was cancelled at the operator.",
        "L'opération a été annulée chez l'opérateur.",
    ),
    (
        "next_cancelled",
        "Create a new payment if it is still due.",
        "Créez un nouveau paiement s'il est toujours dû.",
    ),
    (
        "why_operator_error",
        "The operator refused the request.",
        "L'opérateur a refusé la demande.",
    ),
    (
        "next_operator_error",
        "Try again later; if it keeps failing, contact support with the payment's reference.",
        "Réessayez plus tard ; si l'échec persiste, contactez le support avec la référence du paiement.",
    ),
    (
        "why_operator_unavailable",
        "The operator was unavailable; no money moved.",
        "L'opérateur était indisponible ; aucun argent n'a bougé.",
    ),
    (
        "next_operator_unavailable",
        "Try again in a few minutes.",
        "Réessayez dans quelques minutes.",
    ),
    (
        "why_operator_not_reached",
        "The request never reached the operator; no money moved.",
        "La demande n'est jamais parvenue à l'opérateur ; aucun argent n'a bougé.",
    ),
    (
        "next_operator_not_reached",
        "Create a new payment.",
        "Créez un nouveau paiement.",
    ),
    (
        "why_unknown",
        "The operator gave a reason we do not know",
        "L'opérateur a donné un motif que nous ne connaissons pas",
    ),
    (
        "next_unknown",
        "Contact support with the payment's reference.",
        "Contactez le support avec la référence du paiement.",
    ),
    ("next_label", "What to do next:", "Que faire :"),
    // The router's reasons for a route, and its verdict on each candidate.
    (
        "route_why_preferred",
        "the first route of its rule",
        "la première route de sa règle",
    ),
    (
        "route_why_next",
        "the next route, the ones before it unusable",
        "la route suivante, les précédentes inutilisables",
    ),
    (
        "route_why_failover",
        "failover after a route that did nothing",
        "repli après une route qui n'a rien fait",
    ),
    (
        "route_why_trial",
        "a trial of a recovering route",
        "un essai d'une route en reprise",
    ),
    (
        "route_why_weighted",
        "its share of a split",
        "sa part d'une répartition",
    ),
    (
        "route_why_slow",
        "slow, the only one left",
        "lente, la seule restante",
    ),
    (
        "route_why_last_resort",
        "last resort: every route is failing",
        "dernier recours : toutes les routes échouent",
    ),
    ("route_verdict_chosen", "chosen", "choisie"),
    ("route_verdict_skipped", "skipped", "écartée"),
    (
        "route_verdict_passed_over",
        "passed over",
        "laissée de côté",
    ),
    // A call to an operator: what was asked, and how it went.
    ("op_initiate", "ask for the payment", "demande du paiement"),
    ("op_status", "status check", "vérification du statut"),
    ("op_refund", "refund", "remboursement"),
    (
        "op_refund_status",
        "refund status check",
        "vérification du remboursement",
    ),
    ("op_payout", "payout", "versement"),
    (
        "op_payout_status",
        "payout status check",
        "vérification du versement",
    ),
    ("op_confirm_otp", "one-time code", "code à usage unique"),
    ("op_cancel", "cancel", "annulation"),
    ("op_route", "route", "acheminement"),
    ("oc_ok", "answered", "répondu"),
    ("oc_timeout", "no answer in time", "pas de réponse à temps"),
    ("oc_unavailable", "unavailable", "indisponible"),
    (
        "oc_invalid_response",
        "unreadable answer",
        "réponse illisible",
    ),
    ("oc_rejected", "refused", "refusé"),
    ("oc_not_sent", "not sent", "non envoyé"),
    ("oc_not_supported", "not supported", "non pris en charge"),
    (
        "oc_unauthenticated",
        "credentials refused",
        "identifiants refusés",
    ),
    ("oc_busy", "busy", "occupé"),
    ("oc_deadline", "took too long", "trop long"),
    ("oc_trap", "adapter stopped", "adaptateur arrêté"),
    ("oc_no_route", "no route", "aucune route"),
    // A webhook delivery.
    ("dl_pending", "to be sent", "à envoyer"),
    ("dl_delivered", "delivered", "livré"),
    ("dl_failed", "given up", "abandonné"),
    // Refund motives.
    (
        "rr_requested_by_customer",
        "Asked by the customer",
        "Demandé par le client",
    ),
    ("rr_duplicate", "Paid twice", "Payé deux fois"),
    ("rr_fraudulent", "Fraud", "Fraude"),
    (
        "rr_customer_dispute",
        "Customer dispute",
        "Litige avec le client",
    ),
    ("rr_other", "Other", "Autre"),
];

/// The refund motives the API accepts, in the order offered.
pub const REFUND_REASONS: [&str; 5] = [
    "requested_by_customer",
    "duplicate",
    "fraudulent",
    "customer_dispute",
    "other",
];

/// A key of this table, or None.
fn word(lang: Lang, key: &str) -> Option<&'static str> {
    WORDS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, en, fr)| if lang == Lang::Fr { *fr } else { *en })
}

/// A status as people say it (the code itself when it is one we do not know).
pub fn status(lang: Lang, code: &str) -> String {
    word(lang, &format!("st_{code}")).map_or_else(|| code.to_string(), str::to_string)
}

/// A word of this table by its prefix and code (`op_`, `oc_`, `dl_`…);
/// the code itself when there is none.
pub fn word_of(lang: Lang, prefix: &str, code: &str) -> String {
    word(lang, &format!("{prefix}{code}")).map_or_else(|| code.to_string(), str::to_string)
}

/// A refund motive as people say it.
pub fn refund_reason(lang: Lang, code: &str) -> String {
    word(lang, &format!("rr_{code}")).map_or_else(|| code.to_string(), str::to_string)
}

/// Why something failed and what to do next, from its `failure_code`.
pub fn reason(lang: Lang, code: &str) -> (String, &'static str) {
    match (
        word(lang, &format!("why_{code}")),
        word(lang, &format!("next_{code}")),
    ) {
        (Some(why), Some(next)) => (why.to_string(), next),
        _ => (
            format!("{} ({code}).", t(lang, "why_unknown")),
            t(lang, "next_unknown"),
        ),
    }
}

/// A status for a table cell: the words, and for a failure its reason
/// (`failure_code` of the API's answer `v`), escaped.
pub fn status_cell(lang: Lang, v: &serde_json::Value) -> String {
    let code = v["status"].as_str().unwrap_or_default();
    let mut out = format!(
        "<span class=\"st st-{}\">{}</span>",
        esc(code),
        esc(&status(lang, code))
    );
    if let Some(f) = v["failure_code"].as_str().filter(|f| !f.is_empty()) {
        out.push_str(&format!("<br><small>{}</small>", esc(&reason(lang, f).0)));
    }
    out
}

/// A failure's whole story for a page: the reason, then what to do next.
pub fn failure_block(lang: Lang, v: &serde_json::Value) -> String {
    let Some(code) = v["failure_code"].as_str().filter(|f| !f.is_empty()) else {
        return String::new();
    };
    let (why, next) = reason(lang, code);
    format!(
        "<div class=\"failure\" role=\"note\"><p><strong>{}</strong></p><p>{} {}</p></div>",
        esc(&why),
        esc(t(lang, "next_label")),
        esc(next)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_code_has_a_reason_and_a_next_step_in_both_languages() {
        for code in [
            "insufficient_funds",
            "declined_by_customer",
            "approval_expired",
            "otp_attempts_exceeded",
            "payer_not_found",
            "recipient_not_found",
            "recipient_not_allowed",
            "limit_reached",
            "account_blocked",
            "phone_invalid",
            "cancelled",
            "operator_error",
            "operator_unavailable",
            "operator_not_reached",
        ] {
            for lang in [Lang::En, Lang::Fr] {
                assert!(word(lang, &format!("why_{code}")).is_some(), "{code}");
                assert!(word(lang, &format!("next_{code}")).is_some(), "{code}");
            }
        }
        assert_eq!(status(Lang::Fr, "failed"), "Échoué");
        assert_eq!(status(Lang::En, "brand_new"), "brand_new");
        assert!(reason(Lang::En, "XYZ_42").0.contains("XYZ_42"));
        assert_eq!(
            refund_reason(Lang::Fr, "requested_by_customer"),
            "Demandé par le client"
        );
    }
}
