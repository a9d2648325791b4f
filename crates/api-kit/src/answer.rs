//! An HTTP answer as a component hands it to the host.

use serde::Serialize;

/// Status, headers and body: what a component's `Response` carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    /// `body` as JSON, with its media type.
    pub fn json(status: u16, body: &impl Serialize) -> Answer {
        Answer {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: serde_json::to_vec(body).expect("JSON values serialise"),
        }
    }

    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Answer {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// `From<Answer>` for a component's generated `Response` (each component
/// has its own type of the same shape): `mmc_api_kit::response_from_answer!(Response);`
#[macro_export]
macro_rules! response_from_answer {
    ($response:ty) => {
        impl From<$crate::Answer> for $response {
            fn from(a: $crate::Answer) -> $response {
                Self {
                    status: a.status,
                    headers: a.headers,
                    body: a.body,
                }
            }
        }
    };
}

/// A component's glue to the kit, written once: its `Response` from an
/// [`Answer`], `respond(e, base_url)`, and a storage failure as an
/// [`crate::ApiError`], logged through its `log` import. With the
/// component's generated `Response`, `CapabilityError` and `log` in scope:
/// `mmc_api_kit::component_errors!(Response, CapabilityError, log);`
#[macro_export]
macro_rules! component_errors {
    ($response:ty, $capability_error:ident, $log:ident) => {
        $crate::response_from_answer!($response);

        /// `e` as this component answers it to a client of `base_url`.
        pub fn respond(e: $crate::ApiError, base_url: &str) -> $response {
            e.into_answer(base_url).into()
        }

        impl From<$capability_error> for $crate::ApiError {
            fn from(e: $capability_error) -> Self {
                if let $capability_error::Conflict(m) = &e {
                    $log::log($log::Level::Info, &format!("storage conflict: {m}"));
                    return $crate::ApiError::storage_conflict();
                }
                $log::log($log::Level::Error, &format!("storage: {e:?}"));
                $crate::ApiError::storage(matches!(e, $capability_error::Unavailable(_)))
            }
        }
    };
}
