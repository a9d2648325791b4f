//! Endpoints the host serves itself (webhook endpoints, events, admin): the
//! request as they see it, and their JSON answers.

use mmc_domain::http::decode_component;
use serde_json::Value;

use super::errors::ApiError;
use super::*;

pub struct NativeRequest {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl NativeRequest {
    /// A query parameter, its name and value percent-decoded (`%3A`, `+`).
    pub fn query(&self, name: &str) -> Option<String> {
        self.query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| decode_component(k) == name)
            .map(|(_, v)| decode_component(v))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json_object(&self) -> Result<Value, ApiError> {
        match serde_json::from_slice::<Value>(&self.body) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err(ApiError::bad_request(
                "invalid_json",
                "The body must be a JSON object.",
            )),
        }
    }

    /// Storage work from an async handler: SQLite calls block, so step off the
    /// async worker while they run.
    pub fn blocking<T>(&self, f: impl FnOnce() -> T) -> T {
        tokio::task::block_in_place(f)
    }
}

pub struct NativeResponse {
    pub status: u16,
    pub body: Value,
}

impl NativeResponse {
    pub fn json(status: u16, body: Value) -> NativeResponse {
        NativeResponse { status, body }
    }
}

pub fn native_request(parts: &hyper::http::request::Parts, body: Bytes) -> NativeRequest {
    NativeRequest {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        headers: headers_of(parts),
        body: body.to_vec(),
    }
}

pub fn native_response(
    app: &App,
    result: Result<NativeResponse, ApiError>,
) -> Response<Full<Bytes>> {
    let answer = match result {
        Ok(r) => mmc_api_kit::Answer::json(r.status, &r.body),
        Err(e) => e.into_answer(&app.base_url),
    };
    let mut resp = Response::builder()
        .status(StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    for (name, value) in &answer.headers {
        resp = resp.header(name, value);
    }
    resp.body(Full::new(Bytes::from(answer.body)))
        .expect("valid response parts")
}
