//! Building the checks, writes and events the rules use, and reading what
//! they return.

use crate::{Check, OutboxEvent, StorageError, Write};

pub(super) fn check(table: &str, key: &str, value: Option<&[u8]>) -> Check {
    Check {
        table: table.into(),
        key: key.into(),
        value: value.map(<[u8]>::to_vec),
    }
}

pub(super) fn put(table: &str, key: &str, value: &[u8]) -> Write {
    Write::Put {
        table: table.into(),
        key: key.into(),
        value: value.to_vec(),
    }
}

pub(super) fn event(id: &str) -> OutboxEvent {
    OutboxEvent {
        id: id.into(),
        event_type: "payment.completed".into(),
        merchant_id: "m1".into(),
        environment: "test".into(),
        subject_id: "p1".into(),
        extra_url: None,
        payload: b"{}".to_vec(),
    }
}

pub(super) fn keys(rows: &[(String, Vec<u8>)]) -> Vec<&str> {
    rows.iter().map(|(k, _)| k.as_str()).collect()
}

pub(super) fn invalid<T>(r: Result<T, StorageError>) -> bool {
    matches!(r, Err(StorageError::Invalid(_)))
}

pub(super) fn parse(v: &[u8]) -> usize {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}
