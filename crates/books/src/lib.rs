//! The rules of the books, with no I/O: what a provider's statement line
//! says ([`Line`]), what we recorded ([`Ours`]), the one [`Category`] a
//! record and its lines land in ([`judge`]), the fee a rate card expects
//! ([`RateCard`]), and a day's counts and totals ([`Tally`]).
//!
//! The provider's books outrank ours: a difference is never corrected here,
//! only named, so that a person settles it (a case).

pub mod amount;
pub mod rate_card;
pub mod tally;
pub mod wallet;

pub use amount::Amount;
pub use rate_card::RateCard;
pub use tally::Tally;

use serde::{Deserialize, Serialize};

/// Where one record (ours, the provider's, or both) lands. Exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Both books say the same: the same money moved (or none did).
    Matched,
    /// We say money moved; the provider has no record of it.
    MissingAtProvider,
    /// The provider moved money we have no record of.
    MissingHere,
    /// One side says done, the other failed or still in progress (a late
    /// arrival: ours failed, the provider's executed).
    StatusDiffers,
    /// The provider moved another amount or currency than ours.
    AmountDiffers,
    /// The provider's fee is not what the rate card says.
    FeeDiffers,
    /// The provider moved it more than once.
    Duplicate,
    /// Not a record's: a wallet whose stated closing balance is not its
    /// opening plus the day's movements (a case of its own, never counted
    /// among the records).
    BalanceDrift,
}

impl Category {
    /// The categories a record lands in (a wallet's drift is not one).
    pub const ALL: [Category; 7] = [
        Category::Matched,
        Category::MissingAtProvider,
        Category::MissingHere,
        Category::StatusDiffers,
        Category::AmountDiffers,
        Category::FeeDiffers,
        Category::Duplicate,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Matched => "matched",
            Category::MissingAtProvider => "missing_at_provider",
            Category::MissingHere => "missing_here",
            Category::StatusDiffers => "status_differs",
            Category::AmountDiffers => "amount_differs",
            Category::FeeDiffers => "fee_differs",
            Category::Duplicate => "duplicate",
            Category::BalanceDrift => "balance_drift",
        }
    }

    /// A record's category ([`Category::ALL`]) or a wallet's (`balance_drift`).
    pub fn parse(s: &str) -> Option<Category> {
        Category::ALL
            .into_iter()
            .chain([Category::BalanceDrift])
            .find(|c| c.as_str() == s)
    }

    /// Whether it is a difference a person must settle.
    pub fn is_mismatch(self) -> bool {
        self != Category::Matched
    }
}

/// What a movement is, on either side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Collection,
    Refund,
    Payout,
    Fee,
    Adjustment,
    TopUp,
    Settlement,
    Other,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Collection => "collection",
            Kind::Refund => "refund",
            Kind::Payout => "payout",
            Kind::Fee => "fee",
            Kind::Adjustment => "adjustment",
            Kind::TopUp => "top_up",
            Kind::Settlement => "settlement",
            Kind::Other => "other",
        }
    }

    /// The kinds that are one of our operations (the others exist only in
    /// the provider's books: its fees, adjustments, top-ups, settlements).
    pub fn is_operation(self) -> bool {
        matches!(self, Kind::Collection | Kind::Refund | Kind::Payout)
    }

    /// The rate card's name for it.
    pub fn operation(self) -> &'static str {
        self.as_str()
    }
}

/// Where one of our records stands, for the books: did money move?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OurStatus {
    /// The money moved (a refunded payment's collection moved too).
    Completed,
    /// It did not, and never will.
    Failed,
    /// Not known yet: no money moved as far as we know.
    InProgress,
}

/// One of our payments, refunds or payouts, as the books need it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ours {
    pub id: String,
    pub kind: Kind,
    pub merchant_id: String,
    pub environment: String,
    pub operator: Option<String>,
    pub amount: u64,
    pub currency: String,
    pub status: OurStatus,
    /// Our status as the API says it (`completed`, `refunded`, `failed`…).
    pub stated: String,
    pub psp_reference: Option<String>,
    pub created_at_ms: u64,
    /// When it became final here (completed or failed), if it is.
    #[serde(default)]
    pub settled_at_ms: Option<u64>,
    /// A payout's batch (where its owner finds it to check it again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
}

/// One movement on the provider's statement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub provider_id: String,
    pub our_id: Option<String>,
    pub psp_reference: Option<String>,
    pub kind: Kind,
    pub amount: Amount,
    /// None: the statement does not say it on the movement.
    pub fee: Option<Amount>,
    pub currency: String,
    /// `completed`, `failed`, `pending` or `reversed`.
    pub status: String,
    pub operator_transaction_id: Option<String>,
    pub at_ms: u64,
    pub wallet: Option<String>,
    /// The wallet's balance right after it (signed hundredths), when the
    /// provider states it.
    #[serde(default)]
    pub balance_after: Option<i64>,
}

impl Line {
    /// A movement the provider undid: the money went back.
    pub fn is_reversal(&self) -> bool {
        self.status == "reversed"
    }

    pub fn executed(&self) -> bool {
        self.status == "completed"
    }
}

/// The category of one record of ours (if any) and the provider's lines
/// for it (any number), with the fee the rate card expects for it, if a
/// card applies. Mismatches are named in this order: duplicate, amount,
/// status, fee (the first that holds).
pub fn judge(ours: Option<&Ours>, lines: &[&Line], expected_fee: Option<u64>) -> Category {
    let Some(ours) = ours else {
        // Only what moved money can be missing here.
        return if lines.iter().any(|l| l.executed()) {
            Category::MissingHere
        } else {
            Category::Matched
        };
    };
    let (reversals, moves): (Vec<&Line>, Vec<&Line>) =
        lines.iter().copied().partition(|l| l.is_reversal());
    let executed: Vec<&Line> = moves.iter().copied().filter(|l| l.executed()).collect();
    if executed.len() > 1 {
        return Category::Duplicate;
    }
    let Some(theirs) = executed.first() else {
        return match ours.status {
            // We say it moved; the provider has no record of it.
            OurStatus::Completed if lines.is_empty() => Category::MissingAtProvider,
            // We say it moved; the provider says it failed, waits, or undid it.
            OurStatus::Completed => Category::StatusDiffers,
            _ => Category::Matched,
        };
    };
    if theirs.currency != ours.currency || theirs.amount != Amount::whole(ours.amount) {
        return Category::AmountDiffers;
    }
    // Executed then reversed: the provider's books end with nothing moved.
    let moved = reversals.is_empty();
    if moved != (ours.status == OurStatus::Completed) {
        return Category::StatusDiffers;
    }
    if let (Some(fee), Some(theirs_fee)) = (expected_fee, theirs.fee)
        && moved
        && theirs_fee != Amount::whole(fee)
    {
        return Category::FeeDiffers;
    }
    Category::Matched
}

#[cfg(test)]
mod tests;
