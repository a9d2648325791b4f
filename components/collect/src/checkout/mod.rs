//! The hosted checkout page (`checkout_url`): server-rendered HTML for the
//! customer, in French or English, phone-sized, no JavaScript needed (live
//! status is a meta refresh that asks the PSP). Choose the operator, enter
//! the phone, give the OTP when the operator needs one, then watch the
//! status until it is final.

mod flow;
mod html;
mod words;

pub use flow::handle;
