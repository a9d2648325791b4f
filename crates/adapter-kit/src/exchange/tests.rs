//! The money classification, exhaustively: every transport failure and every
//! status code, for the success sets the adapters use, against the rule
//! written out independently below.

use super::*;

fn refusal(status: u16, _body: &[u8]) -> Failure {
    crate::failure("operator_refused", &format!("Test refused ({status})"))
}

static PROVIDER: Provider = Provider {
    name: "Test",
    credential: Some("API key"),
    refusal,
};

static UNNAMED: Provider = Provider {
    name: "Test",
    credential: None,
    refusal,
};

fn answer(status: u16, body: &[u8]) -> Response {
    Response {
        status,
        headers: Vec::new(),
        body: body.to_vec(),
    }
}

/// Transport, then reply, then (on success) the body read: one call's ending.
fn ending(provider: &Provider, sent: Result<Response, CapabilityError>, success: &[u16]) -> Class {
    let reply = provider
        .transport(sent, "POST", "/pay")
        .and_then(|resp| provider.reply(resp, success));
    match reply {
        Ok(Reply::Success(resp)) => {
            match provider.read::<serde_json::Value>("answer", &resp.body) {
                Ok(_) => Class::Known,
                Err(e) => class_of(&e),
            }
        }
        Ok(Reply::Declined(_)) => Class::Known,
        Err(e) => class_of(&e),
    }
}

/// The rule, as the module table states it.
fn rule(status: u16, success: &[u16]) -> Class {
    match status {
        s if success.contains(&s) => Class::Known,
        401 | 403 | 404 | 429 => Class::Refused,
        400..=499 => Class::Known,
        _ => Class::Unknown,
    }
}

const SUCCESS_SETS: &[&[u16]] = &[&[200], &[200, 201], &[202, 409], &[200, 204], &[]];

#[test]
fn every_status_code_is_classified_by_the_rule() {
    for provider in [&PROVIDER, &UNNAMED] {
        for success in SUCCESS_SETS {
            for status in 100..=599u16 {
                let got = ending(provider, Ok(answer(status, b"{}")), success);
                assert_eq!(got, rule(status, success), "{status} expecting {success:?}");
            }
        }
    }
}

#[test]
fn a_success_range_is_classified_by_the_same_rule() {
    let below_4xx = |s: u16| s < 400;
    for status in 100..=599u16 {
        let reply = PROVIDER
            .transport(Ok(answer(status, b"{}")), "POST", "/pay")
            .and_then(|resp| PROVIDER.reply_if(resp, below_4xx));
        let got = match reply {
            Ok(_) => Class::Known,
            Err(e) => class_of(&e),
        };
        let expected = match status {
            s if below_4xx(s) => Class::Known,
            s => rule(s, &[]),
        };
        assert_eq!(got, expected, "{status}");
    }
}

#[test]
fn every_transport_failure_is_unknown_unless_provably_not_sent() {
    let cases = [
        (CapabilityError::Timeout("slow".into()), Class::Unknown),
        // A reset after sending, a refused or failed connection, DNS: the host
        // cannot prove the request did not arrive.
        (
            CapabilityError::Unavailable("connection reset".into()),
            Class::Unknown,
        ),
        (
            CapabilityError::Invalid("bad request".into()),
            Class::Unknown,
        ),
        (CapabilityError::Conflict("conflict".into()), Class::Unknown),
        // The allow-list refused it before anything left the host.
        (
            CapabilityError::Denied("host not allowed".into()),
            Class::NotSent,
        ),
    ];
    for (failure, class) in cases {
        for success in SUCCESS_SETS {
            assert_eq!(
                ending(&PROVIDER, Err(failure.clone()), success),
                class,
                "{failure:?}"
            );
        }
    }
}

#[test]
fn an_expected_success_that_cannot_be_read_is_unknown() {
    for body in [&b""[..], b"<html>", b"{\"truncated\":", b"\xff\xfe"] {
        assert_eq!(
            ending(&PROVIDER, Ok(answer(200, body)), &[200]),
            Class::Unknown
        );
    }
}

#[test]
fn the_error_classes_are_the_services() {
    let cases = [
        (AdapterError::Timeout(String::new()), Class::Unknown),
        (AdapterError::Unavailable(String::new()), Class::Unknown),
        (AdapterError::InvalidResponse(String::new()), Class::Unknown),
        (AdapterError::Unauthenticated(String::new()), Class::Unknown),
        (AdapterError::Busy(String::new()), Class::Unknown),
        (AdapterError::Rejected(String::new()), Class::Refused),
        (AdapterError::NotSent(String::new()), Class::NotSent),
        (AdapterError::NotSupported(String::new()), Class::NotSent),
    ];
    for (e, class) in cases {
        assert_eq!(class_of(&e), class, "{e:?}");
    }
}

#[test]
fn a_failure_before_the_money_moving_call_is_never_unknown() {
    let all = [
        AdapterError::Timeout("t".into()),
        AdapterError::Unavailable("u".into()),
        AdapterError::InvalidResponse("i".into()),
        AdapterError::Unauthenticated("a".into()),
        AdapterError::Busy("b".into()),
        AdapterError::Rejected("r".into()),
        AdapterError::NotSent("n".into()),
        AdapterError::NotSupported("s".into()),
    ];
    for e in all {
        let after = before_sending("no token")(e.clone());
        assert_ne!(class_of(&after), Class::Unknown, "{e:?} became {after:?}");
        if class_of(&e) != Class::Unknown {
            assert_eq!(after, e, "a certain ending is kept as it is");
        }
    }
}

#[test]
fn refusals_are_worded_by_the_provider() {
    let resp = answer(401, b"no");
    assert_eq!(
        PROVIDER.unexpected(&resp),
        AdapterError::Rejected("Test refused our API key (401): no".into())
    );
    assert_eq!(
        UNNAMED.unexpected(&resp),
        AdapterError::Rejected("Test refused (401)".into())
    );
    assert_eq!(
        PROVIDER.unexpected(&answer(404, b"")),
        AdapterError::Rejected("Test refused (404)".into())
    );
    assert_eq!(
        PROVIDER.unexpected(&answer(302, b"moved")),
        AdapterError::InvalidResponse("Test answered 302 unexpectedly: moved".into())
    );
    let timeout = PROVIDER.transport(Err(CapabilityError::Timeout("5 s".into())), "GET", "/x");
    assert_eq!(
        timeout.unwrap_err(),
        AdapterError::Timeout("Test did not answer GET /x in time: 5 s".into())
    );
}

#[test]
fn a_coded_refusal_quotes_what_the_provider_said() {
    let said = |body: &[u8]| coded_refusal("Test", 400, body).message;
    assert_eq!(
        said(br#"{"code":"LIMIT","message":"too much"}"#),
        "Test refused the request (400 LIMIT): too much"
    );
    assert_eq!(
        said(br#"{"code":"LIMIT"}"#),
        "Test refused the request (400 LIMIT)."
    );
    assert_eq!(
        said(br#"{"message":"no"}"#),
        "Test refused the request (400): no"
    );
    assert_eq!(said(b"<html>"), "Test refused the request (400).");
    assert_eq!(
        said(br#"{"message":"invalid","errors":{"phone":["bad"]}}"#),
        r#"Test refused the request (400): invalid {"phone":["bad"]}"#
    );
    assert_eq!(
        said(br#"{"code":422,"errors":["late"]}"#),
        r#"Test refused the request (400 422). ["late"]"#
    );
    assert_eq!(coded_refusal("Test", 400, b"").code, "operator_refused");
}

#[test]
fn a_quoted_refusal_quotes_the_body_as_it_came() {
    let f = quoted_refusal("Test", 400, br#"{"errorCode":7}"#);
    assert_eq!(f.code, "operator_refused");
    assert_eq!(
        f.message,
        r#"Test refused the request (400): {"errorCode":7}"#
    );
}

/// [`Provider::answer`] to `status` with `body`, expecting `expected`: the
/// object read or the refusal, else the class of its error.
fn answered(
    status: u16,
    body: &[u8],
    expected: impl Expected,
) -> Result<Result<u32, Failure>, Class> {
    let read = |b: &[u8]| crate::wire::parse::<u32>("number", b);
    PROVIDER
        .answer(answer(status, body), expected, read)
        .map_err(|e| class_of(&e))
}

#[test]
fn an_answer_is_read_or_refused_by_the_rule_for_every_status() {
    for status in 100..=599u16 {
        let cases = [
            (
                answered(status, b"7", [200, 201]),
                answered(status, b"<html>", [200, 201]),
                [200, 201].contains(&status),
            ),
            (
                answered(status, b"7", [202, 409]),
                answered(status, b"<html>", [202, 409]),
                [202, 409].contains(&status),
            ),
            (
                answered(status, b"7", 200..=299),
                answered(status, b"<html>", 200..=299),
                (200..=299).contains(&status),
            ),
        ];
        for (readable, unreadable, expected) in cases {
            let rule = match status {
                // A success that cannot be read is not an answer.
                _ if expected => (Ok(Ok(7)), Err(Class::Unknown)),
                401 | 403 | 404 | 429 => (Err(Class::Refused), Err(Class::Refused)),
                400..=499 => (Ok(Err(refusal(status, b""))), Ok(Err(refusal(status, b"")))),
                _ => (Err(Class::Unknown), Err(Class::Unknown)),
            };
            assert_eq!((readable, unreadable), rule, "{status}");
        }
    }
}

#[test]
fn a_refusal_is_the_providers_reason() {
    assert_eq!(PROVIDER.refused(&answer(422, b"no")), refusal(422, b"no"));
}

#[test]
fn an_unreadable_answer_is_unknown() {
    let unreadable: Result<u8, String> = Err("garbled".into());
    assert_eq!(
        unreadable.or_unknown(),
        Err(AdapterError::InvalidResponse("garbled".into()))
    );
    assert_eq!(Ok::<u8, String>(1).or_unknown(), Ok(1));
}

#[test]
fn a_bearer_endpoint_sends_its_token() {
    let api = Endpoint::bearer(&PROVIDER, "https://api".into(), "t0k", 900);
    assert_eq!(
        (api.base_url.as_str(), api.timeout_ms),
        ("https://api", 900)
    );
    assert_eq!(
        api.headers,
        [("Authorization".to_string(), "Bearer t0k".to_string())]
    );
}
