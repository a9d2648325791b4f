//! The words of the bulk, developers, links and overview pages:
//! (key, English, French), looked up by `mmc_console_kit::html::t` after the
//! frame's own, once added (at start, or [`add`] in tests).

use mmc_console_kit::words::Table;

/// The pages' tables.
pub(crate) const TABLES: &[Table] = &[
    MORE,
    crate::charts::WORDS,
    crate::overview::WORDS,
    mmc_console_account::keys::WORDS,
];

/// Makes the pages' words known to the frame, as the server does at start
/// through [`crate::Pages`]; again changes nothing.
pub fn add() {
    mmc_console_kit::add_words(TABLES);
}

pub const MORE: &[(&str, &str, &str)] = &[
    ("finance", "Finance", "Finance"),
    ("books", "Books", "Comptabilité"),
    ("net", "Net", "Net"),
    ("opening", "opened at", "ouverture"),
    ("closing", "closed at", "clôture"),
    ("drift", "drift", "écart"),
    (
        "drift_warn",
        "the stated balances do not add up with the movements, drift",
        "les soldes annoncés ne concordent pas avec les mouvements, écart",
    ),
    (
        "no_rate_card",
        "No rate card for this provider: its fee is not known here.",
        "Pas de barème pour ce fournisseur : ses frais ne sont pas connus ici.",
    ),
    (
        "reconciled_on",
        "Reconciled with the provider's books of",
        "Rapproché des écritures du fournisseur du",
    ),
    ("the_case", "the case", "l'écart"),
    (
        "reconcile_now",
        "Reconcile this day now",
        "Rapprocher cette journée maintenant",
    ),
    (
        "balances",
        "Balances at the providers, now",
        "Soldes chez les fournisseurs, maintenant",
    ),
    ("account", "Account", "Compte"),
    ("wallet", "Wallet", "Portefeuille"),
    ("available", "Available", "Disponible"),
    ("reserved", "Reserved", "Réservé"),
    (
        "unreadable",
        "cannot be read now",
        "illisible pour l'instant",
    ),
    ("reconciliation_of", "Reconciliation of", "Rapprochement du"),
    ("date", "Day", "Jour"),
    ("show", "Show", "Afficher"),
    (
        "export_day",
        "Export the day (CSV)",
        "Exporter la journée (CSV)",
    ),
    (
        "not_reconciled_yet",
        "This day has not been reconciled yet.",
        "Cette journée n'a pas encore été rapprochée.",
    ),
    ("reconciled", "reconciled", "rapproché"),
    ("day_incomplete", "incomplete", "incomplet"),
    (
        "not_final",
        "the provider may still add to this day",
        "le fournisseur peut encore compléter cette journée",
    ),
    ("category", "Category", "Catégorie"),
    (
        "records_by_category",
        "Records by category,",
        "Opérations par catégorie,",
    ),
    ("matched", "Matched", "Concordant"),
    (
        "missing_at_provider",
        "Missing at the provider",
        "Absent chez le fournisseur",
    ),
    ("missing_here", "Missing here", "Absent chez nous"),
    ("status_differs", "Status differs", "Statut différent"),
    ("amount_differs", "Amount differs", "Montant différent"),
    (
        "fee_differs",
        "Fee differs from the rate card",
        "Frais différents du barème",
    ),
    ("duplicate", "Duplicate", "Doublon"),
    (
        "balance_drift",
        "Wallet balance does not add up",
        "Solde du portefeuille incohérent",
    ),
    ("bad_category", "No such category.", "Catégorie inconnue."),
    ("open_cases", "Open cases", "Écarts ouverts"),
    ("opened", "Opened", "Ouvert le"),
    ("record", "Record", "Opération"),
    ("no_open_cases", "No open case.", "Aucun écart ouvert."),
    ("kind", "Kind", "Type"),
    (
        "psp_reference",
        "Provider's reference",
        "Référence du fournisseur",
    ),
    ("provider_id", "Provider's id", "Identifiant du fournisseur"),
    ("fee", "Fee", "Frais"),
    (
        "expected_fee",
        "Fee by the rate card",
        "Frais selon le barème",
    ),
    (
        "no_record_here",
        "We have no record of it.",
        "Nous n'en avons aucune trace.",
    ),
    (
        "no_record_there",
        "The provider has no record of it.",
        "Le fournisseur n'en a aucune trace.",
    ),
    ("case_open", "Open", "Ouvert"),
    ("case_resolved", "Resolved", "Résolu"),
    (
        "case_closed",
        "Closed: both books agree now",
        "Clos : les deux comptabilités concordent",
    ),
    ("found_on", "found on", "trouvé le"),
    ("our_books", "Our books", "Nos écritures"),
    (
        "provider_books",
        "The provider's books",
        "Les écritures du fournisseur",
    ),
    (
        "resolution_note",
        "How it was settled",
        "Comment l'écart a été réglé",
    ),
    ("resolve", "Mark resolved", "Marquer résolu"),
    (
        "note_required",
        "Say how the case was settled (a note of 1 to 2000 characters).",
        "Dites comment l'écart a été réglé (une note de 1 à 2000 caractères).",
    ),
    (
        "case_not_open",
        "This case is no longer open.",
        "Cet écart n'est plus ouvert.",
    ),
    ("bulk", "Bulk payouts", "Paiements groupés"),
    ("upload", "Upload a CSV", "Importer un CSV"),
    ("file", "CSV file", "Fichier CSV"),
    ("name", "Name", "Nom"),
    ("description", "Description", "Description"),
    (
        "csv_columns",
        "The file's first line names its columns:",
        "La première ligne du fichier nomme ses colonnes :",
    ),
    (
        "csv_report",
        "Nothing was created. Fix these lines and upload the file again:",
        "Rien n'a été créé. Corrigez ces lignes et importez le fichier à nouveau :",
    ),
    ("line", "Line", "Ligne"),
    ("outcome", "Outcome", "Issue"),
    ("outcome_done", "done", "effectué"),
    ("outcome_refused", "refused", "refusé"),
    (
        "outcome_unknown",
        "no answer: it may have been done",
        "sans réponse : peut-être effectué",
    ),
    (
        "outcome_pending",
        "not recorded: the service stopped before the answer",
        "non enregistrée : le service s'est arrêté avant la réponse",
    ),
    ("column", "Column", "Colonne"),
    ("problem", "Problem", "Problème"),
    (
        "no_file",
        "Choose a CSV file.",
        "Choisissez un fichier CSV.",
    ),
    (
        "bad_upload",
        "The upload could not be read; choose the file again.",
        "L'envoi n'a pas pu être lu ; choisissez le fichier à nouveau.",
    ),
    ("items", "Items", "Lignes"),
    ("beneficiary", "Beneficiary", "Bénéficiaire"),
    ("note", "Why", "Pourquoi"),
    (
        "insufficient_float",
        "Waiting for float: nothing sent yet",
        "En attente de provision : rien n'est encore envoyé",
    ),
    ("holds", "holds", "dispose de"),
    (
        "held_items",
        "Waiting for a route",
        "En attente d'une route",
    ),
    (
        "unconfirmed_items",
        "Outcome not confirmed yet (still in progress; the operator is asked again)",
        "Résultat pas encore confirmé (toujours en cours ; l'opérateur est interrogé à nouveau)",
    ),
    ("review", "To check", "À vérifier"),
    ("since", "since", "depuis"),
    ("refresh", "Refresh", "Actualiser"),
    ("progress", "Progress", "Avancement"),
    ("created_by", "Created by", "Créé par"),
    ("approved_by", "Approved by", "Approuvé par"),
    ("newer", "Newer", "Plus récents"),
    (
        "maker_checker",
        "You created this batch: another person with the finance or owner role approves it.",
        "Vous avez créé ce lot : une autre personne (rôle finance ou propriétaire) l'approuve.",
    ),
    ("developers", "Developers", "Développeurs"),
    ("api_keys", "API keys", "Clés d'API"),
    ("scopes", "Scopes", "Portées"),
    ("create_key", "Create a key", "Créer une clé"),
    (
        "key_once",
        "Copy this key now: it is shown once and cannot be shown again.",
        "Copiez cette clé maintenant : elle n'est affichée qu'une fois.",
    ),
    ("revoke", "Revoke", "Révoquer"),
    ("made_by", "Made by", "Créée par"),
    (
        "service_key",
        "service key (command line)",
        "clé de service (ligne de commande)",
    ),
    ("revoked", "revoked", "révoquée"),
    ("last_used", "Last used", "Dernière utilisation"),
    (
        "endpoints",
        "Webhook endpoints",
        "Points de terminaison webhook",
    ),
    ("url", "URL", "URL"),
    ("events", "Events", "Événements"),
    (
        "add_endpoint",
        "Add an endpoint",
        "Ajouter un point de terminaison",
    ),
    ("disable", "Disable", "Désactiver"),
    ("enable", "Enable", "Activer"),
    ("rotate", "Rotate the secret", "Renouveler le secret"),
    (
        "secret_once",
        "The endpoint's signing secret, shown once:",
        "Le secret de signature du point de terminaison, affiché une fois :",
    ),
    ("request", "Request", "Requête"),
    ("answer", "Answer", "Réponse"),
    (
        "no_scope",
        "Choose at least one scope.",
        "Choisissez au moins une portée.",
    ),
    ("links", "Payment links", "Liens de paiement"),
    ("create_link", "Create a link", "Créer un lien"),
    (
        "expires_days",
        "Expires after (days, 1 to 30)",
        "Expire après (jours, 1 à 30)",
    ),
    ("any_operator", "Customer chooses", "Au choix du client"),
    ("link", "Link", "Lien"),
    (
        "link_share",
        "Send this link or QR code by WhatsApp or SMS:",
        "Envoyez ce lien ou ce code QR par WhatsApp ou SMS :",
    ),
    (
        "qr_alt",
        "QR code of the payment link",
        "Code QR du lien de paiement",
    ),
    (
        "bad_days",
        "expiry: a whole number of days from 1 to 30.",
        "expiration : un nombre entier de jours de 1 à 30.",
    ),
    (
        "bad_description",
        "description: 1 to 200 characters.",
        "description : de 1 à 200 caractères.",
    ),
    ("expires", "Expires", "Expire le"),
    ("overview", "Overview", "Vue d'ensemble"),
    ("today", "Today", "Aujourd'hui"),
    ("last_30", "Last 30 days", "30 derniers jours"),
    ("volume", "Volume", "Volume"),
    ("count", "Payments", "Paiements"),
    ("success_rate", "Success rate", "Taux de réussite"),
    ("per_day", "Per day", "Par jour"),
    ("per_operator", "Per operator", "Par opérateur"),
    ("operators_now", "Operators now", "Opérateurs en ce moment"),
    ("country", "Country", "Pays"),
    ("total", "Total", "Total"),
    ("not_chosen", "(not chosen yet)", "(pas encore choisi)"),
    ("active", "active", "active"),
    ("enabled", "enabled", "activé"),
    (
        "fresh_code",
        "A new code from your authenticator",
        "Un nouveau code de votre application d'authentification",
    ),
    (
        "code_needed",
        "Enter a new code from your authenticator to do this.",
        "Saisissez un nouveau code de votre application d'authentification pour le faire.",
    ),
    (
        "code_wrong",
        "This code is wrong or was already used: wait for the next one and enter it.",
        "Ce code est faux ou déjà utilisé : attendez le suivant et saisissez-le.",
    ),
    (
        "enrol_by_link",
        "Two-factor authentication is set up in the session opened by your invitation or reset link. Ask an owner to reset your access to get a new link.",
        "L'authentification à deux facteurs s'active dans la session ouverte par votre lien d'invitation ou de réinitialisation. Demandez à un propriétaire de réinitialiser votre accès pour recevoir un nouveau lien.",
    ),
    (
        "totp_replace",
        "Replace your authenticator: enter a code from the current one",
        "Remplacer votre application d'authentification : saisissez un code de l'actuelle",
    ),
    (
        "approvals_held",
        "Approves no payout until {} (access reset).",
        "N'approuve aucun paiement avant le {} (accès réinitialisé).",
    ),
    (
        "reset_hold",
        "{} cannot approve payouts until {}.",
        "{} ne peut approuver aucun paiement avant le {}.",
    ),
    (
        "reset_mailed",
        "{}'s password, second factor and sessions are cleared; a one-time link to choose a new password was mailed to them.",
        "Le mot de passe, le second facteur et les sessions de {} sont effacés ; un lien à usage unique pour choisir un nouveau mot de passe lui a été envoyé par courriel.",
    ),
    (
        "reset_not_mailed",
        "{}'s password, second factor and sessions are cleared, but the mail with their new link could not be sent ({}). Reset their access again once mail works.",
        "Le mot de passe, le second facteur et les sessions de {} sont effacés, mais le courriel avec le nouveau lien n'a pas pu partir ({}). Réinitialisez à nouveau son accès quand les courriels partent.",
    ),
    (
        "invite_mailed",
        "{} is invited: a one-time link to choose a password was mailed to them.",
        "{} est invité·e : un lien à usage unique pour choisir un mot de passe lui a été envoyé par courriel.",
    ),
    (
        "invite_not_mailed",
        "{} is invited, but the mail with their link could not be sent ({}). Reset their access below once mail works: a new link goes to them.",
        "{} est invité·e, mais le courriel avec son lien n'a pas pu partir ({}). Réinitialisez son accès ci-dessous quand les courriels partent : un nouveau lien lui sera envoyé.",
    ),
    (
        "invite_mail_subject",
        "Your invitation to the payments console of {}",
        "Votre invitation à la console de paiement de {}",
    ),
    (
        "invite_mail_body",
        "{} invites you to the payments console of {}, as {}.\r\n\r\nChoose your password with this link; it works once, for 72 hours:\r\n\r\n{}\r\n\r\nIf you do not expect this, ignore this mail.\r\n",
        "{} vous invite à la console de paiement de {}, en tant que {}.\r\n\r\nChoisissez votre mot de passe avec ce lien ; il sert une fois, pendant 72 heures :\r\n\r\n{}\r\n\r\nSi vous ne vous y attendiez pas, ignorez ce courriel.\r\n",
    ),
    (
        "reset_mail_subject",
        "Your new sign-in link for {}",
        "Votre nouveau lien de connexion pour {}",
    ),
    (
        "reset_mail_body",
        "{} reset your access to the payments console of {}.\r\n\r\nChoose a new password with this link; it works once, for 72 hours:\r\n\r\n{}\r\n\r\nYou cannot approve payouts until {}. If you did not ask for this, tell {} or another owner of your team at once.\r\n",
        "{} a réinitialisé votre accès à la console de paiement de {}.\r\n\r\nChoisissez un nouveau mot de passe avec ce lien ; il sert une fois, pendant 72 heures :\r\n\r\n{}\r\n\r\nVous ne pouvez approuver aucun paiement avant le {}. Si vous ne l'avez pas demandé, prévenez aussitôt {} ou un autre propriétaire de votre équipe.\r\n",
    ),
    ("disabled", "disabled", "désactivé"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use mmc_console_kit::html::{Lang, all_words, tf};

    #[test]
    fn words_exist_in_both_languages_and_escape() {
        add();
        for (k, en, fr) in all_words() {
            let found = all_words().filter(|w| w.0 == *k);
            assert_eq!(found.count(), 1, "{k} once");
            assert!(!en.is_empty() && !fr.is_empty(), "{k}");
            assert_eq!(en.matches("{}").count(), fr.matches("{}").count(), "{k}");
        }
        assert_eq!(
            tf(Lang::Fr, "confirm_cancel", &["<p>"]),
            "Annuler le paiement &lt;p&gt; ?"
        );
        assert_eq!(Lang::pick(None, None, Some("fr-FR,fr;q=0.9")), Lang::Fr);
        assert_eq!(Lang::pick(Some("en"), Some("fr"), None), Lang::En);
    }

    /// Every word the console's code (its three crates) asks for by name is in a table: a key
    /// named in `t(l, "…")`, `tf(…)` or `plain(…)` that is not would show
    /// as `⟦?⟧`.
    #[test]
    fn every_word_asked_for_exists() {
        add();
        let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut missing = Vec::new();
        let entries = ["console-kit", "console-account", "console"]
            .iter()
            .flat_map(|c| std::fs::read_dir(crates.join(c).join("src")).unwrap());
        for entry in entries {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let code = std::fs::read_to_string(&path).unwrap();
            for call in ["t(", "tf(", "plain("] {
                for (at, _) in code.match_indices(call) {
                    let before = code[..at].chars().last().unwrap_or(' ');
                    if before.is_alphanumeric() || before == '_' {
                        continue;
                    }
                    let args = &code[at + call.len()..];
                    let Some((lang, rest)) = args.split_once(',') else {
                        continue;
                    };
                    let lang = lang.trim();
                    if !["l", "lang", "req.lang", "Lang::En", "Lang::Fr"].contains(&lang) {
                        continue;
                    }
                    let Some(key) = rest.trim_start().strip_prefix('"') else {
                        continue;
                    };
                    let key = key.split('"').next().unwrap();
                    let named = key
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
                    if named && !all_words().any(|(k, _, _)| *k == key) {
                        missing.push(format!("{}: {key}", path.display()));
                    }
                }
            }
        }
        assert!(
            missing.is_empty(),
            "words asked for but missing: {missing:?}"
        );
    }
}
