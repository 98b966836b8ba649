//! Durable keyed timers on PostgreSQL, shared by many processes: the keyed
//! contract of `timerpool`'s `TimerPool` with the tasks in the database, so
//! they survive process exits and any number of nodes serve one queue.
//!
//! The API takes the [`postgres`] crate's types (`Config`, `Client`,
//! `Transaction`); the crate re-exports it, so `timerpool-pg` is the only
//! dependency a project needs: `use timerpool_pg::postgres;`.
//!
//! A [`Queue`] schedules, replaces and cancels tasks from any client or
//! inside the caller's own transaction; a [`Node`] runs them: its leader
//! thread sleeps until the queue's earliest due time or a `LISTEN/NOTIFY`
//! wake, claims a batch with `FOR UPDATE SKIP LOCKED` under a lease, and
//! hands it to its workers. The [`guide`] states the contract, the schema
//! and the protocol.
//!
//! # Examples
//!
//! ```no_run
//! use std::time::Duration;
//! use timerpool_pg::{postgres, NewTask, Node, State};
//!
//! let config: postgres::Config = "postgres://postgres@127.0.0.1/test".parse()?;
//! let node = Node::builder(config.clone(), "offers")
//!     .workers(2)
//!     .handler("redispatch", |job| {
//!         println!("offer {} timed out ({} bytes)", job.key(), job.payload().len());
//!         Ok(())
//!     })
//!     .start()?;
//!
//! let mut client = config.connect(postgres::NoTls)?;
//! let offers = node.queue().clone();
//! let first = offers.schedule(&mut client, &NewTask::new("trip-42", "redispatch").after(Duration::from_secs(15)))?;
//! // The offer moves to another driver: same key, new deadline, one pending task.
//! let moved = offers.schedule(&mut client, &NewTask::new("trip-42", "redispatch").after(Duration::from_secs(15)))?;
//! assert!(moved.replaced);
//! // The second driver accepts.
//! assert!(offers.cancel(&mut client, "trip-42")?);
//! let states: Vec<State> = offers.history(&mut client, "trip-42")?.iter().map(|r| r.state).collect();
//! assert_eq!(states, [State::Replaced, State::Cancelled]);
//! # let _ = first;
//! node.shutdown();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Timing guarantees
//!
//! A task is never claimed before the database's clock reads its due time
//! (`run_at <= statement_timestamp()` is part of the claim), so no node,
//! whatever its own clock says, runs it early. It starts roughly on time
//! when a worker is free: the leader waits for the earliest due time, and
//! every schedule notifies the nodes at commit with its due time (a leader
//! ignores one that is not before the end of its wait). A wait never lasts
//! longer than the safety re-check (default 30 s) or the lease (default
//! 30 s), whichever is shorter, which covers lost notifications and leases
//! taken while a leader slept.
//!
//! # Delivery
//!
//! At least once. A claim is a lease renewed by heartbeats; when a node
//! dies, another node takes its tasks over once the lease expires and runs
//! them again ([`Job::attempt`] above 1, counted in
//! [`NodeStats::reruns`]). Results are fenced by (owner, attempt), so a late
//! result from a node that lost its lease changes nothing. Attempts are
//! bounded; every task ends with exactly one recorded outcome ([`State`]).
//!
//! # Shutdown
//!
//! [`Node::shutdown`] (or dropping the node) stops claiming, runs what the
//! node claimed, records the results and joins its threads; pending tasks
//! stay in the database for the other nodes.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

/// The guide: contract, schema, protocol, tests and measurements
/// (`docs/durable.md` of this crate).
#[doc = include_str!("../docs/durable.md")]
pub mod guide {}

mod calendar;
mod connect;
mod error;
mod leader;
mod names;
mod node;
mod queue;
mod record;
mod recorder;
mod schema;
mod shared;
pub mod sql;
mod task;
mod worker;

/// The synchronous PostgreSQL client this crate's API takes, re-exported
/// so callers need no dependency of their own and always get the same
/// version.
pub use postgres;

pub use calendar::{
    parse_tick_key, tick_handler, tick_key, Backfill, CalendarSchedule, Registered, ScheduleInfo,
    ScheduleKeeper, TopUp, MAX_BACKFILL,
};
pub use error::Error;
pub use names::{MAX_KEY_BYTES, MAX_NAME_BYTES, MAX_PAYLOAD_BYTES};
pub use node::{Node, NodeBuilder};
pub use queue::Queue;
pub use record::{Record, State};
pub use schema::VERSION as SCHEMA_VERSION;
pub use shared::{HandlerResult, Job, NodeStats};
pub use task::{Due, NewTask, Scheduled, DEFAULT_MAX_ATTEMPTS};

// The README's example is compiled as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
