//! Storage: the thread's storage trait and its stored shapes, in memory
//! (with fault injection) and on SQL (`store`); SQL as every object class
//! runs it (`db`: Durable Object SQLite in the Worker, SQLite natively in the
//! tests); and each object class's layout as versioned, re-runnable
//! migrations (`migrations`).

pub mod db;
pub mod migrations;
pub mod store;
