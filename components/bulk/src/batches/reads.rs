//! Reading batches: one by id, the merchant's list by page, and a batch's
//! items in batch order, by page, of one status or all.

use super::*;

/// `GET /bulk-payments/{id}/`: the batch; while some of its items wait for
/// a route, how many and why (`held`); while the outcome of some of its
/// payouts cannot be read, how many and why (`unconfirmed`).
pub fn get(caller: &Caller, id: &str) -> Result<Response, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let b = store::read_batch(env, merchant, id)?.ok_or_else(|| ApiError::batch_not_found(id))?;
    let mut body = wire::batch_json(&b);
    let held = held_items(env, merchant, &b)?;
    if !held.is_empty() {
        body["held"] = wire::summary_json(&held);
    }
    if b.counts.processing > 0 {
        let unconfirmed = store::unconfirmed(env, merchant, &b.id, b.counts.processing)?;
        if !unconfirmed.is_empty() {
            body["unconfirmed"] = wire::summary_json(&unconfirmed);
        }
    }
    Ok(json_response(200, &body))
}

/// The batch's items held for want of a route. Only pending items are held,
/// and none lies before the cursor: the walk starts there and stops once
/// every pending item was seen.
fn held_items(env: &str, merchant: &str, b: &Batch) -> Result<Vec<store::Held>, ApiError> {
    let mut held = Vec::new();
    if b.status != BatchStatus::Processing {
        return Ok(held);
    }
    let (mut position, mut pending) = (b.cursor, 0);
    while pending < b.counts.pending {
        let chunk = store::scan_items(env, merchant, &b.id, position, 500)?;
        let Some(last) = chunk.last() else {
            break;
        };
        position = last.position + 1;
        for item in chunk
            .into_iter()
            .filter(|i| i.status == ItemStatus::Pending)
        {
            pending += 1;
            held.extend(item.held);
        }
    }
    Ok(held)
}

/// `GET /bulk-payments/`: newest first, by page.
pub fn list(caller: &Caller, req: &Request) -> Result<Response, ApiError> {
    let page = wire::page(req)?;
    let (count, batches) = store::list_batches(
        &caller.environment,
        &caller.merchant_id,
        page.offset(),
        page.size,
    )?;
    let results = batches.iter().map(wire::batch_json).collect();
    Ok(json_response(
        200,
        &wire::page_json(&caller.base_url, ROOT, &[], page, count, results),
    ))
}

/// Items in batch order; `?status=` keeps one status.
pub fn items(caller: &Caller, req: &Request, id: &str) -> Result<Response, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let batch =
        store::read_batch(env, merchant, id)?.ok_or_else(|| ApiError::batch_not_found(id))?;
    let page = wire::page(req)?;
    let status_param = wire::query_param(req, "status")?;
    let status = status_param
        .as_deref()
        .map(|s| {
            ItemStatus::parse(s).ok_or_else(|| {
                ApiError::invalid(
                    "parameter_invalid",
                    "status",
                    "status must be pending, processing, completed or failed.",
                )
            })
        })
        .transpose()?;
    let offset = page.offset().min(u32::MAX as u64) as u32;
    let (count, found) = match status {
        // Positions are dense: the page is one scan.
        None => (
            batch.item_count,
            store::scan_items(env, merchant, id, offset, page.size)?,
        ),
        Some(wanted) => (
            batch.counts.of(wanted),
            items_with_status(env, merchant, id, wanted, offset, page.size)?,
        ),
    };
    let keep: Vec<(&str, &str)> = status_param
        .as_deref()
        .map(|s| ("status", s))
        .into_iter()
        .collect();
    let results = found.iter().map(wire::item_json).collect();
    Ok(json_response(
        200,
        &wire::page_json(
            &caller.base_url,
            &format!("{ROOT}{id}/items/"),
            &keep,
            page,
            count as u64,
            results,
        ),
    ))
}

/// Walks the batch in order for the page of items in `wanted`.
fn items_with_status(
    env: &str,
    merchant: &str,
    batch: &str,
    wanted: ItemStatus,
    offset: u32,
    size: u32,
) -> Result<Vec<Item>, ApiError> {
    let (mut position, mut skipped, mut out) = (0, 0, Vec::new());
    loop {
        let chunk = store::scan_items(env, merchant, batch, position, 500)?;
        let Some(last) = chunk.last() else {
            return Ok(out);
        };
        position = last.position + 1;
        for item in chunk.into_iter().filter(|i| i.status == wanted) {
            if skipped < offset {
                skipped += 1;
            } else {
                out.push(item);
                if out.len() as u32 == size {
                    return Ok(out);
                }
            }
        }
    }
}
