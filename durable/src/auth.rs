//! Who is calling: bearer JWTs (HS256 with a shared secret, RS256 / ES256
//! against an inline JWKS) and the short-lived, read-only stream tokens a
//! browser's EventSource puts in `?token=` (it cannot send headers).
//!
//! Signatures are checked with RustCrypto's `hmac`, `rsa` and `p256` (pure
//! Rust, the same natively and on wasm); nothing here hand-rolls crypto. Only
//! public-key verification uses `rsa`, which is not what its timing advisory
//! (RUSTSEC-2023-0071, decryption) is about.

use crate::wire::error::ApiError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::Value;
use sha2::Sha256;

/// Clock skew tolerated on `exp` and `nbf`.
pub const SKEW_MS: i64 = 60_000;

/// The caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    /// The JWT's `sub`.
    pub id: String,
    pub roles: Vec<String>,
}

/// How callers are authenticated (`AUTH_MODE`, or implied by the keys set).
#[derive(Clone, Debug)]
pub enum AuthMode {
    /// Bearer JWTs.
    Jwt(Verifier),
    /// A fixed local actor (`make dev`, tests): said at start-up.
    Dev,
    /// No authentication at all, chosen explicitly (`AUTH_MODE=none`).
    None,
    /// Nothing configured: every request is refused (503).
    Unconfigured,
    /// The configuration could not be read: every request is refused (503).
    Invalid(String),
}

impl AuthMode {
    /// From `AUTH_MODE`, `AUTH_JWT_SECRET`, `AUTH_JWKS`, `AUTH_ISSUER`,
    /// `AUTH_AUDIENCE`.
    pub fn from_config(
        mode: Option<&str>,
        secret: Option<&str>,
        jwks: Option<&str>,
        issuer: Option<&str>,
        audience: Option<&str>,
    ) -> AuthMode {
        match mode.map(str::trim) {
            Some("dev") => return AuthMode::Dev,
            Some("none") => return AuthMode::None,
            Some("jwt") | None => {}
            Some(other) => return AuthMode::Invalid(format!("AUTH_MODE `{other}` is not one of jwt, dev, none")),
        }
        if secret.is_none() && jwks.is_none() {
            return AuthMode::Unconfigured;
        }
        match Verifier::new(secret, jwks, issuer, audience) {
            Ok(v) => AuthMode::Jwt(v),
            Err(e) => AuthMode::Invalid(e),
        }
    }

    /// The caller of a request with this `Authorization` header value.
    pub fn authenticate(&self, authorization: Option<&str>, now_ms: i64) -> Result<Actor, ApiError> {
        match self {
            AuthMode::Dev => Ok(Actor { id: "dev".into(), roles: vec!["dev".into()] }),
            AuthMode::None => Ok(Actor { id: "anonymous".into(), roles: Vec::new() }),
            AuthMode::Unconfigured => Err(ApiError::auth_not_configured()),
            AuthMode::Invalid(e) => Err(ApiError::auth_misconfigured(e.clone())),
            AuthMode::Jwt(v) => {
                let token = authorization
                    .and_then(|h| h.strip_prefix("Bearer "))
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| unauthorized("a bearer token is required"))?;
                v.verify(token, now_ms)
            }
        }
    }
}

fn unauthorized(msg: &str) -> ApiError {
    ApiError::unauthorized(msg.to_owned())
}

/// Hex SHA-256 of a publish token: only the hash is stored.
pub fn hash_token(token: &str) -> String {
    hex::encode(<Sha256 as sha2::Digest>::digest(token.as_bytes()))
}

/// Compares in time independent of where the inputs differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[derive(Clone, Debug)]
enum Key {
    Rsa(Box<rsa::pkcs1v15::VerifyingKey<Sha256>>),
    Ec(p256::ecdsa::VerifyingKey),
}

/// Verifies JWTs against the configured keys and claims.
#[derive(Clone, Debug)]
pub struct Verifier {
    secret: Option<Vec<u8>>,
    keys: Vec<(Option<String>, Key)>,
    issuer: Option<String>,
    audience: Option<String>,
}

#[derive(Deserialize)]
struct Jwk {
    kty: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    n: Option<String>,
    #[serde(default)]
    e: Option<String>,
    #[serde(default)]
    crv: Option<String>,
    #[serde(default)]
    x: Option<String>,
    #[serde(default)]
    y: Option<String>,
}

#[derive(Deserialize)]
struct Jwks {
    keys: Vec<Jwk>,
}

fn b64(s: &str) -> Result<Vec<u8>, String> {
    B64.decode(s.trim_end_matches('=')).map_err(|e| format!("bad base64url: {e}"))
}

impl Verifier {
    pub fn new(
        secret: Option<&str>,
        jwks: Option<&str>,
        issuer: Option<&str>,
        audience: Option<&str>,
    ) -> Result<Verifier, String> {
        if let Some(s) = secret {
            if s.len() < 32 {
                return Err("AUTH_JWT_SECRET must be at least 32 bytes".into());
            }
        }
        let mut keys = Vec::new();
        if let Some(j) = jwks {
            let set: Jwks = serde_json::from_str(j).map_err(|e| format!("AUTH_JWKS is not a JWK set: {e}"))?;
            for k in set.keys {
                let key = match (k.kty.as_str(), k.crv.as_deref()) {
                    ("RSA", _) => {
                        let n = rsa::BigUint::from_bytes_be(&b64(k.n.as_deref().unwrap_or_default())?);
                        let e = rsa::BigUint::from_bytes_be(&b64(k.e.as_deref().unwrap_or_default())?);
                        let public =
                            rsa::RsaPublicKey::new(n, e).map_err(|e| format!("AUTH_JWKS: bad RSA key: {e}"))?;
                        Key::Rsa(Box::new(rsa::pkcs1v15::VerifyingKey::<Sha256>::new(public)))
                    }
                    ("EC", Some("P-256")) => {
                        let x = b64(k.x.as_deref().unwrap_or_default())?;
                        let y = b64(k.y.as_deref().unwrap_or_default())?;
                        if x.len() != 32 || y.len() != 32 {
                            return Err("AUTH_JWKS: a P-256 key has 32-byte x and y".into());
                        }
                        let point = p256::EncodedPoint::from_affine_coordinates(
                            x.as_slice().into(),
                            y.as_slice().into(),
                            false,
                        );
                        let key = p256::ecdsa::VerifyingKey::from_encoded_point(&point)
                            .map_err(|e| format!("AUTH_JWKS: bad P-256 key: {e}"))?;
                        Key::Ec(key)
                    }
                    (kty, crv) => return Err(format!("AUTH_JWKS: unsupported key {kty}/{}", crv.unwrap_or("-"))),
                };
                keys.push((k.kid, key));
            }
        }
        Ok(Verifier {
            secret: secret.map(|s| s.as_bytes().to_vec()),
            keys,
            issuer: issuer.map(str::to_owned),
            audience: audience.map(str::to_owned),
        })
    }

    /// Checks a compact JWS and its claims; returns its actor.
    pub fn verify(&self, token: &str, now_ms: i64) -> Result<Actor, ApiError> {
        let bad = || unauthorized("the token is not a valid JWT");
        let mut it = token.split('.');
        let (Some(h), Some(p), Some(s), None) = (it.next(), it.next(), it.next(), it.next()) else {
            return Err(bad());
        };
        let header: Value = serde_json::from_slice(&b64(h).map_err(|_| bad())?).map_err(|_| bad())?;
        let claims: Value = serde_json::from_slice(&b64(p).map_err(|_| bad())?).map_err(|_| bad())?;
        let sig = b64(s).map_err(|_| bad())?;
        let signed = &token.as_bytes()[..h.len() + 1 + p.len()];
        let kid = header.get("kid").and_then(Value::as_str);
        let ok = match header.get("alg").and_then(Value::as_str) {
            Some("HS256") => {
                let Some(secret) = &self.secret else { return Err(unauthorized("HS256 tokens are not accepted here")) };
                let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("any key length");
                mac.update(signed);
                mac.verify_slice(&sig).is_ok()
            }
            Some("RS256") => {
                self.keys.iter().filter(|(k, _)| kid.is_none() || k.as_deref() == kid).any(|(_, key)| match key {
                    Key::Rsa(v) => {
                        use rsa::signature::Verifier as _;
                        rsa::pkcs1v15::Signature::try_from(sig.as_slice()).is_ok_and(|s| v.verify(signed, &s).is_ok())
                    }
                    Key::Ec(_) => false,
                })
            }
            Some("ES256") => {
                self.keys.iter().filter(|(k, _)| kid.is_none() || k.as_deref() == kid).any(|(_, key)| match key {
                    Key::Ec(v) => {
                        use p256::ecdsa::signature::Verifier as _;
                        p256::ecdsa::Signature::from_slice(&sig).is_ok_and(|s| v.verify(signed, &s).is_ok())
                    }
                    Key::Rsa(_) => false,
                })
            }
            _ => return Err(unauthorized("the token's alg is not HS256, RS256 or ES256")),
        };
        if !ok {
            return Err(unauthorized("the token's signature does not verify"));
        }
        check_claims(&claims, self.issuer.as_deref(), self.audience.as_deref(), now_ms)
    }
}

/// `exp`, `nbf` (with [`SKEW_MS`]), `iss` and `aud` when configured; `sub`
/// is the actor and `roles` (an array of strings) its roles.
///
/// Claims that cannot name an actor safely are refused (401
/// `invalid_claims`): a `sub` with edge whitespace (headers and many stores
/// trim, so `" alice"` would become `"alice"`) or control characters, and
/// roles that are not strings, are empty, or hold a comma or a control
/// character (a role list is often joined with commas).
pub fn check_claims(
    claims: &Value,
    issuer: Option<&str>,
    audience: Option<&str>,
    now_ms: i64,
) -> Result<Actor, ApiError> {
    // Seconds as milliseconds, saturating: a far-future `exp` is a token
    // that does not expire, not an overflow.
    let ms = |k: &str| claims.get(k).and_then(Value::as_f64).map(|s| (s * 1000.0) as i64);
    match ms("exp") {
        Some(exp) if now_ms > exp.saturating_add(SKEW_MS) => return Err(unauthorized("the token has expired")),
        Some(_) => {}
        None => return Err(unauthorized("the token has no `exp`")),
    }
    if ms("nbf").is_some_and(|nbf| now_ms.saturating_add(SKEW_MS) < nbf) {
        return Err(unauthorized("the token is not valid yet"));
    }
    if let Some(iss) = issuer {
        if claims.get("iss").and_then(Value::as_str) != Some(iss) {
            return Err(unauthorized("the token's issuer is not accepted"));
        }
    }
    if let Some(aud) = audience {
        let ok = match claims.get("aud") {
            Some(Value::String(a)) => a == aud,
            Some(Value::Array(a)) => a.iter().any(|x| x == aud),
            _ => false,
        };
        if !ok {
            return Err(unauthorized("the token's audience is not accepted"));
        }
    }
    let id = claims
        .get("sub")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| unauthorized("the token has no `sub`"))?;
    if id.len() > 256 || id.trim() != id || id.chars().any(char::is_control) {
        return Err(ApiError::invalid_claims(
            "`sub` must be 1 to 256 characters, with no control characters and no leading or trailing whitespace",
        ));
    }
    let roles = match claims.get("roles") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let mut roles = Vec::with_capacity(items.len());
            for item in items {
                let ok = item.as_str().filter(|r| {
                    !r.is_empty()
                        && r.len() <= 128
                        && r.trim() == *r
                        && !r.contains(',')
                        && !r.chars().any(char::is_control)
                });
                let Some(role) = ok else {
                    return Err(ApiError::invalid_claims(
                        "each of `roles` must be a string of 1 to 128 characters, with no comma, control characters or edge whitespace",
                    ));
                };
                roles.push(role.to_owned());
            }
            roles
        }
        Some(_) => return Err(ApiError::invalid_claims("`roles` must be an array of strings")),
    };
    Ok(Actor { id: id.to_owned(), roles })
}

/// Stream tokens: `<threadId>.<actor b64>.<exp ms>.<hmac>`, read-only, for one
/// thread, valid `STREAM_TOKEN_TTL_MS` (by default this long).
pub const STREAM_TOKEN_TTL_MS: i64 = 5 * 60_000;

/// Separates stream-token MACs from any other use of the same key.
const STREAM_TOKEN_DOMAIN: &[u8] = b"threadline-stream-token\0";

fn stream_mac(key: &[u8], payload: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    mac.update(STREAM_TOKEN_DOMAIN);
    mac.update(payload.as_bytes());
    B64.encode(mac.finalize().into_bytes())
}

/// Issues a stream token for `actor` on `thread`, valid `ttl_ms`; returns it
/// and its expiry.
pub fn issue_stream_token(key: &[u8], thread: &str, actor: &str, now_ms: i64, ttl_ms: i64) -> (String, i64) {
    let exp = now_ms + ttl_ms;
    let payload = format!("{thread}.{}.{exp}", B64.encode(actor));
    let mac = stream_mac(key, &payload);
    (format!("st1.{payload}.{mac}"), exp)
}

/// Checks a stream token for `thread`; returns the actor it was issued to
/// and when it expires (a stream it opens ends then).
pub fn verify_stream_token(key: &[u8], token: &str, thread: &str, now_ms: i64) -> Result<(Actor, i64), ApiError> {
    let bad = || unauthorized("the stream token is not valid for this thread");
    let rest = token.strip_prefix("st1.").ok_or_else(bad)?;
    let (payload, mac) = rest.rsplit_once('.').ok_or_else(bad)?;
    // The MAC type compares in constant time.
    let mut check = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    check.update(STREAM_TOKEN_DOMAIN);
    check.update(payload.as_bytes());
    let given = B64.decode(mac).map_err(|_| bad())?;
    check.verify_slice(&given).map_err(|_| bad())?;
    let mut parts = payload.rsplitn(3, '.');
    let (Some(exp), Some(actor), Some(t)) = (parts.next(), parts.next(), parts.next()) else { return Err(bad()) };
    if t != thread {
        return Err(bad());
    }
    let exp: i64 = exp.parse().map_err(|_| bad())?;
    if now_ms > exp {
        return Err(unauthorized("the stream token has expired; ask for a new one"));
    }
    let id = String::from_utf8(B64.decode(actor).map_err(|_| bad())?).map_err(|_| bad())?;
    Ok((Actor { id, roles: Vec::new() }, exp))
}

/// A `?token=` that looks like a JWT: refused, because a URL ends up in
/// logs, history and referrers, where a long-lived credential must not.
pub fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ") && token.split('.').count() == 3
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn hs256(claims: &Value) -> String {
        let h = B64.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let p = B64.encode(claims.to_string());
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(format!("{h}.{p}").as_bytes());
        format!("{h}.{p}.{}", B64.encode(mac.finalize().into_bytes()))
    }

    #[test]
    fn hs256_claims() {
        let v = Verifier::new(Some(SECRET), None, Some("me"), Some("api")).unwrap();
        let now = 1_000_000_000_000;
        let good = json!({"sub":"alice","roles":["FINANCE"],"exp":(now/1000)+60,"iss":"me","aud":["api","x"]});
        assert_eq!(v.verify(&hs256(&good), now).unwrap(), Actor { id: "alice".into(), roles: vec!["FINANCE".into()] });
        let mut expired = good.clone();
        expired["exp"] = json!((now / 1000) - 120);
        assert!(v.verify(&hs256(&expired), now).is_err());
        let mut skewed = good.clone();
        skewed["exp"] = json!((now / 1000) - 30);
        assert!(v.verify(&hs256(&skewed), now).is_ok(), "within the skew");
        let mut early = good.clone();
        early["nbf"] = json!((now / 1000) + 120);
        assert!(v.verify(&hs256(&early), now).is_err());
        let mut wrong_iss = good.clone();
        wrong_iss["iss"] = json!("them");
        assert!(v.verify(&hs256(&wrong_iss), now).is_err());
        let mut wrong_aud = good.clone();
        wrong_aud["aud"] = json!("other");
        assert!(v.verify(&hs256(&wrong_aud), now).is_err());
        let token = hs256(&good);
        let tampered = format!("{}x", &token[..token.len() - 1]);
        assert!(v.verify(&tampered, now).is_err());
        for junk in ["", "a.b", "a.b.c.d", "!!.!!.!!"] {
            assert_eq!(v.verify(junk, now).unwrap_err().status, 401);
        }
        let none_alg = format!("{}.{}.", B64.encode(br#"{"alg":"none"}"#), B64.encode(good.to_string()));
        assert!(v.verify(&none_alg, now).is_err());
    }

    #[test]
    fn es256_and_rs256_via_jwks() {
        use p256::ecdsa::{signature::Signer, SigningKey};
        let sk = SigningKey::from_slice(&[7u8; 32]).unwrap();
        let point = sk.verifying_key().to_encoded_point(false);
        let jwks = json!({"keys":[{"kty":"EC","crv":"P-256","kid":"k1",
            "x": B64.encode(point.x().unwrap()), "y": B64.encode(point.y().unwrap())}]});
        let v = Verifier::new(None, Some(&jwks.to_string()), None, None).unwrap();
        let now = 1_000_000_000_000;
        let h = B64.encode(br#"{"alg":"ES256","kid":"k1"}"#);
        let p = B64.encode(json!({"sub":"bob","exp":(now/1000)+60}).to_string());
        let sig: p256::ecdsa::Signature = sk.sign(format!("{h}.{p}").as_bytes());
        let token = format!("{h}.{p}.{}", B64.encode(sig.to_bytes()));
        assert_eq!(v.verify(&token, now).unwrap().id, "bob");
        assert!(v
            .verify(&token.replace(&p, &B64.encode(json!({"sub":"eve","exp":(now/1000)+60}).to_string())), now)
            .is_err());
        // HS256 is refused when only keys are configured.
        assert!(v.verify(&hs256(&json!({"sub":"x","exp":(now/1000)+60})), now).is_err());
        assert!(Verifier::new(None, Some(r#"{"keys":[{"kty":"OKP"}]}"#), None, None).is_err());
        assert!(Verifier::new(Some("short"), None, None, None).is_err());
    }

    #[test]
    fn stream_tokens() {
        let (t, exp) = issue_stream_token(b"k", "thread-1", "alice", 1000, STREAM_TOKEN_TTL_MS);
        assert_eq!(exp, 1000 + STREAM_TOKEN_TTL_MS);
        assert_eq!(
            verify_stream_token(b"k", &t, "thread-1", 2000).unwrap(),
            (Actor { id: "alice".into(), roles: vec![] }, exp)
        );
        assert!(verify_stream_token(b"k", &t, "thread-2", 2000).is_err(), "one thread only");
        assert!(verify_stream_token(b"other", &t, "thread-1", 2000).is_err());
        assert!(verify_stream_token(b"k", &t, "thread-1", exp + 1).is_err(), "short-lived");
        assert!(
            verify_stream_token(b"k", &t.replace(&B64.encode("alice"), &B64.encode("bob")), "thread-1", 2000).is_err()
        );
        assert!(looks_like_jwt(&hs256(&json!({"sub":"x"}))));
        assert!(!looks_like_jwt(&t));
    }

    #[test]
    fn claims_that_cannot_name_an_actor_safely_are_refused() {
        let now = 1_000_000_000_000;
        let check = |claims: Value| check_claims(&claims, None, None, now);
        let exp = (now / 1000) + 60;
        for sub in [" alice", "alice ", "al\u{7}ice", "a\nb"] {
            assert_eq!(check(json!({"sub": sub, "exp": exp})).unwrap_err().code, "invalid_claims", "{sub:?}");
        }
        for roles in [json!(["a,b"]), json!([""]), json!([" a"]), json!([1]), json!("admin")] {
            assert_eq!(
                check(json!({"sub": "a", "exp": exp, "roles": roles})).unwrap_err().code,
                "invalid_claims",
                "{roles}"
            );
        }
        assert_eq!(check(json!({"sub": "用户 Zoë", "exp": exp, "roles": ["x-y"]})).unwrap().id, "用户 Zoë");
        // A far-future exp does not overflow into "expired".
        assert!(check(json!({"sub": "a", "exp": 1e20})).is_ok());
        assert!(check(json!({"sub": "a", "exp": exp, "nbf": -1e20})).is_ok());
    }

    #[test]
    fn modes() {
        assert!(matches!(AuthMode::from_config(None, None, None, None, None), AuthMode::Unconfigured));
        assert_eq!(
            AuthMode::from_config(None, None, None, None, None).authenticate(None, 0).unwrap_err().code,
            "auth_not_configured"
        );
        assert_eq!(AuthMode::from_config(Some("dev"), None, None, None, None).authenticate(None, 0).unwrap().id, "dev");
        assert_eq!(
            AuthMode::from_config(Some("none"), None, None, None, None).authenticate(None, 0).unwrap().id,
            "anonymous"
        );
        assert!(matches!(AuthMode::from_config(Some("maybe"), None, None, None, None), AuthMode::Invalid(_)));
        let jwt = AuthMode::from_config(None, Some(SECRET), None, None, None);
        assert_eq!(jwt.authenticate(None, 0).unwrap_err().status, 401);
        assert_eq!(jwt.authenticate(Some("Basic abc"), 0).unwrap_err().status, 401);
    }
}
