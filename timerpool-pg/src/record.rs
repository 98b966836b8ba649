//! What the database records about a task: its state or final outcome,
//! with timing and attempts, readable by key.

use std::time::SystemTime;

/// Where a task is, or how it ended. Every task ends in exactly one of the
/// final states; the `outcomes` table's primary key makes that a database
/// fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Waiting for its due time (at most one per queue and key).
    Pending,
    /// Claimed by a node, under a lease, or waiting for a retry.
    Running,
    /// The handler returned `Ok`.
    Completed,
    /// The last allowed attempt failed: the handler returned an error or
    /// panicked, or no handler of that name was registered on the node.
    Failed,
    /// Cancelled while pending; it never ran.
    Cancelled,
    /// Replaced by a new task of the same key while pending; it never ran.
    Replaced,
    /// Claimed later than its expiry window; it never ran.
    Expired,
    /// The lease of its last allowed attempt expired with no result: the
    /// node running it died or was cut off each time.
    Abandoned,
}

impl State {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Running => "running",
            State::Completed => "completed",
            State::Failed => "failed",
            State::Cancelled => "cancelled",
            State::Replaced => "replaced",
            State::Expired => "expired",
            State::Abandoned => "abandoned",
        }
    }

    /// The state named `s`, if it is one.
    pub fn parse(s: &str) -> Option<State> {
        Some(match s {
            "pending" => State::Pending,
            "running" => State::Running,
            "completed" => State::Completed,
            "failed" => State::Failed,
            "cancelled" => State::Cancelled,
            "replaced" => State::Replaced,
            "expired" => State::Expired,
            "abandoned" => State::Abandoned,
            _ => return None,
        })
    }

    /// True for the outcomes a task ends with.
    pub fn is_final(self) -> bool {
        !matches!(self, State::Pending | State::Running)
    }
}

/// One task as recorded: live (`Pending`/`Running`) or finished. Times are
/// the database's clock, except `started` and `finished`, which are the
/// claim time plus the node's monotonic time since the claim arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Task id (a replace creates a new id).
    pub id: i64,
    /// The key.
    pub key: String,
    /// The handler name.
    pub handler: String,
    /// State or outcome.
    pub state: State,
    /// When it fell or falls due.
    pub due: SystemTime,
    /// When it was scheduled.
    pub created: SystemTime,
    /// When its latest attempt was claimed.
    pub claimed: Option<SystemTime>,
    /// When its last attempt started to run.
    pub started: Option<SystemTime>,
    /// When it ended.
    pub finished: Option<SystemTime>,
    /// Attempts claimed so far (0 for a task that never ran).
    pub attempts: u32,
    /// Node that claimed its latest attempt.
    pub owner: Option<String>,
    /// The last failure's message, if any.
    pub error: Option<String>,
}
