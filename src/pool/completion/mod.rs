//! The completion stream: a record per task outcome, sent to a channel
//! and a listener the builder asked for.
//!
//! - `record.rs`: the record ([`Completion`]) and what the engine keeps to
//!   make one (`Observe`, `Sink`);
//! - `send.rs`: the builder's settings and the engine's calls that make
//!   and send the records;
//! - `receiver.rs`: what the caller reads them from, blocking or async,
//!   ending once the pool has shut down and its last record was sent.

mod receiver;
mod record;
mod send;

pub use receiver::{CompletionIter, CompletionReceiver};
pub(crate) use record::*;
pub use record::{Completion, CompletionKind};
pub(crate) use send::StreamHold;
