//! Finding an operation at the provider: by the provider's reference when we
//! have it, else by our id (after an initiation whose answer was lost, the
//! reference was never learnt, but our id went with the request).

use crate::exchange::OrUnknown;
use crate::signing;
use crate::types::{AdapterError, PspStatus};

/// The UUIDv4 a provider that demands one knows our id by
/// (`mmc_domain::operator_ids`): stable, so a retry or a status query names
/// the same operation, and derived from our id alone, never from a stored
/// reference, so that whatever a message from outside named, our queries
/// name the operation we sent.
pub fn operator_uuid(our_id: &str) -> String {
    mmc_domain::operator_ids::to_operator(our_id, signing::sha256)
}

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
        Some(t) => status(&t).or_unknown(),
        None => Ok(PspStatus::NotFound),
    }
}

/// A provider's list read for an operation of ours that no lookup found,
/// newest first, a page at a time. Only a list read to its end, or (when our
/// id tells when it was made: `since`) back past our creation, proves the
/// operation absent; anything else leaves the answer unknown, since "not
/// found" may end an operation whose money moved.
pub struct Scan<'a> {
    /// As errors name it (`FedaPay's transaction list`).
    pub list: &'a str,
    pub our_id: &'a str,
    pub pages: u32,
    /// `YYYY-MM-DDTHH:MM:SS` (UTC) before which our operation cannot have
    /// been made (our id's time, less the clock margin).
    pub since: Option<&'a str>,
}

impl Scan<'_> {
    /// Ours from the pages `page(1..=pages)` gives, `None` only when absence
    /// is proven. `created_at` is an item's creation as `YYYY-MM-DDTHH:MM:SS`
    /// UTC ([`utc_second`]), `None` when it cannot be read so.
    pub fn find<T>(
        &self,
        mut page: impl FnMut(u32) -> Result<Vec<T>, AdapterError>,
        mine: impl Fn(&T) -> bool,
        created_at: impl Fn(&T) -> Option<&str>,
    ) -> Result<Option<T>, AdapterError> {
        let mut previous: Option<String> = None;
        for number in 1..=self.pages {
            let mut items = page(number)?;
            if let Some(i) = items.iter().position(&mine) {
                return Ok(Some(items.swap_remove(i)));
            }
            if items.is_empty() {
                return Ok(None); // the whole list was read
            }
            let Some(since) = self.since else {
                continue;
            };
            let times: Option<Vec<&str>> = items.iter().map(&created_at).collect();
            let in_order = times.filter(|ts| {
                ts.windows(2).all(|w| w[0] >= w[1])
                    && previous.as_deref().is_none_or(|p| p >= ts[0])
            });
            let Some(times) = in_order else {
                return Err(AdapterError::InvalidResponse(format!(
                    "{} is not newest first in UTC: the absence of {} cannot be told",
                    self.list, self.our_id
                )));
            };
            let oldest = times[times.len() - 1];
            if oldest < since {
                return Ok(None); // read back past our creation
            }
            previous = Some(oldest.to_string());
        }
        Err(AdapterError::InvalidResponse(format!(
            "{} is not in the {} most recent pages of {}: not known yet",
            self.our_id, self.pages, self.list
        )))
    }
}

/// When our id was made, if it is a UUIDv7 (payment ids are: their first 48
/// bits are Unix milliseconds).
pub fn uuid7_ms(id: &str) -> Option<u64> {
    let b = id.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[14] != b'7' {
        return None;
    }
    u64::from_str_radix(&format!("{}{}", &id[..8], &id[9..13]), 16).ok()
}

/// `YYYY-MM-DDTHH:MM:SS` of a UTC RFC 3339 time (`…Z` or `…+00:00`), which
/// compares as text; None for anything else.
pub fn utc_second(time: Option<&str>) -> Option<&str> {
    let t = time?;
    let shape = t.len() >= 20
        && t.is_char_boundary(19)
        && t[..19].bytes().enumerate().all(|(i, c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            _ => c.is_ascii_digit(),
        });
    (shape && (t.ends_with('Z') || t.ends_with("+00:00"))).then(|| &t[..19])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Items (id, created) in pages of two, newest first.
    fn pages(
        items: &[(&'static str, &'static str)],
    ) -> impl FnMut(u32) -> Result<Vec<(&'static str, &'static str)>, AdapterError> {
        let items = items.to_vec();
        move |n| {
            Ok(items
                .chunks(2)
                .nth(n as usize - 1)
                .map(<[_]>::to_vec)
                .unwrap_or_default())
        }
    }

    fn scan(since: Option<&'static str>) -> Scan<'static> {
        Scan {
            list: "the list",
            our_id: "ours",
            pages: 3,
            since,
        }
    }

    fn scan_for(
        scan: &Scan,
        items: &[(&'static str, &'static str)],
    ) -> Result<Option<&'static str>, AdapterError> {
        scan.find(pages(items), |t| t.0 == "ours", |t| Some(t.1))
            .map(|f| f.map(|t| t.0))
    }

    const LIST: &[(&str, &str)] = &[
        ("a", "2026-01-05T00:00:00"),
        ("b", "2026-01-04T00:00:00"),
        ("c", "2026-01-03T00:00:00"),
        ("d", "2026-01-02T00:00:00"),
    ];

    #[test]
    fn ours_is_found_on_any_page() {
        let mut list = LIST.to_vec();
        list.insert(3, ("ours", "2026-01-03T00:00:00"));
        assert_eq!(scan_for(&scan(None), &list), Ok(Some("ours")));
    }

    #[test]
    fn absence_is_proven_only_by_the_end_or_by_reading_past_our_creation() {
        // The whole list read: absent.
        assert_eq!(scan_for(&scan(None), &LIST[..3]), Ok(None));
        // Past our creation (made on the 4th, the second page reaches the 2nd): absent.
        assert_eq!(scan_for(&scan(Some("2026-01-04T12:00:00")), LIST), Ok(None));
        // Neither: more pages than we read, no time to stop at: unknown.
        let long: Vec<_> = LIST.iter().cycle().take(8).copied().collect();
        assert!(matches!(
            scan_for(&scan(None), &long),
            Err(AdapterError::InvalidResponse(_))
        ));
        // A list out of order proves nothing.
        let shuffled = [LIST[1], LIST[0], LIST[2]];
        assert!(matches!(
            scan_for(&scan(Some("2026-01-04T12:00:00")), &shuffled),
            Err(AdapterError::InvalidResponse(_))
        ));
        // Pages that go back in time across their boundary prove nothing either.
        let jump = [LIST[2], LIST[3], LIST[0], LIST[1]];
        assert!(matches!(
            scan_for(&scan(Some("2026-01-01T00:00:00")), &jump),
            Err(AdapterError::InvalidResponse(_))
        ));
    }

    #[test]
    fn times_from_our_ids_and_provider_lists() {
        assert_eq!(
            uuid7_ms("019a6f1e-3b2c-7d4e-8f00-0123456789ab"),
            Some(0x019a_6f1e_3b2c)
        );
        assert_eq!(uuid7_ms("3f6c1a52-8d0e-4c1e-9a57-3f4f2c8b9d10"), None);
        assert_eq!(
            utc_second(Some("2018-03-12T09:09:03.969Z")),
            Some("2018-03-12T09:09:03")
        );
        assert_eq!(
            utc_second(Some("2018-03-12T09:09:03+00:00")),
            Some("2018-03-12T09:09:03")
        );
        assert_eq!(utc_second(Some("2018-03-12T10:09:03+01:00")), None);
        assert_eq!(utc_second(Some("12/03/2018")), None);
        assert_eq!(utc_second(None), None);
    }

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
