//! The audit log's words, and the actions its page offers.

use crate::html::{Lang, t};

/// The audit log's words: (key, English, French), looked up by [`super::html::t`].
/// An action's name is `audit.` and the action.
pub const WORDS: &[(&str, &str, &str)] = &[
    ("ad_password", "with a password", "avec un mot de passe"),
    (
        "ad_second_factor",
        "with a password and a second factor",
        "avec un mot de passe et un second facteur",
    ),
    (
        "ad_first_invitation",
        "first password, from an invitation",
        "premier mot de passe, par une invitation",
    ),
    (
        "ad_first_reset",
        "first password after a reset",
        "premier mot de passe après une réinitialisation",
    ),
    ("ad_wrong_password", "wrong password", "mot de passe erroné"),
    (
        "ad_replaced",
        "replaced: a new one to confirm",
        "remplacé : un nouveau à confirmer",
    ),
    (
        "ad_wrong_code",
        "wrong second-factor code",
        "code de second facteur erroné",
    ),
    ("audit.payment.refund", "Refund", "Remboursement"),
    (
        "audit.payment.cancel",
        "Cancel a payment",
        "Annulation d'un paiement",
    ),
    (
        "audit.event.resend",
        "Resend an event",
        "Renvoi d'un événement",
    ),
    ("audit.link.create", "Payment link", "Lien de paiement"),
    ("audit.bulk.upload", "Batch upload", "Import d'un lot"),
    (
        "audit.bulk.approve",
        "Batch approval",
        "Approbation d'un lot",
    ),
    ("audit.bulk.reject", "Batch rejection", "Rejet d'un lot"),
    ("audit.key.create", "API key created", "Clé d'API créée"),
    ("audit.key.shown", "API key shown", "Clé d'API affichée"),
    ("audit.key.revoke", "API key revoked", "Clé d'API révoquée"),
    (
        "audit.endpoint.add",
        "Webhook endpoint added",
        "Adresse de webhook ajoutée",
    ),
    (
        "audit.endpoint.disable",
        "Webhook endpoint paused",
        "Adresse de webhook suspendue",
    ),
    (
        "audit.endpoint.enable",
        "Webhook endpoint resumed",
        "Adresse de webhook réactivée",
    ),
    (
        "audit.endpoint.rotate_secret",
        "Webhook secret renewed",
        "Secret de webhook renouvelé",
    ),
    (
        "audit.reconciliation.run",
        "Reconciliation run",
        "Rapprochement lancé",
    ),
    (
        "audit.reconciliation.case.resolve",
        "Reconciliation case resolved",
        "Écart de rapprochement résolu",
    ),
    ("audit.session.sign_in", "Sign-in", "Connexion"),
    ("audit.session.sign_out", "Sign-out", "Déconnexion"),
    (
        "audit.session.end",
        "Session ended by an owner",
        "Session fermée par un propriétaire",
    ),
    ("audit.user.invite", "Invitation", "Invitation"),
    (
        "audit.user.invite_accepted",
        "Invitation accepted",
        "Invitation acceptée",
    ),
    ("audit.user.reset", "Access reset", "Accès réinitialisé"),
    (
        "audit.user.reset_accepted",
        "New password after a reset",
        "Nouveau mot de passe après réinitialisation",
    ),
    ("audit.user.remove", "Member removed", "Membre retiré"),
    (
        "audit.user.password_changed",
        "Password changed",
        "Mot de passe modifié",
    ),
    (
        "audit.user.totp_enabled",
        "Second factor enabled",
        "Second facteur activé",
    ),
    (
        "audit.user.totp_disabled",
        "Second factor disabled",
        "Second facteur désactivé",
    ),
    ("audit_everyone", "Everyone", "Tout le monde"),
    ("audit_any_action", "Any action", "Toute action"),
    ("audit_any_outcome", "Any outcome", "Toute issue"),
    (
        "audit_not_known",
        "not known (no answer, or not recorded)",
        "inconnue (sans réponse ou non enregistrée)",
    ),
    (
        "audit_none",
        "No entry matches these filters.",
        "Aucune entrée ne correspond à ces filtres.",
    ),
];

/// The actions the log's page offers as a filter, in the order it lists them.
pub const ACTIONS: &[&str] = &[
    "payment.refund",
    "payment.cancel",
    "event.resend",
    "link.create",
    "bulk.upload",
    "bulk.approve",
    "bulk.reject",
    "key.create",
    "key.shown",
    "key.revoke",
    "endpoint.add",
    "endpoint.disable",
    "endpoint.enable",
    "endpoint.rotate_secret",
    "reconciliation.run",
    "reconciliation.case.resolve",
    "session.sign_in",
    "session.sign_out",
    "session.end",
    "user.invite",
    "user.invite_accepted",
    "user.reset",
    "user.reset_accepted",
    "user.remove",
    "user.password_changed",
    "user.totp_enabled",
    "user.totp_disabled",
];

/// An action in the reader's words (its own name when this build has none).
pub fn action_words(l: Lang, action: &str) -> String {
    match t(l, &format!("audit.{action}")) {
        "?" => action.to_string(),
        words => words.to_string(),
    }
}
