//! The outbound HTTP a host gives the core: a `POST` whose answer's body
//! arrives as it streams, a timer and a clock. The built-in agent's [`Host`]
//! extends it, and the MCP client needs only it, so neither imports the
//! other for it.
//!
//! [`Host`]: crate::agent::Host

/// A response body, chunk by chunk.
#[allow(async_fn_in_trait)]
pub trait ByteStream {
    /// The next chunk; `None` at the end; `Err` when the connection fails.
    async fn next(&mut self) -> Option<Result<Vec<u8>, String>>;
}

/// An HTTP `POST` a client of the host makes (the agent's MCP calls).
#[derive(Clone, Debug, PartialEq)]
pub struct Fetch {
    pub url: String,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Not aborted when the run is cancelled: what tells a server that the
    /// run was.
    pub detached: bool,
}

/// An answer to a [`Fetch`], its body as it arrives.
pub struct Fetched<S> {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: S,
}

/// What an outbound client needs from the platform.
#[allow(async_fn_in_trait)]
pub trait Outbound: Clone + 'static {
    type Stream: ByteStream;
    /// An HTTP `POST` (an MCP server's): its status, headers and body as it
    /// arrives. Aborted with the run unless `detached`.
    async fn post(&self, req: Fetch) -> Result<Fetched<Self::Stream>, String>;
    async fn sleep(&self, ms: u64);
    fn now(&self) -> i64;
}
