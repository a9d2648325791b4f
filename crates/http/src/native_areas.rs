//! The areas of the public listener the host serves itself (the webhook
//! endpoints and events): which paths are theirs, and the key checked, its
//! limits counted and the body read before their handler sees the request.

use super::native::{native_request, native_response};
use super::principal::{Admitted, Door, admit};
use super::*;

/// An area the host serves itself on the public listener (the admin API is
/// on the admin listener).
#[derive(Clone, Copy)]
pub enum NativeArea {
    Webhooks,
    Books,
}

impl NativeArea {
    pub fn label(self) -> &'static str {
        match self {
            NativeArea::Webhooks => "webhooks",
            NativeArea::Books => "books",
        }
    }
}

/// The area a path belongs to, if the host serves it itself.
pub fn native_area(path: &str) -> Option<NativeArea> {
    let under = |prefix| mmc_common::paths::under(path, prefix);
    if under("/api/v1/webhook-endpoints") || under("/api/v1/events") {
        return Some(NativeArea::Webhooks);
    }
    if under("/api/v1/balances") || under("/api/v1/reconciliation") {
        return Some(NativeArea::Books);
    }
    None
}

/// A request to one of the host's own areas: its key admitted, its body
/// read, the area's handler called, its answer as JSON.
pub async fn native_dispatch(
    app: &Arc<App>,
    area: NativeArea,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, HttpError> {
    let Admitted {
        principal,
        parts,
        body,
        ..
    } = admit(app, req, Door::Keyed, None).await?;
    // A keyed door lets no request in without the principal of its key.
    let Some(principal) = principal else {
        return Err(HttpError::MissingKey);
    };
    let request = native_request(&parts, body);
    let result = match area {
        NativeArea::Webhooks => super::webhooks::handle(&app.webhooks, &principal, request).await,
        NativeArea::Books => {
            let who = (
                principal.merchant_id.as_str(),
                principal.environment.as_str(),
            );
            crate::books::public(&app.books, who, request).await
        }
    };
    Ok(native_response(app, result))
}
