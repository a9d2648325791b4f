//! The `payments` export: the same rules, typed, for facades (legacy). The
//! typed request is turned into the current generation's body and validated
//! by the same parser, so no rule exists twice.

use serde_json::{Map, Value, json};

use crate::exports::mmc::api::payments::Guest;
use crate::mmc::api::http_types::Caller;
use crate::mmc::api::payment_types::{
    CreateRequest, Created, Failure, Generation as WitGeneration, Payment as WitPayment,
};
use crate::store::{self, Generation, Payment};
use crate::{ApiError, Collect, payments, wire};

fn failure(e: ApiError) -> Failure {
    Failure {
        status: e.status,
        code: e.code.into(),
        message: e.message,
        param: e.param,
    }
}

pub fn to_wit(p: &Payment) -> WitPayment {
    WitPayment {
        id: p.id.clone(),
        reference: p.reference.clone(),
        status: p.status.as_str().into(),
        amount: p.amount,
        currency: p.currency.clone(),
        country: p.country.clone(),
        mode: p.mode.as_str().into(),
        operator: p.operator.clone(),
        phone: p.customer.as_ref().and_then(|c| c.phone.clone()),
        psp_reference: p.psp_reference.clone(),
        checkout_url: p.checkout_url.clone(),
        failure_code: p.failure.as_ref().map(|f| f.code.clone()),
        failure_message: p.failure.as_ref().map(|f| f.message.clone()),
        created_at_ms: p.created_at_ms,
        completed_at_ms: p.completed_at_ms,
        expires_at_ms: p.expires_at_ms,
        generation: match p.generation {
            Generation::Current => WitGeneration::Current,
            Generation::Legacy => WitGeneration::Legacy,
        },
    }
}

fn body_of(req: &CreateRequest) -> Value {
    let mut m = Map::new();
    m.insert("reference".into(), json!(req.reference));
    m.insert("amount".into(), json!(req.amount));
    m.insert("currency".into(), json!(req.currency));
    m.insert("country".into(), json!(req.country));
    m.insert("mode".into(), json!(req.mode));
    if let Some(op) = &req.operator {
        m.insert("operator".into(), json!(op));
    }
    if let Some(c) = &req.customer {
        m.insert(
            "customer".into(),
            json!({"phone": c.phone, "first_name": c.first_name, "last_name": c.last_name}),
        );
    }
    if let Some(d) = &req.description {
        m.insert("description".into(), json!(d));
    }
    Value::Object(m)
}

impl Guest for Collect {
    fn create(caller: Caller, req: CreateRequest) -> Result<Created, Failure> {
        let key = req
            .idempotency_key
            .as_deref()
            .map(payments::parse_idempotency_key)
            .transpose()
            .map_err(failure)?;
        let body = body_of(&req);
        let Value::Object(m) = &body else {
            unreachable!("built as an object")
        };
        let input = wire::parse_create_object(m, &caller.environment).map_err(failure)?;
        let generation = match req.generation {
            WitGeneration::Current => Generation::Current,
            WitGeneration::Legacy => Generation::Legacy,
        };
        let (p, replay) =
            payments::create_payment(&caller, input, key, &body, generation).map_err(failure)?;
        Ok(Created {
            payment: to_wit(&p),
            replay,
        })
    }

    fn get(caller: Caller, reference_or_id: String, sync: bool) -> Result<WitPayment, Failure> {
        let p = store::read_payment(&caller.environment, &caller.merchant_id, &reference_or_id)
            .map_err(failure)?
            .ok_or_else(|| failure(ApiError::payment_not_found(&reference_or_id)))?;
        let p = if sync {
            payments::sync_with_psp(p).map_err(failure)?
        } else {
            p
        };
        Ok(to_wit(&p))
    }

    fn confirm(
        caller: Caller,
        reference_or_id: String,
        otp: String,
    ) -> Result<WitPayment, Failure> {
        payments::confirm(&caller, &reference_or_id, &otp)
            .map(|p| to_wit(&p))
            .map_err(failure)
    }
}
