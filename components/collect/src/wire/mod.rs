//! Wire formats of the current generation: parsing and validating requests
//! (every constraint of the spec's table, naming the offending `param`), and
//! the JSON shapes of Payment, NextAction and the catalogue.

mod create;
mod fields;
mod http;
mod views;

pub use create::{CreatePayment, parse_create_object};
pub use fields::metadata;
pub use http::{
    body_object, check_api_version, header, json_response, optional_body_object, parse_bool_param,
    query_param, reject_unknown,
};
pub use views::{PaymentView, catalogue_json, legacy_collection};
