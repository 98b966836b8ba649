//! The completion stream: a record per task outcome, sent to a channel
//! and a listener the builder asked for.
//!
//! - `record.rs`: the record ([`Completion`]);
//! - `observe.rs`: what the builder asked for and the engine keeps to send
//!   records (`Observe`, `Sink`);
//! - `send.rs`: the builder's settings and the engine's calls that make
//!   and send the records;
//! - `receiver.rs`: what the caller reads them from, blocking or async,
//!   ending once the pool has shut down and its last record was sent.

mod observe;
mod receiver;
mod record;
mod send;

pub(crate) use observe::*;
pub use receiver::{CompletionIter, CompletionReceiver};
#[cfg(feature = "tracing")]
pub(crate) use record::KeyFormat;
pub use record::{Completion, CompletionKind};
pub(crate) use send::StreamHold;
