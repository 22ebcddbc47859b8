//! adonis-agora.

pub mod mapping;
pub mod stream;
