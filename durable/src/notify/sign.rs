//! Standard Webhooks signatures (standardwebhooks.com): `webhook-id`,
//! `webhook-timestamp` (Unix seconds) and `webhook-signature`, a
//! space-separated list of `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`,
//! one per secret, so an endpoint rotating its secret verifies with either.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Why a secret cannot sign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSecret(pub String);

/// A secret's key: the base64 after `whsec_` (a secret without the prefix
/// is read as the base64 itself, as the reference libraries do).
pub fn key(secret: &str) -> Result<Vec<u8>, BadSecret> {
    let raw = secret.trim();
    let b64 = raw.strip_prefix("whsec_").unwrap_or(raw);
    let key = STANDARD.decode(b64).map_err(|_| BadSecret("a webhook secret is `whsec_` and base64".into()))?;
    if key.is_empty() {
        return Err(BadSecret("a webhook secret is empty".into()));
    }
    Ok(key)
}

/// The secrets an environment variable holds: one, or two (the new and the
/// old, separated by a space) while an endpoint rotates.
pub fn keys(value: &str) -> Result<Vec<Vec<u8>>, BadSecret> {
    let keys: Vec<Vec<u8>> = value.split_whitespace().map(key).collect::<Result<_, _>>()?;
    if keys.is_empty() {
        return Err(BadSecret("no webhook secret is set".into()));
    }
    Ok(keys)
}

/// The `webhook-signature` header of `body` sent as message `id` at
/// `timestamp` (seconds), signed with each key.
pub fn signature(keys: &[Vec<u8>], id: &str, timestamp: i64, body: &[u8]) -> String {
    let signed = |key: &[u8]| {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    };
    keys.iter().map(|k| signed(k)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector every reference library tests against.
    #[test]
    fn the_reference_vector_signs_as_the_libraries_do() {
        let keys = keys("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = signature(&keys, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, br#"{"test": 2432232314}"#);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn two_secrets_sign_twice_and_bad_ones_are_refused() {
        let keys = keys("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw  whsec_AAAA").unwrap();
        let sig = signature(&keys, "msg_1", 1, b"{}");
        assert_eq!(sig.split(' ').count(), 2);
        assert!(sig.split(' ').all(|s| s.starts_with("v1,")));
        for bad in ["", "   ", "whsec_", "whsec_not base64!"] {
            assert!(super::keys(bad).is_err(), "{bad:?}");
        }
    }
}
