//! Native endpoints of the webhooks capability (served by the host, not a
//! component): `/api/v1/webhook-endpoints` and `/api/v1/events`.

use serde_json::{Value, json};

use super::errors::ApiError;
use super::native::{NativeRequest, NativeResponse};
use mmc_accounts::Principal;
use mmc_webhooks::{WebhookError, Webhooks};

/// What a webhooks error means to the client.
fn refused(e: WebhookError) -> ApiError {
    match e {
        WebhookError::Invalid(message, param) => {
            ApiError::invalid("parameter_invalid", param, message)
        }
        WebhookError::NotFound(what) => {
            ApiError::no_such("resource_not_found", format!("No such {what}."))
        }
        WebhookError::TooManyEndpoints => {
            ApiError::bad_request("webhook_endpoints_limit_reached", e.to_string())
        }
        WebhookError::Storage(
            e @ (mmc_db::StorageError::Unavailable(_) | mmc_db::StorageError::Conflict(_)),
        ) => ApiError::unavailable(e.to_string()),
        WebhookError::Storage(e) => ApiError::internal(e.to_string()),
        // Never the key or the value: only that the secret cannot be opened.
        WebhookError::Sealing(e) => ApiError::internal(e.to_string()),
        WebhookError::Body(e) => ApiError::internal(e),
        WebhookError::Unreadable => ApiError::internal(e.to_string()),
    }
}

/// A query parameter that is text: decoded, with no control character (a
/// NUL is no text PostgreSQL can compare, and no id or event type holds one).
fn text_param(req: &NativeRequest, name: &'static str) -> Result<Option<String>, ApiError> {
    match req.query(name) {
        Some(v) if v.chars().any(char::is_control) => Err(ApiError::invalid(
            "parameter_invalid",
            name,
            format!("{name} must be text without control characters."),
        )),
        v => Ok(v),
    }
}

fn string_list(v: &Value, field: &'static str) -> Result<Vec<String>, ApiError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(vec!["*".into()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str().map(str::to_string).ok_or_else(|| {
                    ApiError::invalid(
                        "parameter_invalid",
                        field,
                        format!("{field} must be a list of strings."),
                    )
                })
            })
            .collect(),
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid",
            field,
            format!("{field} must be a list of strings."),
        )),
    }
}

pub async fn handle(
    webhooks: &Webhooks,
    who: &Principal,
    req: NativeRequest,
) -> Result<NativeResponse, ApiError> {
    let path = req.path.trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).skip(2).collect(); // after /api/v1
    let env = who.environment;
    match (req.method.as_str(), segments.as_slice()) {
        ("POST", ["webhook-endpoints"]) => create_endpoint(webhooks, who, &req).await,
        ("GET", ["webhook-endpoints"]) => {
            let list = req
                .blocking(|| webhooks.list_endpoints(&who.merchant_id, env))
                .map_err(refused)?;
            Ok(NativeResponse::json(
                200,
                json!({"object": "list", "data": list}),
            ))
        }
        ("DELETE", ["webhook-endpoints", id]) => {
            req.blocking(|| webhooks.delete_endpoint(&who.merchant_id, env, id))
                .map_err(refused)?;
            Ok(NativeResponse::json(
                200,
                json!({"id": id, "object": "webhook_endpoint", "deleted": true}),
            ))
        }
        ("POST", ["webhook-endpoints", id]) if *id != "callback-secret" => {
            set_disabled(webhooks, who, &req, id)
        }
        ("POST", ["webhook-endpoints", id, "rotate-secret"]) => {
            let e = req
                .blocking(|| webhooks.rotate_secret(&who.merchant_id, env, id))
                .map_err(refused)?;
            Ok(NativeResponse::json(200, json!(e)))
        }
        ("GET", ["webhook-endpoints", "callback-secret"]) => {
            let secret = req
                .blocking(|| webhooks.callback_secret(&who.merchant_id, env.as_str()))
                .map_err(refused)?;
            Ok(NativeResponse::json(
                200,
                json!({"object": "callback_secret", "secret": secret}),
            ))
        }
        ("GET", ["events"]) => list_events(webhooks, who, &req),
        ("GET", ["events", id]) => Ok(NativeResponse::json(
            200,
            req.blocking(|| webhooks.event(&who.merchant_id, env, id))
                .map_err(refused)?,
        )),
        ("POST", ["events", id, "resend"]) => {
            let n = req
                .blocking(|| webhooks.resend(&who.merchant_id, env, id))
                .map_err(refused)?;
            Ok(NativeResponse::json(
                202,
                json!({"id": id, "object": "event", "deliveries_queued": n}),
            ))
        }
        (method, ["webhook-endpoints"]) => {
            Err(ApiError::method_not_allowed(method, "GET, HEAD, POST"))
        }
        (method, ["webhook-endpoints", "callback-secret"]) => {
            Err(ApiError::method_not_allowed(method, "GET, HEAD"))
        }
        (method, ["webhook-endpoints", _]) => {
            Err(ApiError::method_not_allowed(method, "POST, DELETE"))
        }
        (method, ["webhook-endpoints", _, "rotate-secret"]) => {
            Err(ApiError::method_not_allowed(method, "POST"))
        }
        (method, ["events"] | ["events", _]) => {
            Err(ApiError::method_not_allowed(method, "GET, HEAD"))
        }
        (method, ["events", _, "resend"]) => Err(ApiError::method_not_allowed(method, "POST")),
        _ => Err(ApiError::no_such(
            "resource_not_found",
            format!("No such endpoint: {} {}", req.method, req.path),
        )),
    }
}

/// `POST /webhook-endpoints`: `url`, `enabled_events`, an optional
/// `description`; nothing else.
async fn create_endpoint(
    webhooks: &Webhooks,
    who: &Principal,
    req: &NativeRequest,
) -> Result<NativeResponse, ApiError> {
    let body = req.json_object()?;
    if let Some(k) = body.as_object().and_then(|o| {
        o.keys()
            .find(|k| !["url", "enabled_events", "description"].contains(&k.as_str()))
    }) {
        return Err(ApiError::invalid(
            "parameter_unknown",
            k,
            format!("Unknown parameter '{k}'."),
        ));
    }
    let url = body
        .get("url")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid("parameter_missing", "url", "url is required."))?;
    let events = string_list(&body, "enabled_events")?;
    // A description that is not text is refused, not silently dropped.
    let description = match body.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            return Err(ApiError::invalid(
                "parameter_invalid_string",
                "description",
                "description must be a string.",
            ));
        }
    };
    let e = webhooks
        .create_endpoint(&who.merchant_id, who.environment, url, events, description)
        .await
        .map_err(refused)?;
    Ok(NativeResponse::json(201, json!(e)))
}

/// `POST /webhook-endpoints/{id}`: `disabled`, the one field that changes.
fn set_disabled(
    webhooks: &Webhooks,
    who: &Principal,
    req: &NativeRequest,
    id: &str,
) -> Result<NativeResponse, ApiError> {
    let body = req.json_object()?;
    let o = body.as_object().expect("a JSON object");
    if let Some(k) = o.keys().find(|k| k.as_str() != "disabled") {
        return Err(ApiError::invalid(
            "parameter_unknown",
            k,
            format!("Unknown parameter '{k}'; an endpoint's disabled can be changed."),
        ));
    }
    let disabled = match o.get("disabled") {
        Some(Value::Bool(b)) => *b,
        _ => {
            return Err(ApiError::invalid(
                "parameter_invalid_boolean",
                "disabled",
                "disabled is required: true or false.",
            ));
        }
    };
    let e = req
        .blocking(|| webhooks.set_disabled(&who.merchant_id, who.environment, id, disabled))
        .map_err(refused)?;
    Ok(NativeResponse::json(200, json!(e)))
}

/// `GET /events`: newest first, filtered by `type` and `payment`, paged by
/// `limit` (1 to 100) and `starting_after`.
fn list_events(
    webhooks: &Webhooks,
    who: &Principal,
    req: &NativeRequest,
) -> Result<NativeResponse, ApiError> {
    let limit = match req.query("limit") {
        None => 20,
        Some(l) => l
            .parse::<u32>()
            .ok()
            .filter(|l| (1..=100).contains(l))
            .ok_or_else(|| {
                ApiError::invalid(
                    "parameter_out_of_range",
                    "limit",
                    "limit must be an integer from 1 to 100.",
                )
            })?,
    };
    let event_type = text_param(req, "type")?;
    if let Some(t) = &event_type {
        Webhooks::validate_events(std::slice::from_ref(t)).map_err(refused)?;
    }
    // An empty value is no filter and no cursor (`?starting_after=`).
    let given = |name| text_param(req, name).map(|v| v.filter(|v| !v.is_empty()));
    let (payment, after) = (given("payment")?, given("starting_after")?);
    let (data, has_more) = req
        .blocking(|| {
            webhooks.list_events(
                &who.merchant_id,
                who.environment,
                event_type.as_deref(),
                payment.as_deref(),
                after.as_deref(),
                limit,
            )
        })
        .map_err(refused)?;
    Ok(NativeResponse::json(
        200,
        json!({"object": "list", "data": data, "has_more": has_more}),
    ))
}
