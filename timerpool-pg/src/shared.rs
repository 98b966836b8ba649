//! What a node's threads share: the settings, the handlers, the claim
//! slots, the held leases and the counters, plus the `Job` a handler sees.

use crate::Queue;
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What a handler returns: `Err` (or a panic) is a failed attempt.
pub type HandlerResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A registered handler.
pub(crate) type Handler = Arc<dyn Fn(&Job) -> HandlerResult + Send + Sync>;

/// One claimed attempt of a task, as its handler sees it.
#[derive(Debug, Clone)]
pub struct Job {
    /// Task id.
    pub(crate) id: i64,
    /// The key.
    pub(crate) key: String,
    /// Handler name.
    pub(crate) handler: String,
    /// Payload bytes.
    pub(crate) payload: Vec<u8>,
    /// Attempt number, from 1.
    pub(crate) attempt: i32,
    /// Attempt bound.
    pub(crate) max_attempts: i32,
    /// Due time (database clock).
    pub(crate) due: SystemTime,
    /// Claim time (database clock).
    pub(crate) claimed: SystemTime,
    /// When the claim reached this node (its monotonic clock).
    pub(crate) received: std::time::Instant,
    /// Claimed after its expiry window.
    pub(crate) stale: bool,
    /// The previous attempt's failure, if any.
    pub(crate) last_error: Option<String>,
}

impl Job {
    /// Task id.
    pub fn id(&self) -> i64 {
        self.id
    }
    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }
    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }
    /// This attempt's number, from 1; above 1 it is a re-run (delivery is
    /// at-least-once).
    pub fn attempt(&self) -> u32 {
        self.attempt.max(0) as u32
    }
    /// When the task fell due, on the database's clock.
    pub fn due(&self) -> SystemTime {
        self.due
    }
    /// When this attempt was claimed, on the database's clock (never
    /// before [`due`](Job::due)).
    pub fn claimed(&self) -> SystemTime {
        self.claimed
    }
}

/// Counters of one node since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Attempts claimed.
    pub claimed: u64,
    /// Handler runs started.
    pub started: u64,
    /// Runs whose attempt number was above 1 (at-least-once re-runs).
    pub reruns: u64,
    /// Outcomes this node recorded (completed, failed, expired, abandoned).
    pub recorded: u64,
    /// Failed attempts given back for a retry.
    pub retried: u64,
    /// Results refused by the fence: the lease had passed to another node
    /// (or a lost commit acknowledgement was retried).
    pub fenced: u64,
    /// Connections re-opened after a failure.
    pub reconnects: u64,
    /// Lease renewals sent.
    pub heartbeats: u64,
    /// Safety re-checks: waits that ended at their upper bound (the safety
    /// re-check or the lease, whichever is shorter).
    pub safety_wakes: u64,
}

/// The counters, shared by a node's threads.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub claimed: AtomicU64,
    pub started: AtomicU64,
    pub reruns: AtomicU64,
    pub recorded: AtomicU64,
    pub retried: AtomicU64,
    pub fenced: AtomicU64,
    pub reconnects: AtomicU64,
    pub heartbeats: AtomicU64,
    pub safety_wakes: AtomicU64,
}

impl Counters {
    /// The counters' current values.
    pub(crate) fn snapshot(&self) -> NodeStats {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        NodeStats {
            claimed: r(&self.claimed),
            started: r(&self.started),
            reruns: r(&self.reruns),
            recorded: r(&self.recorded),
            retried: r(&self.retried),
            fenced: r(&self.fenced),
            reconnects: r(&self.reconnects),
            heartbeats: r(&self.heartbeats),
            safety_wakes: r(&self.safety_wakes),
        }
    }
}

/// Settings every thread reads.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub id: String,
    pub queue: Queue,
    pub workers: usize,
    pub prefetch: usize,
    pub lease: Duration,
    pub heartbeat: Duration,
    pub safety: Duration,
    pub retention: Duration,
    pub purge_every: Duration,
    pub retry_backoff: Duration,
    pub wake_channel: String,
}

/// State shared by a node's threads.
pub(crate) struct Shared {
    /// The settings.
    pub cfg: Settings,
    /// Handlers by name.
    pub handlers: HashMap<String, Handler>,
    /// Non-zero once shutdown began.
    pub stop: AtomicU64,
    /// Attempts handed to workers and not yet finished.
    pub in_flight: Mutex<usize>,
    /// Ids of the tasks this node holds claimed and has not yet recorded:
    /// the only ones its heartbeat renews (a claim whose reply was lost is
    /// not among them, so its lease runs out and another node re-runs it).
    pub held: Mutex<HashSet<i64>>,
    /// Signalled when `in_flight` drops to half of `prefetch`, or on stop.
    pub room: Condvar,
    /// The counters.
    pub counters: Counters,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("cfg", &self.cfg)
            .field("handlers", &self.handlers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// True once shutdown began.
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire) != 0
    }
}
