//! The API's refusals in the console's languages. The API answers in
//! English, with a stable `code` and the offending `param`; a page shows the
//! code's sentence in its language (in French naming the field), and keeps
//! the API's own words (which carry the specifics: a limit, an amount) for
//! a code these tables do not know.

use crate::html::Lang;

/// (code, French sentence).
const FRENCH: &[(&str, &str)] = &[
    (
        "operator_busy",
        "L'opérateur est occupé : rien ne lui a été envoyé. Réessayez dans un instant.",
    ),
    (
        "insufficient_scope",
        "Votre rôle ne permet pas cette action.",
    ),
    (
        "second_approver_required",
        "Ce lot doit être validé par une autre personne que celle qui l'a créé.",
    ),
    (
        "approval_on_hold",
        "L'accès de cette personne a été réinitialisé : elle ne peut rien approuver pendant 24 heures.",
    ),
    ("parameter_missing", "Un champ obligatoire manque."),
    ("parameter_invalid", "Un champ a une valeur non acceptée."),
    ("parameter_invalid_string", "Un champ doit être un texte."),
    (
        "parameter_invalid_integer",
        "Un champ doit être un nombre entier.",
    ),
    ("parameter_invalid_object", "Un champ doit être un objet."),
    (
        "parameter_invalid_boolean",
        "Un champ doit valoir oui ou non.",
    ),
    ("parameter_invalid_empty", "Un champ ne doit pas être vide."),
    (
        "parameter_too_long",
        "Un texte dépasse la longueur permise.",
    ),
    (
        "parameter_out_of_range",
        "Un nombre est hors des limites permises.",
    ),
    ("parameter_unknown", "Un champ inconnu a été envoyé."),
    ("parameter_duplicate", "Un seul fichier est accepté."),
    (
        "parameter_invalid_array",
        "La liste des paiements est invalide.",
    ),
    (
        "amount_too_small",
        "Le montant est trop petit (100 au moins).",
    ),
    (
        "amount_out_of_range",
        "Le montant est hors des limites de l'opérateur.",
    ),
    (
        "currency_not_supported",
        "Cette devise n'est pas celle du pays (XOF).",
    ),
    (
        "country_not_supported",
        "Ce pays n'est pas servi (BJ, TG ou CI).",
    ),
    ("operator_not_supported", "Opérateur inconnu."),
    (
        "operator_country_mismatch",
        "Cet opérateur ne sert pas ce pays.",
    ),
    (
        "operator_unavailable",
        "Cet opérateur n'est pas disponible en ce moment.",
    ),
    (
        "mode_not_supported",
        "Cet opérateur ne propose pas ce mode de paiement.",
    ),
    (
        "phone_invalid",
        "Ce numéro n'est pas un numéro mobile du pays.",
    ),
    (
        "url_invalid",
        "Cette adresse web n'est pas acceptée (https, sans identifiants ni adresse IP).",
    ),
    (
        "metadata_too_large",
        "Les métadonnées sont trop volumineuses.",
    ),
    (
        "metadata_invalid",
        "Les métadonnées doivent être des textes, des nombres entiers ou des booléens.",
    ),
    ("invalid_json", "La requête est illisible."),
    ("invalid_body", "La requête est illisible."),
    ("body_missing", "La requête est vide."),
    ("payment_not_found", "Paiement introuvable."),
    ("refund_not_found", "Remboursement introuvable."),
    ("resource_not_found", "Introuvable."),
    (
        "idempotency_key_reused",
        "Ce formulaire a déjà été envoyé avec d'autres valeurs : rechargez la page.",
    ),
    (
        "idempotency_request_in_progress",
        "Cette action est déjà en cours : patientez puis rechargez la page.",
    ),
    (
        "reference_already_used",
        "Cette référence appartient déjà à un autre paiement.",
    ),
    ("payload_too_large", "L'envoi est trop volumineux."),
    (
        "internal_error",
        "Le service n'a pas pu répondre. Réessayez dans un instant ; rien n'a été fait deux fois.",
    ),
    ("otp_invalid_length", "Le code doit compter 4 à 8 chiffres."),
    ("invalid_otp", "Code incorrect."),
    ("otp_not_required", "Ce paiement n'attend pas de code."),
    (
        "otp_confirmation_in_progress",
        "Un code est en cours de vérification ; réessayez dans un instant.",
    ),
    (
        "payment_not_cancellable",
        "Ce paiement ne peut plus être annulé : seul un paiement encore en cours peut l'être.",
    ),
    (
        "payment_not_refundable",
        "Seul un paiement réussi peut être remboursé.",
    ),
    (
        "refund_amount_exceeds_remaining",
        "Ce montant dépasse ce qui reste à rembourser.",
    ),
    (
        "operator_error",
        "L'opérateur a refusé la demande ; rien n'a changé, réessayez.",
    ),
    (
        "rate_limited",
        "Trop de demandes ; réessayez dans un instant.",
    ),
    (
        "webhook_endpoints_limit_reached",
        "Nombre maximal d'adresses de webhook atteint : supprimez-en une d'abord.",
    ),
    ("invalid_items", "Au moins un paiement du lot est invalide."),
    ("invalid_csv", "Au moins une ligne du fichier est invalide."),
    ("items_empty", "Le lot ne contient aucun paiement."),
    (
        "csv_empty",
        "Le fichier est vide (sa première ligne doit être l'en-tête).",
    ),
    (
        "csv_no_rows",
        "Le fichier n'a que son en-tête, aucune ligne de paiement.",
    ),
    (
        "multipart_invalid",
        "L'envoi du fichier est illisible ; choisissez-le à nouveau.",
    ),
    ("too_many_items", "Le lot compte trop de paiements."),
    ("csv_too_large", "Le fichier est trop volumineux."),
    (
        "csv_syntax",
        "Cette ligne n'est pas du CSV valide (guillemets mal fermés ?).",
    ),
    (
        "csv_field_count",
        "Cette ligne n'a pas autant de colonnes que l'en-tête.",
    ),
    ("csv_encoding_invalid", "Le fichier n'est pas en UTF-8."),
    (
        "csv_column_unknown",
        "L'en-tête nomme une colonne inconnue.",
    ),
    ("csv_column_missing", "Il manque une colonne à l'en-tête."),
    (
        "csv_column_duplicate",
        "L'en-tête nomme une colonne deux fois.",
    ),
    (
        "reference_duplicate",
        "Cette référence figure deux fois dans le lot.",
    ),
    (
        "amount_invalid",
        "Le montant doit être un nombre entier positif.",
    ),
    (
        "unsupported_media_type",
        "Ce type de fichier n'est pas accepté (CSV).",
    ),
    (
        "search_too_broad",
        "Cette recherche correspond à trop de paiements : tapez davantage de la référence ou du numéro.",
    ),
    ("bulk_payment_not_found", "Lot introuvable."),
    ("batch_already_validated", "Ce lot a déjà été approuvé."),
    (
        "batch_already_processing",
        "Ce lot est déjà en cours de paiement.",
    ),
    ("batch_rejected", "Ce lot a été rejeté."),
    (
        "batch_not_pending_validation",
        "Ce lot n'attend pas de validation.",
    ),
];

/// (code, English sentence): the refusals a person meets in the console,
/// in plain words rather than the API's, which speak of keys and scopes.
/// A code not here keeps the API's message (it carries the specifics: a
/// limit, an amount).
const ENGLISH: &[(&str, &str)] = &[
    (
        "insufficient_scope",
        "Your role does not allow this. An owner of your team can do it.",
    ),
    (
        "second_approver_required",
        "You created this batch: another person with the finance or owner role approves it.",
    ),
    (
        "approval_on_hold",
        "Your console access was reset: you may approve nothing for 24 hours.",
    ),
    (
        "payment_not_cancellable",
        "This payment can no longer be cancelled: only a payment still in progress can be.",
    ),
    (
        "payment_not_refundable",
        "Only a completed payment can be refunded.",
    ),
    (
        "refund_amount_exceeds_remaining",
        "This amount is more than remains to refund.",
    ),
    (
        "search_too_broad",
        "This search matches too many payments: type more of the reference or the phone.",
    ),
    (
        "batch_already_validated",
        "This batch was already approved.",
    ),
    (
        "batch_already_processing",
        "This batch is already being paid.",
    ),
    ("batch_rejected", "This batch was rejected."),
    (
        "batch_not_pending_validation",
        "This batch does not wait for approval.",
    ),
    (
        "operator_busy",
        "The operator is busy: nothing was sent to it. Try again in a moment.",
    ),
    (
        "internal_error",
        "The service could not answer. Try again in a moment; nothing was done twice.",
    ),
];

/// The API's field names as the French pages name them.
const FRENCH_FIELDS: &[(&str, &str)] = &[
    ("amount", "montant"),
    ("currency", "devise"),
    ("phone", "téléphone"),
    ("reason", "motif"),
    ("reference", "référence"),
    ("description", "description"),
    ("name", "nom"),
    ("email", "e-mail"),
    ("url", "adresse"),
    ("operator", "opérateur"),
    ("country", "pays"),
    ("items", "lignes"),
    ("file", "fichier"),
    ("expires_at", "expiration"),
];

/// The words a form shows for the API's refusal: the code's sentence in the
/// page's language (in French naming the field, `param`); otherwise the
/// API's message.
pub fn words(lang: Lang, code: Option<&str>, param: Option<&str>, message: &str) -> String {
    let table = if lang == Lang::Fr { FRENCH } else { ENGLISH };
    let said = code.and_then(|c| table.iter().find(|(k, _)| *k == c));
    match (said, param, lang) {
        (Some((_, fr)), Some(p), Lang::Fr) if !p.is_empty() => {
            let field = FRENCH_FIELDS
                .iter()
                .find(|(api, _)| *api == p)
                .map_or_else(|| format!("« {p} »"), |(_, f)| (*f).to_string());
            format!("{fr} (champ {field})")
        }
        (Some((_, words)), _, _) => (*words).to_string(),
        (None, _, _) => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn french_pages_get_the_codes_sentence_and_english_ones_the_apis_words() {
        let msg = "amount must be at most 5000 (what remains to refund).";
        assert_eq!(
            words(
                Lang::Fr,
                Some("refund_amount_exceeds_remaining"),
                Some("amount"),
                msg
            ),
            "Ce montant dépasse ce qui reste à rembourser. (champ montant)"
        );
        assert_eq!(
            words(
                Lang::En,
                Some("refund_amount_exceeds_remaining"),
                Some("amount"),
                msg
            ),
            "This amount is more than remains to refund."
        );
        assert_eq!(
            words(Lang::En, Some("amount_out_of_range"), Some("amount"), msg),
            msg
        );
        assert!(
            words(Lang::Fr, Some("parameter_missing"), Some("color"), msg)
                .ends_with("(champ « color »)")
        );
        assert_eq!(words(Lang::Fr, Some("a_code_of_tomorrow"), None, msg), msg);
        assert_eq!(words(Lang::Fr, None, None, msg), msg);
    }

    #[test]
    fn every_code_has_one_sentence() {
        for table in [FRENCH, ENGLISH] {
            let mut codes: Vec<&str> = table.iter().map(|(c, _)| *c).collect();
            codes.sort_unstable();
            let n = codes.len();
            codes.dedup();
            assert_eq!(codes.len(), n, "a code listed twice");
        }
        // Each plain English sentence has its French one.
        for (code, _) in ENGLISH {
            assert!(FRENCH.iter().any(|(c, _)| c == code), "{code}");
        }
    }
}
