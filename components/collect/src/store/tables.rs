//! Each table's reads and writes inside a transaction, keeping the indexes
//! in step with the records.

use mmc_domain::record::Payment;

use crate::ApiError;

use super::codec::{decode, decode_payment, encode, encode_payment};
use super::indexes::{Listed, listing_key};
use super::keys::{idem_row, owner_row, pspref_row, reference_row, scope, time_key};
use super::records::{IdemRecord, Refund, RefundIdem};
use super::search;
use super::transaction::Tx;

impl Tx {
    pub fn payment(
        &self,
        env: &str,
        merchant: &str,
        id: &str,
    ) -> Result<Option<Payment>, ApiError> {
        let key = scope(env, merchant, id);
        if let Some(p) = self.with_decoded(&key, Payment::clone) {
            return Ok(Some(p));
        }
        let p = match self.get("payments", &key)? {
            Some(stored) => Some(decode_payment(&stored)?),
            None => None,
        };
        if let Some(p) = &p {
            self.remember_payment(key, p);
        }
        Ok(p)
    }

    pub fn payment_id_by_reference(
        &self,
        env: &str,
        merchant: &str,
        reference: &str,
    ) -> Result<Option<String>, ApiError> {
        let (table, key) = reference_row(env, merchant, reference);
        Ok(self
            .get(table, &key)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    pub fn idem(
        &self,
        env: &str,
        merchant: &str,
        key: &str,
    ) -> Result<Option<IdemRecord>, ApiError> {
        let (table, key) = idem_row(env, merchant, key);
        decode(self.get(table, &key)?)
    }

    pub fn put_idem(
        &self,
        env: &str,
        merchant: &str,
        key: &str,
        rec: &IdemRecord,
    ) -> Result<(), ApiError> {
        let (table, key) = idem_row(env, merchant, key);
        self.put(table, &key, &encode(rec))
    }

    pub fn refund_idem(
        &self,
        env: &str,
        merchant: &str,
        key: &str,
    ) -> Result<Option<RefundIdem>, ApiError> {
        decode(self.get("refund_idem", &scope(env, merchant, key))?)
    }

    pub fn put_refund_idem(
        &self,
        env: &str,
        merchant: &str,
        key: &str,
        rec: &RefundIdem,
    ) -> Result<(), ApiError> {
        self.put("refund_idem", &scope(env, merchant, key), &encode(rec))
    }

    /// Inserts a new payment with its reference and expiry indexes.
    pub fn insert_payment(&self, p: &Payment) -> Result<(), ApiError> {
        let (table, key) = reference_row(&p.environment, &p.merchant_id, &p.reference);
        self.put(table, &key, p.id.as_bytes())?;
        self.put(
            "expiry",
            &time_key(p.expires_at_ms, &p.environment, &p.merchant_id, &p.id),
            b"",
        )?;
        // Callbacks and checkout links carry no merchant: find it from the id.
        let (table, key) = owner_row(&p.environment, &p.id);
        self.put(table, &key, p.merchant_id.as_bytes())?;
        self.put("listing", &listing_key(&Listed::of(p)), b"")?;
        self.index_search(p)?;
        self.write_payment(p, None)
    }

    /// Writes `p`, keeping the `expiry`, `active` and `listing` indexes in
    /// step with its status, and `search` with its phone. `previous_check`
    /// is the `next_check_ms` it was stored with. (`pspref` is kept by
    /// [`Tx::index_psp_reference`].)
    pub fn save_payment(&self, p: &Payment, previous_check: Option<u64>) -> Result<(), ApiError> {
        // As stored before this write (a draft knows it from the read that
        // loaded `p`, so this costs no storage call there): its listing key
        // when the entry moves, and its phone's digits.
        let key = scope(&p.environment, &p.merchant_id, &p.id);
        let after = Listed::of(p);
        let indexed = |stored: &Payment| {
            let listed = Listed::of(stored);
            let stale = (listed != after).then(|| listing_key(&listed));
            (stale, search::phone_digits(stored))
        };
        let before = match self.with_decoded(&key, indexed) {
            Some(before) => Some(before),
            None => match self.get("payments", &key)? {
                Some(stored) => Some(indexed(&decode_payment(&stored)?)),
                None => None,
            },
        };
        // A new payment is listed; a stored one moves only when its entry changed.
        let (moved, stale, phone) = match before {
            None => (true, None, None),
            Some((stale, phone)) => (stale.is_some(), stale, phone),
        };
        if moved {
            if let Some(stale) = stale {
                self.delete("listing", &stale)?;
            }
            self.put("listing", &listing_key(&after), b"")?;
        }
        self.reindex_phone(p, phone.as_deref())?;
        self.write_payment(p, previous_check)
    }

    fn write_payment(&self, p: &Payment, previous_check: Option<u64>) -> Result<(), ApiError> {
        let (env, m, id) = (&p.environment, &p.merchant_id, &p.id);
        // A check kept as it was (the operator's answer keeps the poll its
        // intent scheduled) stays where it is: no index row written.
        if previous_check != p.next_check_ms {
            if let Some(at) = previous_check {
                self.delete("active", &time_key(at, env, m, id))?;
            }
            // A final payment is due for a check only after a callback (a late success).
            if let Some(at) = p.next_check_ms {
                self.put("active", &time_key(at, env, m, id), b"")?;
            }
        }
        if p.status.is_terminal() {
            self.delete("expiry", &time_key(p.expires_at_ms, env, m, id))?;
        }
        let key = scope(env, m, id);
        self.put("payments", &key, &encode_payment(p))?;
        // Read back in this transaction (rare), it is decoded from what was written.
        self.forget_payment(&key);
        Ok(())
    }

    /// Indexes `p` by the reference its operator gave it (callbacks carry only
    /// that). Called where the reference is set, not at every save: a
    /// reference never changes once given, and each write is a B-tree leaf.
    pub fn index_psp_reference(&self, p: &Payment) -> Result<(), ApiError> {
        if let (Some(op), Some(r)) = (p.operator.as_deref(), p.psp_reference.as_deref()) {
            let (table, key) = pspref_row(&p.environment, op, r);
            let payment = [p.merchant_id.as_str(), &p.id].join("/");
            self.put(table, &key, payment.as_bytes())?;
        }
        Ok(())
    }

    /// The merchant owning payment or refund `id` (callbacks carry no merchant).
    pub fn owner(&self, env: &str, id: &str) -> Result<Option<String>, ApiError> {
        let (table, key) = owner_row(env, id);
        Ok(self
            .get(table, &key)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// (merchant, id) of the payment an operator knows by `psp_reference`.
    pub fn by_psp_reference(
        &self,
        env: &str,
        operator: &str,
        psp_reference: &str,
    ) -> Result<Option<(String, String)>, ApiError> {
        let (table, key) = pspref_row(env, operator, psp_reference);
        Ok(self.get(table, &key)?.and_then(|b| {
            let s = String::from_utf8_lossy(&b).into_owned();
            s.split_once('/')
                .map(|(m, i)| (m.to_string(), i.to_string()))
        }))
    }

    pub fn refund(&self, env: &str, merchant: &str, id: &str) -> Result<Option<Refund>, ApiError> {
        decode(self.get("refunds", &scope(env, merchant, id))?)
    }

    /// Writes a refund, keeping `refund_active` in step. `previous_check` as for payments.
    pub fn save_refund(&self, r: &Refund, previous_check: Option<u64>) -> Result<(), ApiError> {
        let (env, m, id) = (
            r.environment.as_str(),
            r.merchant_id.as_str(),
            r.id.as_str(),
        );
        if let Some(at) = previous_check {
            self.delete("refund_active", &time_key(at, env, m, id))?;
        }
        if let Some(at) = r.next_check_ms {
            self.put("refund_active", &time_key(at, env, m, id), b"")?;
        }
        let (table, key) = owner_row(env, id);
        self.put(table, &key, m.as_bytes())?;
        self.put(
            "payment_refunds",
            &[env, m, &r.payment_id, id].join("/"),
            b"",
        )?;
        self.put("refunds", &scope(env, m, id), &encode(r))
    }
}
