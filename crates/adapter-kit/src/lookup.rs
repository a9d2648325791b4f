//! Finding an operation at the provider: by the provider's reference when we
//! have it, else by our id (after an initiation whose answer was lost, the
//! reference was never learnt, but our id went with the request).

use crate::types::{AdapterError, PspStatus};

/// The operation by `reference` when there is one, else the one of
/// `by_our_id`'s answers that [`pick`] keeps.
pub fn find<T>(
    reference: Option<&str>,
    our_id: &str,
    by_reference: impl FnOnce(&str) -> Result<Option<T>, AdapterError>,
    by_our_id: impl FnOnce(&str) -> Result<Vec<T>, AdapterError>,
    prefer: impl Fn(&T) -> bool,
) -> Result<Option<T>, AdapterError> {
    match reference {
        Some(r) => by_reference(r),
        None => Ok(pick(by_our_id(our_id)?, prefer)),
    }
}

/// Several operations under one id of ours would be our bug: the first that
/// `prefer` picks (a paid one, a final one) wins, else the last listed.
pub fn pick<T>(mut found: Vec<T>, prefer: impl Fn(&T) -> bool) -> Option<T> {
    match found.iter().position(prefer) {
        Some(i) => Some(found.swap_remove(i)),
        None => found.pop(),
    }
}

/// The status of what was found; nothing under our id is `not-found` (the
/// service decides when that is final: a request may still be in flight).
pub fn status_of<T>(
    found: Option<T>,
    status: impl FnOnce(&T) -> Result<PspStatus, String>,
) -> Result<PspStatus, AdapterError> {
    match found {
        Some(t) => status(&t).map_err(AdapterError::InvalidResponse),
        None => Ok(PspStatus::NotFound),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_asked_first_and_our_id_only_without_it() {
        let by_ref = |r: &str| Ok(Some(format!("ref {r}")));
        let by_id = |_: &str| -> Result<Vec<String>, AdapterError> { panic!("not asked") };
        let found = find(Some("r1"), "id1", by_ref, by_id, |_| false).unwrap();
        assert_eq!(found.as_deref(), Some("ref r1"));
        let by_ref = |_: &str| -> Result<Option<String>, AdapterError> { panic!("not asked") };
        let by_id = |id: &str| Ok(vec![format!("a {id}"), format!("b {id}")]);
        let found = find(None, "id1", by_ref, by_id, |_| false).unwrap();
        assert_eq!(found.as_deref(), Some("b id1"));
    }

    #[test]
    fn a_preferred_one_wins_else_the_last() {
        assert_eq!(pick(vec![1, 2, 3], |n| *n == 2), Some(2));
        assert_eq!(pick(vec![1, 2, 3], |_| false), Some(3));
        assert_eq!(pick(Vec::<u8>::new(), |_| true), None);
    }

    #[test]
    fn nothing_found_is_not_found_and_unreadable_is_unknown() {
        let status = |_: &u8| Ok(PspStatus::Pending);
        assert_eq!(status_of(None, status), Ok(PspStatus::NotFound));
        assert_eq!(status_of(Some(1), status), Ok(PspStatus::Pending));
        assert_eq!(
            status_of(Some(1), |_| Err("no amount".into())),
            Err(AdapterError::InvalidResponse("no amount".into()))
        );
    }
}
