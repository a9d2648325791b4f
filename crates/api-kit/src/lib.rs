//! What every API component shares, beside the adapter kit: the current
//! generation's errors and their JSON ([`ApiError`]), JSON answers
//! ([`Answer`]) and `multipart/form-data` ([`multipart`], on `multer`).
//!
//! It names no WIT type, so every component (each with its own generated
//! `Response`) and the host (the console's uploads) use the same code: a
//! component turns an [`Answer`] into its `Response` in one `From`.

mod answer;
mod error;
pub mod multipart;

pub use answer::Answer;
pub use error::{ApiError, CONFLICT_ATTEMPTS, again_on_conflict};
