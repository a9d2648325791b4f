//! The overview page's words.

/// The overview's words: (key, English, French), looked up by [`mmc_console_kit::html::t`].
pub const WORDS: &[(&str, &str, &str)] = &[
    (
        "ov_compare",
        "Last 30 days compared with the 30 days before",
        "30 derniers jours comparés aux 30 jours d'avant",
    ),
    ("ov_measure", "Figure", "Indicateur"),
    ("ov_before", "The 30 days before", "Les 30 jours d'avant"),
    ("ov_change", "Change", "Évolution"),
    ("ov_points", "{} pts", "{} pts"),
    ("ov_day", "Day", "Jour"),
    (
        "ov_volume_per_day",
        "Volume collected per day",
        "Volume encaissé par jour",
    ),
    (
        "ov_rate_per_day",
        "Success rate per day",
        "Taux de réussite par jour",
    ),
    (
        "ov_volume_per_operator",
        "Volume collected per operator, last 30 days",
        "Volume encaissé par opérateur, 30 derniers jours",
    ),
    (
        "ov_volume_earlier",
        "Volume 30 days earlier",
        "Volume 30 jours plus tôt",
    ),
    (
        "ov_rate_earlier",
        "Success rate 30 days earlier",
        "Taux de réussite 30 jours plus tôt",
    ),
    ("ov_paid", "Paid", "Payés"),
    ("ov_known", "With an outcome", "Avec une issue"),
    ("ov_one_payment", "{} payment", "{} paiement"),
    ("ov_payments", "{} payments", "{} paiements"),
    (
        "ov_says_volume",
        "{}: {}, {}; {}: {}",
        "{} : {}, {} ; {} : {}",
    ),
    (
        "ov_says_rate",
        "{}: {} ({} of {} with an outcome); {}: {}",
        "{} : {} ({} sur {} avec une issue) ; {} : {}",
    ),
    (
        "ov_volume_summary",
        "{} collected over the last 30 days, {} the 30 days before.",
        "{} encaissés sur les 30 derniers jours, {} les 30 jours d'avant.",
    ),
    (
        "ov_best_day",
        "The best day: {}, with {}.",
        "Le meilleur jour : le {}, avec {}.",
    ),
    (
        "ov_says_operator",
        "{}: {}; the 30 days before: {}",
        "{} : {} ; les 30 jours d'avant : {}",
    ),
    (
        "ov_rate_summary",
        "{} of the payments with an outcome succeeded over the last 30 days, {} the 30 days before.",
        "{} des paiements avec une issue ont réussi sur les 30 derniers jours, {} les 30 jours d'avant.",
    ),
    (
        "ov_operator_summary",
        "Operators: {}; the largest, {}, collected {}.",
        "Opérateurs : {} ; le premier, {}, a encaissé {}.",
    ),
    ("ov_month_1", "Jan", "janv."),
    ("ov_month_2", "Feb", "févr."),
    ("ov_month_3", "Mar", "mars"),
    ("ov_month_4", "Apr", "avr."),
    ("ov_month_5", "May", "mai"),
    ("ov_month_6", "Jun", "juin"),
    ("ov_month_7", "Jul", "juil."),
    ("ov_month_8", "Aug", "août"),
    ("ov_month_9", "Sep", "sept."),
    ("ov_month_10", "Oct", "oct."),
    ("ov_month_11", "Nov", "nov."),
    ("ov_month_12", "Dec", "déc."),
];
