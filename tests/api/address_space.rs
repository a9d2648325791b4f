//! A host that caps virtual memory (`ulimit -v`, some sandboxes, valgrind):
//! the default instance pool, 4 GiB of address space a slot, cannot be
//! reserved there, and the server says which setting fits; with
//! `limits.reserve_address_space=false` a slot reserves only its memory cap
//! and the server serves.

use crate::process::{ServerProcess, cli_merchant, get_json, post_json};
use crate::support::*;

/// Far above what the server uses, far below the default pool.
const CAP: u64 = 16 << 30;
/// 40 instance slots: 320 GiB with guard regions, 5 GiB without.
const SMALL_POOL: (&str, &str) = ("MMC_LIMITS__CONCURRENT_CALLS", "8");

#[tokio::test]
async fn under_an_address_space_cap_the_default_pool_is_refused_by_name_and_a_pool_without_guard_regions_serves()
 {
    let data = tempfile::tempdir().unwrap();
    let (_, key) = cli_merchant(data.path(), "Capped", "test");

    let err = ServerProcess::refused_capped(data.path(), &[SMALL_POOL], CAP);
    assert!(
        err.contains("limits.reserve_address_space=false"),
        "the refusal names the setting: {err}"
    );

    let unreserved = ("MMC_LIMITS__RESERVE_ADDRESS_SPACE", "false");
    let server = ServerProcess::start_capped(data.path(), &[SMALL_POOL, unreserved], CAP);
    let client = reqwest::Client::new();
    let payments = format!("{}/api/v1/collect/payments", server.base);
    let (status, created) = post_json(
        &client,
        &payments,
        &key,
        Some(&new_key()),
        &direct_payment("+2290166000001"),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = id_of(&created);
    let read = get_json(&client, &format!("{payments}/{id}"), &key).await;
    assert_eq!(read["id"], id);
    assert_eq!(read["amount"], created["amount"]);
}
