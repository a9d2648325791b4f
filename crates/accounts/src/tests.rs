use super::*;

#[test]
fn keys_authenticate_until_revoked_and_are_stored_hashed() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqlDb::new(Arc::new(
        mmc_db::Sqlite::open(&dir.path().join("a.db")).unwrap(),
    ));
    let accounts = Accounts::new(db.clone());
    let m = accounts.create_merchant("Shop").unwrap();
    let k = accounts.create_key(&m.id, Environment::Live).unwrap();
    let p = accounts.authenticate(&k.key).unwrap().unwrap();
    assert_eq!(p.merchant_id, m.id);
    assert_eq!(p.environment, Environment::Live);
    let stored = db
        .read(|c| c.query_one("SELECT key_hash FROM api_keys", &[])?.text(0))
        .unwrap();
    assert_ne!(stored, k.key);
    accounts.revoke_key(&k.id).unwrap();
    assert!(accounts.authenticate(&k.key).unwrap().is_none());
    assert!(matches!(
        accounts.create_key("nope", Environment::Test),
        Err(AccountError::UnknownMerchant(_))
    ));
}

#[test]
fn a_person_key_is_named_made_once_per_form_and_its_use_written_once_a_minute() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqlDb::new(Arc::new(
        mmc_db::Sqlite::open(&dir.path().join("a.db")).unwrap(),
    ));
    let accounts = Accounts::new(db.clone());
    let m = accounts.create_merchant("Shop").unwrap();
    let scopes = Scopes::parse("payments:read").unwrap();
    let ask = |name, request| KeyRequest {
        user_id: "usr_1",
        name,
        request,
    };
    let long = "x".repeat(65);
    for bad in ["", "  ", &long, "a\nb"] {
        assert!(matches!(
            accounts.create_person_key(&m.id, Environment::Test, scopes, &ask(bad, None)),
            Err(AccountError::InvalidKeyName)
        ));
    }
    let made = accounts
        .create_person_key(&m.id, Environment::Test, scopes, &ask(" Till ", Some("f1")))
        .unwrap();
    let PersonKey::Made(k) = made else {
        panic!("{made:?}")
    };
    let again = accounts
        .create_person_key(&m.id, Environment::Test, scopes, &ask("Till", Some("f1")))
        .unwrap();
    assert!(
        matches!(&again, PersonKey::MadeBefore { id } if *id == k.id),
        "{again:?}"
    );
    assert_eq!(
        accounts.requested_key(&m.id, "usr_1", "f1").unwrap(),
        Some(k.id.clone())
    );
    let listed = accounts.list_keys(&m.id, Environment::Test).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name.as_deref(), Some("Till"));
    assert_eq!(listed[0].prefix.as_deref(), Some(&k.key[..16]));
    assert_eq!(listed[0].last_used_ms, None);

    let used = || accounts.list_keys(&m.id, Environment::Test).unwrap()[0].last_used_ms;
    accounts.authenticate(&k.key).unwrap().unwrap();
    let first = used().expect("written");
    // Looked up again (not from the cache) within the minute: not written again.
    accounts.cache.lock().clear();
    std::thread::sleep(Duration::from_millis(5));
    accounts.authenticate(&k.key).unwrap().unwrap();
    assert_eq!(used(), Some(first));
    // A minute on, it is.
    accounts.cache.lock().clear();
    accounts.last_use_written.lock().clear();
    db.write(|tx| {
        tx.execute(
            "UPDATE api_keys SET last_used_ms = last_used_ms - 60000",
            &[],
        )
    })
    .unwrap();
    accounts.authenticate(&k.key).unwrap().unwrap();
    assert!(used().unwrap() >= first);
    assert_ne!(used(), Some(first - 60_000));
}

#[test]
fn keys_carry_their_environment_prefix_and_legacy_keys_still_work() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqlDb::new(Arc::new(
        mmc_db::Sqlite::open(&dir.path().join("a.db")).unwrap(),
    ));
    let accounts = Accounts::new(db.clone());
    let m = accounts.create_merchant("Shop").unwrap();
    let test = accounts.create_key(&m.id, Environment::Test).unwrap();
    let live = accounts.create_key(&m.id, Environment::Live).unwrap();
    assert!(
        test.key.starts_with("mk_test_") && test.key.len() == 40,
        "{}",
        test.key
    );
    assert!(live.key.starts_with("mk_live_"), "{}", live.key);
    assert!(accounts.authenticate(&live.key).unwrap().is_some());
    // The same secret under the other prefix is not a key.
    let swapped = live.key.replacen("mk_live_", "mk_test_", 1);
    assert!(accounts.authenticate(&swapped).unwrap().is_none());
    assert!(accounts.authenticate("mk_test_zz").unwrap().is_none());
    // A key made before the prefixes (a bare UUID, stored as the hash of its
    // hyphenated form) authenticates as before.
    let legacy = Uuid::new_v4();
    let hash = hash_key(&legacy.to_string()).unwrap();
    db.write(|tx| {
        tx.execute(
            "INSERT INTO api_keys (id, key_hash, merchant_id, environment, created_ms) VALUES ('key_old', ?1, ?2, 'test', 0)",
            sql_params![&hash, &m.id],
        )
    })
    .unwrap();
    let p = accounts.authenticate(&legacy.to_string()).unwrap().unwrap();
    assert_eq!(p.key_id, "key_old");
    assert!(
        accounts
            .authenticate(&legacy.simple().to_string())
            .unwrap()
            .is_some()
    );
}
