//! The wire protocols, each in its own folder.

pub mod ag_ui;
pub mod agora;
pub mod ai_sdk;
pub mod durable_streams;
pub mod instance_ai;
