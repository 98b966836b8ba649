//! The crate's one error type.

use std::fmt;

/// Everything the public API can refuse, with a message that says why.
///
/// A refused `schedule`/`submit` drops the closure it was given (outside every
/// lock) and changes nothing else.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{Error, TimerPool};
/// let pool = TimerPool::<u64>::builder().workers(1).capacity(1).build()?;
/// pool.schedule(1, Duration::from_secs(60), || ())?;
/// match pool.schedule(2, Duration::from_secs(60), || ()) {
///     Err(Error::CapacityReached { capacity }) => assert_eq!(capacity, 1),
///     other => panic!("{other:?}"),
/// }
/// let e = pool.schedule(3, Duration::MAX, || ()).unwrap_err();
/// assert_eq!(e, Error::TimeOutOfRange);
/// println!("{e}"); // every error says why
/// # Ok::<(), timerpool::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A capacity of zero was requested; capacity must be positive.
    ZeroCapacity,
    /// A capacity above what the index can address was requested.
    CapacityTooLarge {
        /// The capacity asked for.
        requested: usize,
        /// The largest accepted capacity.
        max: usize,
    },
    /// A new key arrived while `capacity` tasks were pending.
    CapacityReached {
        /// The configured capacity.
        capacity: usize,
    },
    /// [`Scheduler::run`](crate::Scheduler::run) was given a zero time unit,
    /// which would turn its timed wait into busy polling.
    ZeroTimeUnit,
    /// A pool with zero worker threads was requested.
    ZeroWorkers,
    /// More worker threads were requested than the pool allows.
    TooManyWorkers {
        /// The worker count asked for.
        requested: usize,
        /// The largest accepted worker count.
        max: usize,
    },
    /// A periodic task was given a zero period or delay.
    ZeroPeriod,
    /// The worker thread name prefix contains a NUL byte, which no thread
    /// name may hold.
    InvalidThreadName,
    /// A staleness tolerance of zero was requested: it would expire every
    /// task a worker does not start within the nanosecond it falls due.
    ZeroExpiry,
    /// A spin window ([`Precision::Spin`](crate::Precision::Spin)) or a
    /// slack ([`Precision::Slack`](crate::Precision::Slack)) longer than
    /// the pool accepts was requested: longer than
    /// [`MAX_WINDOW`](crate::MAX_WINDOW), or a slack longer than the
    /// staleness tolerance ([`Builder::expire_after`](crate::Builder::expire_after)),
    /// which would expire the tasks the slack lets start late.
    WindowTooLong {
        /// The window asked for.
        requested: std::time::Duration,
        /// The longest accepted window.
        max: std::time::Duration,
    },
    /// [`TimerPool::settle`](crate::TimerPool::settle), or a step of
    /// [`TimerPool::advance`](crate::TimerPool::advance), reached its
    /// timeout with tasks still running or due: a task that blocks or never
    /// returns (`running` above 0), or tasks that keep scheduling work due
    /// at once, so the pool never settles.
    NotSettled {
        /// Tasks running at the bound.
        running: usize,
        /// Tasks pending at the bound (some of them due).
        pending: usize,
        /// The keys of the tasks running at the bound, in their `Debug`
        /// form (`"<keyless>"` for a keyless task), when the pool was built
        /// with [`Builder::debug_keys`](crate::Builder::debug_keys); empty
        /// otherwise. [`TimerPool::running_keys`](crate::TimerPool::running_keys)
        /// gives the keys themselves.
        running_keys: Vec<String>,
    },
    /// [`TimerPool::advance`](crate::TimerPool::advance) stopped at this
    /// many due times, its bound ([`Steps::max`](crate::Steps::max)),
    /// short of its target: tasks keep scheduling work just ahead of the
    /// clock within the span (a periodic task whose period is far below the
    /// span, or a chain of follow-ups), each stop making the next. Raise
    /// the bound (advance by a [`Steps`](crate::Steps) with a larger `max`)
    /// or advance by less. Work scheduled at "now" again and again is not
    /// this: it never lets a step settle, and ends in
    /// [`NotSettled`](Self::NotSettled) at the timeout.
    StepBound {
        /// The bound it reached.
        steps: usize,
    },
    /// [`TimerPool::advance`](crate::TimerPool::advance) was called on a
    /// pool whose clock is not a [`ManualClock`](crate::ManualClock): its
    /// clock moves by itself and cannot be advanced.
    NotManualClock,
    /// A retry policy ([`Retry`](crate::Retry)) was refused: this says why
    /// (zero attempts, or a jitter outside `0..=1`).
    InvalidRetry(&'static str),
    /// The operating system refused to start a worker thread.
    Spawn(String),
    /// A worker's start hook ([`Builder::on_thread_start`](crate::Builder::on_thread_start))
    /// panicked with this message; the pool was not started.
    ThreadStart(String),
    /// The pool is shutting down or shut down and takes no new work.
    ShutDown,
    /// The due time cannot be represented on the pool's clock (for example
    /// `Duration::MAX`, or more than about 292 years after the pool started).
    TimeOutOfRange,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ZeroCapacity => f.write_str("capacity must be positive, got 0"),
            Error::CapacityTooLarge { requested, max } => {
                write!(f, "capacity {requested} is larger than the maximum {max}")
            }
            Error::CapacityReached { capacity } => write!(
                f,
                "capacity reached: {capacity} tasks are pending and the key is new"
            ),
            Error::ZeroTimeUnit => {
                f.write_str("the time unit must be positive: a zero unit would busy-poll")
            }
            Error::ZeroWorkers => f.write_str("a pool needs at least one worker, got 0"),
            Error::TooManyWorkers { requested, max } => {
                write!(f, "{requested} workers requested, the maximum is {max}")
            }
            Error::ZeroPeriod => f.write_str("a periodic task needs a positive period or delay"),
            Error::InvalidThreadName => f.write_str("the thread name prefix contains a NUL byte"),
            Error::ZeroExpiry => f.write_str(
                "a staleness tolerance must be positive: zero would expire almost every task",
            ),
            Error::WindowTooLong { requested, max } => {
                write!(
                    f,
                    "precision window {requested:?} is longer than the maximum {max:?}"
                )
            }
            Error::InvalidRetry(why) => write!(f, "invalid retry policy: {why}"),
            Error::Spawn(why) => write!(f, "could not start a worker thread: {why}"),
            Error::NotSettled {
                running,
                pending,
                running_keys,
            } => {
                write!(
                    f,
                    "not settled within the timeout: {running} tasks still running"
                )?;
                if !running_keys.is_empty() {
                    write!(f, " ({})", running_keys.join(", "))?;
                }
                write!(f, ", {pending} pending")?;
                if *running > 0 {
                    f.write_str(
                        "; a task that blocks or never returns keeps the pool from settling",
                    )
                } else if *pending > 0 {
                    f.write_str("; work keeps falling due at once")
                } else {
                    Ok(())
                }
            }
            Error::StepBound { steps } => write!(
                f,
                "advance stopped at {steps} due times, its bound, short of its target: \
                 tasks keep scheduling work just ahead of the clock \
                 (raise Steps::max or advance by less)"
            ),
            Error::NotManualClock => f.write_str(
                "advance needs a pool built on a ManualClock: this pool's clock moves by itself",
            ),
            Error::ThreadStart(why) => write!(f, "a worker's start hook panicked: {why}"),
            Error::ShutDown => f.write_str("the pool is shut down and accepts no new tasks"),
            Error::TimeOutOfRange => {
                f.write_str("due time out of range: it cannot be represented on the pool's clock")
            }
        }
    }
}

impl std::error::Error for Error {}
