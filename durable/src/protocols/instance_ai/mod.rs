//! n8n Instance AI.

pub mod stream;
