//! Random identifiers and tokens, from the platform's CSPRNG
//! (`crypto.getRandomValues` through `getrandom`).

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::getrandom(&mut buf).expect("the platform CSPRNG is available");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// 64 random bits.
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    getrandom::getrandom(&mut b).expect("the platform CSPRNG is available");
    u64::from_le_bytes(b)
}

/// A subscriber's id: 53 random bits, so it round-trips through a socket's
/// attachment (a JavaScript number) exactly.
pub fn subscriber_id() -> u64 {
    random_u64() & ((1 << 53) - 1)
}

/// `prefix_` + 96 random bits, e.g. `run_3f2a…`.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", random_hex(12))
}

/// A bearer publish token: 256 random bits.
pub fn new_token() -> String {
    format!("tlp_{}", random_hex(32))
}

/// The platform's CSPRNG as the core's id source.
pub struct Csprng;

impl threadline_durable::Random for Csprng {
    fn id(&self, prefix: &str) -> String {
        new_id(prefix)
    }

    fn token(&self) -> String {
        new_token()
    }
}

/// 24 random bytes: a new trace's id and a span's.
pub fn trace_bytes() -> [u8; 24] {
    let mut b = [0u8; 24];
    getrandom::getrandom(&mut b).expect("the platform CSPRNG is available");
    b
}
