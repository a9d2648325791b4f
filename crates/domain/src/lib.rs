//! Domain rules written once and compiled into the components: the operator
//! table, the numbering plans, the payment state machine and time formatting.
//! Plain Rust, no I/O, so it is tested natively with `cargo test`.

pub mod event;
pub mod http;
pub mod json;
pub mod legacy;
pub mod operator_ids;
pub mod operators;
pub mod outcome;
pub mod payment;
pub mod phone;
pub mod record;
pub mod settlement;
pub mod time;

pub use operators::{Country, OPERATORS, Operator};
pub use payment::{Mode, Status};
