//! Layering of defaults, file and `MMC_*` variables.

use super::*;

#[test]
fn defaults_need_no_file() {
    let c = Config::load(None, Vec::new()).unwrap();
    assert_eq!(c.limits.api_deadline_ms, 5_000);
    assert_eq!(c.routing["test"]["*"], RouteSpec::from("simulator"));
}

#[test]
fn the_wal_restart_mark_is_for_sqlite_and_has_a_least() {
    let load = |vars: &[(&str, &str)]| {
        Config::load(
            None,
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>(),
        )
    };
    let c = load(&[("MMC_STORAGE__WAL_RESTART_MIB", "256")]).unwrap();
    assert_eq!(c.storage.wal_restart_mib, Some(256));
    let low = load(&[("MMC_STORAGE__WAL_RESTART_MIB", "8")]).unwrap_err();
    assert!(low.to_string().contains("the least is 16"), "{low}");
    let pg = load(&[
        ("MMC_STORAGE__WAL_RESTART_MIB", "256"),
        ("MMC_STORAGE__URL", "postgres://postgres@127.0.0.1/mmc"),
    ])
    .unwrap_err();
    assert!(pg.to_string().contains("SQLite only"), "{pg}");
}

#[test]
fn env_overrides_nest_and_parse() {
    let c = Config::load(
        None,
        vec![
            ("MMC_LIMITS__MEMORY_MIB".into(), "16".into()),
            ("MMC_LISTEN".into(), "127.0.0.1:0".into()),
            (
                "MMC_COMPONENTS__SIMULATOR__SETTINGS__DELAY_MS".into(),
                "10".into(),
            ),
            ("MMC_COMPONENTS__MOMO__SECRETS__PIN".into(), "0042".into()),
            ("OTHER".into(), "x".into()),
            // The test suite's, not configuration: a server it starts must not refuse it.
            (
                "MMC_TEST_DATABASE_URL".into(),
                "postgres://x@127.0.0.1/y".into(),
            ),
        ],
    )
    .unwrap();
    assert_eq!(c.limits.memory_mib, 16);
    assert_eq!(c.listen.port(), 0);
    assert_eq!(c.components["simulator"].settings["delay_ms"], "10");
    assert_eq!(c.components["momo"].secrets["pin"], "0042", "as written");
    let quoted = Config::load(
        None,
        vec![(
            "MMC_COMPONENTS__SIMULATOR__SETTINGS__DELAY_MS".into(),
            "\"10\"".into(),
        )],
    )
    .unwrap();
    assert_eq!(quoted.components["simulator"].settings["delay_ms"], "10");
}

#[test]
fn env_values_take_the_type_of_their_key() {
    let token = "12345678901234567890123456789012";
    let c = Config::load(
        None,
        vec![
            ("MMC_ADMIN__TOKEN".into(), token.into()),
            ("MMC_LIMITS__MEMORY_MIB".into(), "24".into()),
        ],
    )
    .unwrap();
    assert_eq!(
        c.configured_admin_token(),
        Some(token),
        "a string key, as written"
    );
    assert_eq!(c.limits.memory_mib, 24, "a number key, as a number");
    let err = Config::load(None, vec![("MMC_LIMITS__MEMORY_MIB".into(), "-1".into())])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("integer `-1`") && err.contains("limits.memory_mib"),
        "a number refused says so: {err}"
    );
}

#[test]
fn event_retention_outlasts_delivery_retries() {
    let days = |d: &str| {
        Config::load(
            None,
            vec![("MMC_WEBHOOKS__EVENT_RETENTION_DAYS".into(), d.into())],
        )
    };
    assert_eq!(
        days("0").unwrap().webhooks.event_retention_days,
        0,
        "kept forever"
    );
    assert_eq!(days("4").unwrap().webhooks.event_retention_days, 4);
    let err = days("3").unwrap_err().to_string();
    assert!(err.contains("event_retention_days (3)"), "{err}");
}

#[test]
fn unknown_keys_are_refused() {
    let err = Config::load(None, vec![("MMC_LIMITZ".into(), "1".into())]).unwrap_err();
    assert!(err.to_string().contains("limitz"), "{err}");
}

#[test]
fn routes_are_one_adapter_a_list_a_split_or_rules() {
    let file = r#"
        [routing.live]
        "*" = "simulator"
        mtn-bj = ["momo", "pawapay"]
        moov-bj = [{ adapter = "pawapay", weight = 3 }, { adapter = "fedapay", weight = 1 }]
        [routing.live.celtiis-bj]
        routes = ["fedapay"]
        rules = [{ operation = "payout", routes = ["pawapay", "fedapay"] }]
    "#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mmc.toml");
    std::fs::write(&path, file).unwrap();
    let c = Config::load(Some(&path), Vec::new()).unwrap();
    let live = &c.routing["live"];
    assert_eq!(live["*"], RouteSpec::from("simulator"));
    assert!(matches!(&live["mtn-bj"], RouteSpec::List(l) if l.len() == 2));
    assert!(matches!(&live["moov-bj"], RouteSpec::List(l) if l[0].weight() == Some(3)));
    assert!(matches!(&live["celtiis-bj"], RouteSpec::Rules(r) if r.rules.len() == 1));

    let bad = |toml: &str| {
        std::fs::write(&path, toml).unwrap();
        Config::load(Some(&path), Vec::new())
            .unwrap_err()
            .to_string()
    };
    let e = bad("[routing.live]\nmtn-bj = [\"momo\", \"momo\"]\n");
    assert!(
        e.contains("routing.live.mtn-bj: momo is listed twice"),
        "{e}"
    );
    let e = bad(
        "[routing.live.mtn-bj]\nroutes = [\"momo\"]\nrules = [{ operation = \"pay\", routes = [\"momo\"] }]\n",
    );
    assert!(e.contains("routing.live.mtn-bj.rules[0].operation"), "{e}");
}

#[test]
fn a_mail_relay_is_optional_and_its_password_never_travels_in_clear() {
    assert!(Config::load(None, Vec::new()).unwrap().smtp.is_none());
    let smtp = |extra: &[(&str, &str)]| {
        let mut vars = vec![
            ("MMC_SMTP__HOST".to_string(), "mail.example.bj".to_string()),
            (
                "MMC_SMTP__FROM".into(),
                "Payments <no-reply@example.bj>".into(),
            ),
        ];
        vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Config::load(None, vars)
    };
    let c = smtp(&[]).unwrap().smtp.unwrap();
    assert_eq!(
        (c.security, c.port, c.timeout_ms),
        (SmtpSecurity::Starttls, None, 10_000)
    );
    let user = ("MMC_SMTP__USERNAME", "relay");
    let password = ("MMC_SMTP__PASSWORD", "hunter2hunter2");
    let with_password = smtp(&[user, password]).unwrap().smtp.unwrap();
    assert!(!format!("{with_password:?}").contains("hunter2"));
    let err = smtp(&[password]).unwrap_err().to_string();
    assert!(err.contains("go together"), "{err}");
    let err = smtp(&[user, password, ("MMC_SMTP__SECURITY", "none")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("never sent without TLS"), "{err}");
}
