//! What can always be fetched again (an OAuth token, a provider's published
//! configuration), kept in the host's `cache` capability: lost on restart,
//! never anything the money depends on.

use std::cell::{Cell, RefCell};

use base64::Engine;

use crate::exchange::{Endpoint, Provider, bearer, before_sending};
use crate::outbound_http::Response;
use crate::settings::{self, parsed};
use crate::types::AdapterError;
use crate::{cache, log, signing};

/// How long a token that lasts `expires_in_s` is kept: until `margin_s`
/// before it expires (0 when it does not say, i.e. not kept).
pub fn ttl_ms(expires_in_s: Option<u64>, margin_s: u64) -> u64 {
    expires_in_s.unwrap_or(0).saturating_sub(margin_s) * 1000
}

/// A short hash of a secret, to key cached answers per account without
/// putting the secret in the cache.
pub fn account(secret: &str) -> String {
    digest(secret, 8)
}

/// The first `bytes` bytes of `text`'s SHA-256, in hex: a cache key for
/// what must not sit in the cache as it is (a secret, a phone number).
pub fn digest(text: &str, bytes: usize) -> String {
    let hash = signing::sha256(text.as_bytes());
    hex::encode(&hash[..bytes.min(hash.len())])
}

/// A cached token, if one is kept under `key`.
pub fn cached(key: &str) -> Option<String> {
    cache::get(key).map(|t| String::from_utf8_lossy(&t).into_owned())
}

/// Keeps `token` under `key` for `ttl_ms` (0: not kept).
pub fn keep(key: &str, token: &str, ttl_ms: u64) {
    cache::set(key, token.as_bytes(), ttl_ms);
}

/// Forgets the token under `key` (the provider dropped it).
pub fn forget(key: &str) {
    cache::set(key, &[], 0);
}

/// A JSON value kept in `store` under `key` for `ttl_ms`, else `fetch`ed
/// and kept; an error is not kept (the next call fetches again).
pub fn kept<T, E>(
    store: impl Store,
    key: &str,
    ttl_ms: u64,
    fetch: impl FnOnce() -> Result<T, E>,
) -> Result<T, E>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    if let Some(kept) = store.get(key).and_then(|v| serde_json::from_str(&v).ok()) {
        return Ok(kept);
    }
    let fetched = fetch()?;
    if let Ok(text) = serde_json::to_string(&fetched) {
        store.set(key, &text, ttl_ms);
    }
    Ok(fetched)
}

/// What a provider publishes about the account (its configuration, its
/// currencies), read with the settings every market shares (`base_url` and
/// a secret) and kept in the cache per base URL and account, so that a
/// configuration change never serves another account's answer.
///
/// It is read while `describe` answers, which holds up loading the adapter:
/// the read waits at most [`PUBLISHED_TIMEOUT_MS`]. Providers change what they
/// publish rarely and a stale answer is at worst what the operator table says,
/// so it is kept [`PUBLISHED_TTL_MS`] unless the setting `<key>_ttl_ms` says otherwise.
pub struct Published {
    /// Its cache key's prefix and its TTL setting's name (`active_conf`).
    pub key: &'static str,
    /// Names it in the warning when it cannot be had.
    pub what: &'static str,
    pub provider: &'static Provider,
    /// The secret that authorises the read, sent as a bearer token.
    pub secret: &'static str,
}

/// How long a [`Published`] answer is kept by default: five minutes.
pub const PUBLISHED_TTL_MS: u64 = 5 * 60 * 1000;
/// The longest a [`Published`] read waits (the `timeout_ms` setting when shorter).
pub const PUBLISHED_TIMEOUT_MS: u32 = 3_000;

impl Published {
    /// The kept answer, else `fetch`'s from the provider's API; `None`
    /// (logged) when it cannot be had: never an error, `describe` must answer.
    pub fn get<T: serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        fetch: impl FnOnce(Endpoint) -> Result<T, AdapterError>,
    ) -> Option<T> {
        let base_url = settings::setting("base_url")?;
        let base_url = base_url.trim_end_matches('/');
        let secret = settings::secret(self.secret)?;
        let key = format!("{}:{base_url}:{}", self.key, account(&secret));
        let ttl_setting = settings::setting(&format!("{}_ttl_ms", self.key));
        let ttl = parsed(ttl_setting).unwrap_or(PUBLISHED_TTL_MS);
        let timeout_ms = match parsed::<u32>(settings::setting("timeout_ms")) {
            Some(t) if t > 0 => t.min(PUBLISHED_TIMEOUT_MS),
            _ => PUBLISHED_TIMEOUT_MS,
        };
        let api = Endpoint::bearer(self.provider, base_url.into(), &secret, timeout_ms);
        kept(HostCache, &key, ttl, || fetch(api))
            .inspect_err(|e| {
                let warning = format!("{} unavailable: {e:?}", self.what);
                log::log(log::Level::Warn, &warning);
            })
            .ok()
    }
}

/// Where tokens are kept: the host's cache, or memory in a unit test.
pub trait Store {
    fn get(&self, key: &str) -> Option<String>;
    /// Keeps `value` for `ttl_ms`; 0 forgets it.
    fn set(&self, key: &str, value: &str, ttl_ms: u64);
}

/// The host's `cache` capability.
pub struct HostCache;

impl Store for HostCache {
    fn get(&self, key: &str) -> Option<String> {
        cached(key)
    }
    fn set(&self, key: &str, value: &str, ttl_ms: u64) {
        keep(key, value, ttl_ms)
    }
}

/// A token just issued, and how long to keep it ([`ttl_ms`]).
pub struct Fresh {
    pub token: String,
    pub ttl_ms: u64,
}

/// A bearer token for one operation: the cached one, else a fresh one
/// from `renew` (kept for its lifetime). A provider that dropped a cached
/// token answers 401 to it, which performed nothing: [`Bearer::send`] then
/// renews the token and sends the request once more, under the same reference.
pub struct Bearer<'a, S: Store = HostCache> {
    store: S,
    key: String,
    /// Names the token in the error when its renewal fails (`no MTN token`).
    label: &'static str,
    renew: Box<dyn Fn() -> Result<Fresh, AdapterError> + 'a>,
    token: RefCell<String>,
    /// The token came from the store: the provider may have dropped it since.
    cached: Cell<bool>,
}

impl<'a, S: Store> Bearer<'a, S> {
    /// The token kept under `key`, else one from `renew`.
    pub fn open(
        store: S,
        key: String,
        label: &'static str,
        renew: impl Fn() -> Result<Fresh, AdapterError> + 'a,
    ) -> Result<Bearer<'a, S>, AdapterError> {
        let bearer = Bearer {
            store,
            key,
            label,
            renew: Box::new(renew),
            token: RefCell::default(),
            cached: Cell::new(false),
        };
        match bearer.store.get(&bearer.key) {
            Some(t) => {
                *bearer.token.borrow_mut() = t;
                bearer.cached.set(true);
            }
            None => bearer.renew()?,
        }
        Ok(bearer)
    }

    fn renew(&self) -> Result<(), AdapterError> {
        let fresh = (self.renew)()?;
        self.store.set(&self.key, &fresh.token, fresh.ttl_ms);
        *self.token.borrow_mut() = fresh.token;
        self.cached.set(false);
        Ok(())
    }

    /// One exchange under the token (`attempt` is given it). A 401 to a
    /// cached token: forgotten, renewed (a failed renewal sent nothing), and
    /// the exchange made once more; a 401 to a fresh token is the answer.
    pub fn send(
        &self,
        attempt: impl Fn(&str) -> Result<Response, AdapterError>,
    ) -> Result<Response, AdapterError> {
        let resp = attempt(&self.token.borrow())?;
        if resp.status != 401 || !self.cached.get() {
            return Ok(resp);
        }
        self.store.set(&self.key, "", 0);
        self.renew().map_err(before_sending(self.label))?;
        attempt(&self.token.borrow())
    }

    /// `method path` on `api` with the token as `Authorization: Bearer`,
    /// made as [`Bearer::send`] makes an exchange.
    pub fn exchange(
        &self,
        api: &Endpoint,
        (method, path): (&str, &str),
        headers: &[(String, String)],
        body: Option<Vec<u8>>,
    ) -> Result<Response, AdapterError> {
        self.send(|token| {
            let headers = [&[bearer(token)], headers].concat();
            api.send(method, path, &headers, body.clone())
        })
    }
}

/// A token from an OAuth 2 client-credentials endpoint on `api` (`POST
/// path` authorised by HTTP Basic `user:key`, answered `access_token` and
/// `expires_in`), kept until `margin_s` before it expires. Our credentials
/// refused (401, 403): the provider cannot be used now, which is no
/// customer's doing.
pub fn client_credentials(
    api: &Endpoint,
    path: &str,
    (user, key): (&str, &str),
    margin_s: u64,
) -> Result<Fresh, AdapterError> {
    #[derive(serde::Deserialize)]
    struct Issued {
        access_token: String,
        expires_in: Option<u64>,
    }
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{key}"));
    let authorization = [("Authorization".into(), format!("Basic {basic}"))];
    let resp = api.send("POST", path, &authorization, None)?;
    match resp.status {
        200 => {
            let issued: Issued = api.provider.read("token answer", &resp.body)?;
            Ok(Fresh {
                ttl_ms: ttl_ms(issued.expires_in, margin_s),
                token: issued.access_token,
            })
        }
        401 | 403 => Err(AdapterError::Unavailable(format!(
            "{} refused our credentials for {path} ({}): {}",
            api.provider.name,
            resp.status,
            mmc_domain::http::excerpt(&resp.body)
        ))),
        _ => Err(api.provider.unexpected(&resp)),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[derive(Default)]
    struct Memory(RefCell<HashMap<String, String>>);

    impl Store for &Memory {
        fn get(&self, key: &str) -> Option<String> {
            self.0.borrow().get(key).cloned()
        }
        fn set(&self, key: &str, value: &str, ttl_ms: u64) {
            let mut map = self.0.borrow_mut();
            match ttl_ms {
                0 => map.remove(key),
                _ => map.insert(key.into(), value.into()),
            };
        }
    }

    fn answer(status: u16) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// Issues `t1`, `t2`… and counts them.
    fn issuer(issued: &Cell<u32>) -> impl Fn() -> Result<Fresh, AdapterError> + '_ {
        move || {
            issued.set(issued.get() + 1);
            Ok(Fresh {
                token: format!("t{}", issued.get()),
                ttl_ms: 1000,
            })
        }
    }

    #[test]
    fn a_kept_token_is_used_and_a_new_one_kept() {
        let (memory, issued) = (Memory::default(), Cell::new(0));
        let bearer = Bearer::open(&memory, "k".into(), "no token", issuer(&issued)).unwrap();
        assert_eq!(
            (issued.get(), (&memory).get("k").as_deref()),
            (1, Some("t1"))
        );
        let again = Bearer::open(&memory, "k".into(), "no token", issuer(&issued)).unwrap();
        assert_eq!(issued.get(), 1, "the kept token serves");
        let sent = Cell::new(Vec::new());
        let attempt = |t: &str| {
            let mut s = sent.take();
            s.push(t.to_string());
            sent.set(s);
            Ok(answer(200))
        };
        assert_eq!(again.send(attempt).unwrap().status, 200);
        assert_eq!(bearer.send(attempt).unwrap().status, 200);
        assert_eq!(sent.take(), ["t1", "t1"]);
    }

    #[test]
    fn a_401_to_a_kept_token_renews_it_and_sends_once_more() {
        let (memory, issued) = (Memory::default(), Cell::new(0));
        (&memory).set("k", "old", 1000);
        let bearer = Bearer::open(&memory, "k".into(), "no token", issuer(&issued)).unwrap();
        let tokens = RefCell::new(Vec::new());
        let attempt = |t: &str| {
            tokens.borrow_mut().push(t.to_string());
            Ok(answer(if t == "old" { 401 } else { 200 }))
        };
        assert_eq!(bearer.send(attempt).unwrap().status, 200);
        assert_eq!(*tokens.borrow(), ["old", "t1"]);
        assert_eq!((&memory).get("k").as_deref(), Some("t1"));
    }

    #[test]
    fn a_401_to_a_fresh_token_is_the_answer_and_a_failed_renewal_sent_nothing() {
        let (memory, issued) = (Memory::default(), Cell::new(0));
        let bearer = Bearer::open(&memory, "k".into(), "no token", issuer(&issued)).unwrap();
        let count = Cell::new(0);
        let refused = |_: &str| {
            count.set(count.get() + 1);
            Ok(answer(401))
        };
        assert_eq!(bearer.send(refused).unwrap().status, 401);
        assert_eq!((count.get(), issued.get()), (1, 1), "no second attempt");

        (&memory).set("k", "old", 1000);
        let down = || Err(AdapterError::Timeout("token endpoint slow".into()));
        let bearer = Bearer::open(&memory, "k".into(), "no token", down).unwrap();
        let err = bearer.send(refused).unwrap_err();
        assert_eq!(
            err,
            AdapterError::NotSent("no token, nothing sent: token endpoint slow".into())
        );
        assert_eq!(count.get(), 2, "the request was not sent again");
    }

    #[test]
    fn a_value_is_fetched_once_then_kept_and_an_error_never_kept() {
        let (memory, fetched) = (Memory::default(), Cell::new(0));
        let fetch = |value: Option<&str>| {
            fetched.set(fetched.get() + 1);
            Ok::<_, AdapterError>(value.map(str::to_string))
        };
        assert_eq!(kept(&memory, "k", 1000, || fetch(None)), Ok(None));
        assert_eq!(kept(&memory, "k", 1000, || fetch(Some("x"))), Ok(None));
        assert_eq!(fetched.get(), 1, "none is an answer, kept as one");
        let down = || Err(AdapterError::Timeout("slow".into()));
        assert!(kept::<Option<String>, _>(&memory, "j", 1000, down).is_err());
        assert_eq!(
            kept(&memory, "j", 1000, || fetch(Some("x"))),
            Ok(Some("x".into()))
        );
        assert_eq!(fetched.get(), 2, "the error was not kept");
        (&memory).set("u", "<garbled>", 1000);
        assert_eq!(
            kept(&memory, "u", 1000, || fetch(Some("y"))),
            Ok(Some("y".into()))
        );
        assert_eq!(
            (&memory).get("u").as_deref(),
            Some(r#""y""#),
            "unreadable: fetched again"
        );
        assert_eq!(
            kept(&memory, "z", 0, || fetch(Some("z"))),
            Ok(Some("z".into()))
        );
        assert_eq!((&memory).get("z"), None, "a ttl of 0 keeps nothing");
    }

    #[test]
    fn a_token_is_kept_until_its_margin() {
        assert_eq!(ttl_ms(Some(3600), 600), 3_000_000);
        assert_eq!(
            ttl_ms(Some(300), 600),
            0,
            "shorter than the margin: not kept"
        );
        assert_eq!(ttl_ms(None, 600), 0, "no lifetime given: not kept");
    }
}
