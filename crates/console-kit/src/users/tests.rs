use super::*;

#[test]
fn passwords_are_argon2id_and_checked() {
    let h = hash_password("correct horse battery").unwrap();
    assert!(h.starts_with("$argon2id$"), "{h}");
    assert!(password_matches(&h, "correct horse battery"));
    assert!(!password_matches(&h, "correct horse battery!"));
    // In kept memory, as sign-in checks: the same answers, twice over.
    let mut memory = Vec::new();
    for _ in 0..2 {
        assert!(password_matches_in(
            &h,
            "correct horse battery",
            &mut memory
        ));
        assert!(!password_matches_in(
            &h,
            "correct horse battery!",
            &mut memory
        ));
    }
    assert!(!password_matches_in(
        "not a hash",
        "correct horse battery",
        &mut memory
    ));
    assert!(matches!(
        hash_password("short"),
        Err(UserError::WeakPassword)
    ));
    assert!(h.contains("$m=7168,t=5,p=1$") && made_by_hasher(&h), "{h}");
}

/// A hash made with the argon2 crate's default (m = 19 MiB, t = 2)
/// still verifies, and is not taken for one of the current parameters.
#[test]
fn hashes_made_with_other_parameters_still_verify() {
    let salt = SaltString::generate(&mut OsRng);
    let old = Argon2::default()
        .hash_password(b"correct horse battery", &salt)
        .unwrap()
        .to_string();
    assert!(old.contains("$m=19456,t=2,p=1$"), "{old}");
    assert!(!made_by_hasher(&old));
    let mut memory = Vec::new();
    assert!(password_matches_in(
        &old,
        "correct horse battery",
        &mut memory
    ));
    assert!(!password_matches_in(
        &old,
        "correct horse battery!",
        &mut memory
    ));
}

/// A password stored with other parameters is hashed again with the
/// current ones at its owner's next sign-in; a wrong guess changes nothing.
#[test]
fn a_hash_with_other_parameters_is_replaced_at_the_next_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let (db, m) = crate::test_shop(&dir);
    let users = Users::new(db.clone());
    let invitation = users.invite(&m.id, "a@shop.bj", Role::Owner).unwrap();
    let token = invitation.path.rsplit('/').next().unwrap();
    users.accept(token, "correct horse battery").unwrap();
    let salt = SaltString::generate(&mut OsRng);
    let old = Argon2::default()
        .hash_password(b"correct horse battery", &salt)
        .unwrap()
        .to_string();
    db.write(|tx| {
        tx.execute(
            "UPDATE console_users SET password_hash = ?1",
            sql_params![&old],
        )
    })
    .unwrap();
    let stored = || {
        db.read(|c| {
            c.query_one("SELECT password_hash FROM console_users", &[])?
                .text(0)
        })
        .unwrap()
    };
    let mut memory = Vec::new();
    let wrong = users.check_password_in("a@shop.bj", "wrong guess!", &mut memory);
    assert!(wrong.unwrap().is_none());
    assert_eq!(stored(), old, "a wrong guess rehashes nothing");
    let right = users.check_password_in("a@shop.bj", "correct horse battery", &mut memory);
    assert!(right.unwrap().is_some());
    let now = stored();
    assert!(made_by_hasher(&now), "{now}");
    let again = users.check_password_in("a@shop.bj", "correct horse battery", &mut memory);
    assert!(again.unwrap().is_some(), "the new hash verifies");
}

#[test]
fn recovery_codes_are_stored_hashed_and_each_passes_once() {
    let dir = tempfile::tempdir().unwrap();
    let (db, m) = crate::test_shop(&dir);
    let users = Users::new(db.clone());
    let a = users.invite(&m.id, "a@shop.bj", Role::Owner).unwrap().user;
    let b = users.invite(&m.id, "b@shop.bj", Role::Owner).unwrap().user;
    users.start_totp(&a.id).unwrap();
    let codes = users.enable_totp(&a.id, 0).unwrap();
    assert_eq!(codes.len(), RECOVERY_CODES);
    let hashes: Vec<String> = db
        .read(|c| {
            c.query("SELECT code_hash FROM console_recovery_codes", &[])?
                .iter()
                .map(|r| r.text(0))
                .collect()
        })
        .unwrap();
    assert_eq!(hashes.len(), RECOVERY_CODES);
    assert!(codes.iter().all(|c| !hashes.iter().any(|h| h.contains(c))));

    assert!(
        !users.spend_recovery_code(&b.id, &codes[0], None).unwrap(),
        "not b's"
    );
    assert!(!users.spend_recovery_code(&a.id, "123456", None).unwrap());
    let typed = codes[0].to_uppercase().replace('-', " ");
    assert!(users.spend_recovery_code(&a.id, &typed, None).unwrap());
    assert!(
        !users.spend_recovery_code(&a.id, &codes[0], None).unwrap(),
        "once"
    );
    assert_eq!(users.recovery_codes_left(&a.id).unwrap(), 9);
    // For one request: that request sent again passes, another does not.
    assert!(
        users
            .spend_recovery_code(&a.id, &codes[1], Some("r1"))
            .unwrap()
    );
    assert!(
        users
            .spend_recovery_code(&a.id, &codes[1], Some("r1"))
            .unwrap()
    );
    assert!(
        !users
            .spend_recovery_code(&a.id, &codes[1], Some("r2"))
            .unwrap()
    );
    assert!(!users.spend_recovery_code(&a.id, &codes[1], None).unwrap());

    // A new authenticator being set up: no second factor, no codes.
    users.start_totp(&a.id).unwrap();
    assert_eq!(users.recovery_codes_left(&a.id).unwrap(), 0);
    assert!(matches!(
        users.renew_recovery_codes(&a.id),
        Err(UserError::UnknownUser)
    ));
    assert!(!users.spend_recovery_code(&a.id, &codes[2], None).unwrap());
}

#[test]
fn a_shown_once_value_opens_once_and_only_with_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = crate::test_shop(&dir);
    let users = Users::new(db.clone());
    let (token, other) = (random_hex(32), random_hex(32));
    users
        .keep_once(&token, "api_key", "mk_test_secret")
        .unwrap();
    let sealed = db
        .read(|c| {
            c.query_one("SELECT sealed FROM console_shown_once", &[])?
                .text(0)
        })
        .unwrap();
    assert!(!sealed.contains("mk_test") && !sealed.contains(&hex::encode("mk_test")));
    assert_eq!(users.take_once(&other, "api_key").unwrap(), None);
    assert_eq!(users.take_once(&token, "codes").unwrap(), None);
    assert_eq!(
        users.take_once(&token, "api_key").unwrap().as_deref(),
        Some("mk_test_secret")
    );
    assert_eq!(users.take_once(&token, "api_key").unwrap(), None, "once");
}

#[test]
fn roles_map_to_the_api_scopes() {
    use mmc_accounts::scopes::Scope::*;
    let refund = ("POST", "/api/v1/collect/payments/p/refunds");
    let approve = ("POST", "/api/v1/bulk-payments/b/validate");
    for (role, can_refund, can_approve) in [
        (Role::Owner, true, true),
        (Role::Finance, true, true),
        (Role::Developer, false, false),
        (Role::Support, false, false),
    ] {
        let s = role.scopes();
        assert_eq!(s.allow(refund.0, refund.1).is_ok(), can_refund, "{role:?}");
        assert_eq!(
            s.allow(approve.0, approve.1).is_ok(),
            can_approve,
            "{role:?}"
        );
        assert!(s.contains(PaymentsRead));
    }
    assert!(Role::Developer.scopes().contains(WebhooksManage));
    assert!(!Role::Support.scopes().contains(WebhooksManage));
    assert!(Role::Support.scopes().contains(WebhooksResend));
}

#[test]
fn emails_are_checked_and_lowercased() {
    assert_eq!(normalize_email(" Awa@Shop.BJ ").unwrap(), "awa@shop.bj");
    for bad in [
        "",
        "awa",
        "@shop.bj",
        "awa@shop",
        "a wa@shop.bj",
        "a@b@shop.bj",
    ] {
        assert!(normalize_email(bad).is_err(), "{bad}");
    }
}

#[test]
fn one_address_has_one_form_and_look_alikes_are_refused() {
    // A domain in Unicode or in its ASCII form is one address.
    assert_eq!(
        normalize_email("awa@Shöp.bj").unwrap(),
        normalize_email("awa@xn--shp-tna.bj").unwrap()
    );
    // Before the @, only printable ASCII: an accent written two ways, or an
    // invisible character, would make two addresses that read the same.
    for bad in [
        "awa\u{200B}@shop.bj",
        "jos\u{e9}@shop.bj",
        "jose\u{301}@shop.bj",
    ] {
        assert!(normalize_email(bad).is_err(), "{bad:?}");
    }
    assert_eq!(lookup_email(" Awa@Shöp.BJ"), "awa@xn--shp-tna.bj");
}
