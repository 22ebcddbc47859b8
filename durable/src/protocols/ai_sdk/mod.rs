//! The AI SDK's UI message stream.

pub mod mapping;
pub mod stream;
