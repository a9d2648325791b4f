//! The integration tests' test attribute, `#[service_test]`.
//!
//! Every test of `tests/api`, `tests/adapters` and `tests/bulk` runs on a
//! multi-threaded tokio runtime with two workers (components call back into
//! the runtime from blocking threads), and most begin by starting a service.
//! `#[service_test]` says both at once, in the spirit of `#[sqlx::test]`:
//!
//! ```text
//! use crate::support::*;
//! use mmc_test_kit::service_test;
//!
//! // A service of its own, started by `crate::support::spawn_app()`.
//! #[service_test]
//! async fn a_created_payment_is_processing(app: TestApp) {
//!     let key = app.test_key("Shop");
//!     let (_, p) = app.create_ok(&key, &direct_payment("+2290166000001")).await;
//!     assert_eq!(p["status"], "processing");
//! }
//!
//! // No argument: the test starts what it needs itself.
//! #[service_test]
//! async fn a_payment_to_0001_completes() {
//!     let app = spawn_app_completing_after(0).await;
//!     // …
//! }
//! ```
//!
//! Either form expands to `#[tokio::test(flavor = "multi_thread",
//! worker_threads = 2)]` on the same function, so the test keeps its name;
//! with the argument, the function takes none and its body begins with
//! `let app: TestApp = crate::support::spawn_app().await;` (the argument's
//! own pattern and type). The test binary must have `mod support` at its
//! root and depend on tokio with its `macros` and `rt-multi-thread`
//! features. Other attributes (`#[ignore]`, `#[should_panic]`) stay.

use proc_macro::TokenStream;
use quote::quote;
use syn::{FnArg, ItemFn, parse_macro_input};

/// A multi-threaded tokio test (two workers); with an argument `app:
/// TestApp`, handed a service started by `crate::support::spawn_app()`.
/// See the crate's documentation.
#[proc_macro_attribute]
pub fn service_test(args: TokenStream, item: TokenStream) -> TokenStream {
    if !args.is_empty() {
        let args = proc_macro2::TokenStream::from(args);
        return syn::Error::new_spanned(args, "#[service_test] takes no arguments")
            .to_compile_error()
            .into();
    }
    let mut test = parse_macro_input!(item as ItemFn);
    match expand(&mut test) {
        Ok(()) => quote! {
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #test
        }
        .into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Moves the one argument, if any, into a `let` that starts the service.
fn expand(test: &mut ItemFn) -> syn::Result<()> {
    let sig = &test.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new_spanned(
            sig.fn_token,
            "#[service_test] needs an `async fn`",
        ));
    }
    if sig.inputs.len() > 1 {
        return Err(syn::Error::new_spanned(
            &sig.inputs,
            "#[service_test] hands a test one argument, its `app: TestApp`",
        ));
    }
    let Some(input) = test.sig.inputs.pop().map(|p| p.into_value()) else {
        return Ok(());
    };
    let FnArg::Typed(arg) = input else {
        return Err(syn::Error::new_spanned(
            input,
            "#[service_test] is for free functions",
        ));
    };
    let (pat, ty) = (&arg.pat, &arg.ty);
    let start: syn::Stmt = syn::parse_quote! {
        let #pat: #ty = crate::support::spawn_app().await;
    };
    test.block.stmts.insert(0, start);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::expand;
    use quote::quote;
    use syn::{ItemFn, parse_quote};

    fn expanded(mut test: ItemFn) -> syn::Result<String> {
        expand(&mut test).map(|()| quote!(#test).to_string())
    }

    #[test]
    fn the_argument_becomes_a_started_service() {
        let test = parse_quote! {
            #[ignore]
            async fn a_test(app: TestApp) { app.check().await; }
        };
        let want = quote! {
            #[ignore]
            async fn a_test() {
                let app: TestApp = crate::support::spawn_app().await;
                app.check().await;
            }
        };
        assert_eq!(expanded(test).unwrap(), want.to_string());
    }

    #[test]
    fn a_test_without_argument_is_left_as_written() {
        let test: ItemFn = parse_quote! { async fn a_test() { start().await; } };
        assert_eq!(expanded(test.clone()).unwrap(), quote!(#test).to_string());
    }

    #[test]
    fn a_test_that_is_not_async_or_takes_two_arguments_is_refused() {
        let sync = parse_quote! { fn a_test(app: TestApp) {} };
        assert!(expanded(sync).is_err());
        let two = parse_quote! { async fn a_test(app: TestApp, other: TestApp) {} };
        assert!(expanded(two).is_err());
    }
}
