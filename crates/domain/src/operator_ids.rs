//! The ids operators know our operations by. MTN (`X-Reference-Id`) and
//! pawaPay (`depositId`, `payoutId`, `refundId`) demand a UUID of version 4;
//! ours are UUIDv7 (time-ordered for storage). The v7 id with its version
//! nibble set to 4 is a well-formed v4 by format, the same on every retry and
//! after any restart (so a status query by our id finds a request whose
//! answer was lost), and maps back to our id for callbacks. Any other id (a
//! payout item's) maps one way to a v4 derived from its SHA-256.

/// Position of the version nibble in a hyphenated UUID (`xxxxxxxx-xxxx-Vxxx-…`).
const VERSION_AT: usize = 14;

fn is_hyphenated_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

fn with_version(id: &str, version: char) -> String {
    let mut s = id.to_ascii_lowercase();
    s.replace_range(VERSION_AT..=VERSION_AT, &version.to_string());
    s
}

/// The UUIDv4 the operator knows `id` by. `sha256` hashes ids that are not
/// UUIDs (components get it from the host's signing capability).
pub fn to_operator(id: &str, sha256: impl FnOnce(&[u8]) -> Vec<u8>) -> String {
    if is_hyphenated_uuid(id) {
        // RFC 9562 variant bits (10xx) are the same for v4 and v7: only the version changes.
        return with_version(id, '4');
    }
    let digest = sha256(id.as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // RFC variant
    let hex = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Our id for an operator's UUIDv4 made by [`to_operator`] from one of our
/// UUIDv7 ids (callbacks name the operation by the operator's id). Only the
/// exact form [`to_operator`] makes maps back: another version digit or
/// letter case is another id at the operator, and a callback naming it must
/// never be taken for ours (it would point our status queries elsewhere).
pub fn from_operator(operator_id: &str) -> Option<String> {
    let ours = is_hyphenated_uuid(operator_id).then(|| with_version(operator_id, '7'))?;
    (with_version(&ours, '4') == operator_id).then_some(ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_v7_ids_become_v4_and_back() {
        let ours = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
        let op = to_operator(ours, |_| unreachable!("a UUID is not hashed"));
        assert_eq!(op, "0199a1b2-c3d4-4e5f-8a9b-0c1d2e3f4a5b");
        assert_eq!(from_operator(&op).as_deref(), Some(ours));
        assert_eq!(to_operator(ours, |_| vec![]), op, "stable");
    }

    #[test]
    fn only_the_exact_form_we_send_maps_back() {
        let ours = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
        for forged in [
            "0199a1b2-c3d4-5e5f-8a9b-0c1d2e3f4a5b", // another version digit
            "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", // our own id, not what we send
            "0199A1B2-C3D4-4E5F-8A9B-0C1D2E3F4A5B", // other letter case
            "0199a1b2-c3d4-4e5f-8a9b-0c1d2e3f4a5B",
            "0199a1b2c3d44e5f8a9b0c1d2e3f4a5b",
        ] {
            assert_eq!(from_operator(forged), None, "{forged}");
        }
        assert_eq!(
            from_operator("0199a1b2-c3d4-4e5f-8a9b-0c1d2e3f4a5b").as_deref(),
            Some(ours)
        );
    }

    #[test]
    fn other_ids_map_to_a_derived_v4() {
        let id = to_operator("batch-1/item-7", |b| {
            let mut d = b.to_vec();
            d.resize(32, 0xab);
            d
        });
        assert!(is_hyphenated_uuid(&id));
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
    }
}
