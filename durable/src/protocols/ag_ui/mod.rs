//! AG-UI.

pub mod history;
pub mod mapping;
pub mod stream;
