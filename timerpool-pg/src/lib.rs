//! Durable keyed timers on PostgreSQL, shared by many processes: the keyed
//! contract of `timerpool`'s `TimerPool` with the tasks in the database, so
//! they survive process exits and any number of nodes serve one queue.
//!
//! The API takes the [`postgres`] crate's types (`Config`, `Client`,
//! `Transaction`); the crate re-exports it, so `timerpool-pg` is the only
//! dependency a project needs: `use timerpool_pg::postgres;`.
//!
//! Async code schedules with its own driver, inside its own transaction:
//! feature `sqlx` adds `Queue::sqlx` (`SqlxQueue`, any sqlx `Executor`)
//! and feature `tokio-postgres` adds `Queue::tokio_postgres`
//! (`TokioPostgresQueue`, any tokio-postgres `GenericClient`), each
//! re-exporting its driver. Both send the statements the synchronous
//! methods send; the [`guide`] ("From async code") compares the ways.
//!
//! A [`Queue`] schedules, replaces and cancels tasks from any client or
//! inside the caller's own transaction; a [`Node`] runs them: its leader
//! thread sleeps until the queue's earliest due time or a `LISTEN/NOTIFY`
//! wake, claims a batch with `FOR UPDATE SKIP LOCKED` under a lease, and
//! hands it to its workers. With the feature `tokio`, an `AsyncNode` does
//! the same with handlers that are `async fn`s, run on a tokio runtime. The
//! [`guide`] states the contract, the schema and the protocol.
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
// On docs.rs (`--cfg docsrs`, nightly rustdoc) the driver-specific items
// are marked with the feature they need.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs, missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The guide: contract, schema, protocol, tests and measurements
/// (`docs/durable.md` of this crate).
#[doc = include_str!("../docs/durable.md")]
pub mod guide {}

pub mod admin;
#[cfg(feature = "tokio")]
mod async_node;
mod calendar;
mod connect;
mod error;
mod leader;
mod names;
mod node;
mod ops;
mod queue;
mod record;
mod recorder;
mod schema;
mod shared;
pub mod sql;
#[cfg(feature = "sqlx")]
mod sqlx_client;
mod task;
#[cfg(feature = "tokio-postgres")]
mod tokio_client;
mod worker;

/// The synchronous PostgreSQL client this crate's API takes, re-exported
/// so callers need no dependency of their own and always get the same
/// version.
pub use postgres;

/// A node whose handlers are `async fn`s, run on a tokio runtime.
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use async_node::{AsyncNode, AsyncNodeBuilder};
/// The sqlx crate whose `Executor`s [`SqlxQueue`] takes, re-exported so
/// callers use the same version (feature `sqlx`).
#[cfg(feature = "sqlx")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
pub use sqlx;

/// The tokio-postgres crate whose clients [`TokioPostgresQueue`] takes,
/// re-exported so callers use the same version (feature `tokio-postgres`).
#[cfg(feature = "tokio-postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-postgres")))]
pub use tokio_postgres;

pub use calendar::{
    parse_tick_key, tick_handler, tick_key, Backfill, CalendarSchedule, Registered, ScheduleInfo,
    MAX_BACKFILL,
};
pub use error::Error;
pub use names::{MAX_KEY_BYTES, MAX_NAME_BYTES, MAX_PAYLOAD_BYTES};
pub use node::{Node, NodeBuilder};
pub use queue::Queue;
pub use record::{Record, State};
pub use schema::VERSION as SCHEMA_VERSION;
pub use shared::{HandlerResult, Job, NodeStats};
#[cfg(feature = "sqlx")]
pub use sqlx_client::SqlxQueue;
pub use task::{Due, NewTask, Scheduled, DEFAULT_MAX_ATTEMPTS};
#[cfg(feature = "tokio-postgres")]
pub use tokio_client::TokioPostgresQueue;

// The README's examples are compiled as doc tests (with the feature the
// async one needs).
#[doc = include_str!("../README.md")]
#[cfg(all(doctest, feature = "tokio"))]
pub struct ReadmeDoctests;
