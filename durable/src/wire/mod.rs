//! The wire basics every protocol and the Worker share, apart from any
//! thread: SSE framing and decoding (`sse`), a decided answer (`reply`),
//! route tables as data (`route`), every refusal's status and stable code
//! (`error`), ids and scoped ids (`ids`), times as RFC 3339 (`time`), and
//! what travels with a request from the Worker to an object (`forward`). It
//! imports nothing of the crate above it.

pub mod error;
pub mod forward;
pub mod ids;
pub mod reply;
pub mod route;
pub mod sse;
pub mod time;
