//! Retry policies: a one-shot task returning `Result` that, when an attempt
//! returns `Err` (one its policy retries) or panics, runs again after a
//! backoff under the same key, up to a number of attempts. Built on the
//! dynamic periodic task (`periodic.rs`, [`Next`]): the pool sees a
//! periodic task whose closure catches the job's panic, asks the policy
//! about an error, and picks the next delay, or stops. So a retry is
//! cancelled, replaced, rescheduled and shut down as a periodic task is,
//! and between attempts it is pending under its key.
//!
//! # Ground rules
//!
//! - The attempt record ([`Attempts`]) is written only by the task's runs,
//!   which never overlap, and read by its handle once the task stopped (or
//!   for a count); its lock is never held across user code (the job, the
//!   policy's predicate, an error's or a value's `Drop`).
//! - An `Err` is a value, not a panic: nothing of it reaches the panic
//!   hook.

use super::handle::PeriodicHandle;
use super::task::TaskKey;
use super::{Due, Next, Outcome, Repeat, TimerPool};
use crate::contain::{drop_quietly, panic_message};
use crate::sync::{Arc, Mutex};
use crate::Error;
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hash};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// When a task whose attempt failed (returned `Err`, or panicked) runs
/// again, and how often: a retry policy for
/// [`TimerPool::schedule_retrying`]. As it is, it retries every error; with
/// [`retry_if`](Self::retry_if) only those a predicate picks.
///
/// The delay after the `n`-th failed attempt is `first` for a fixed
/// backoff, `first * 2^(n-1)` up to `cap` for an exponential one; with
/// [`jitter`](Self::jitter) a random part of it, up to the given fraction,
/// is taken off (so retries of many tasks that failed together spread out,
/// and none waits longer than its backoff).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::Retry;
///
/// let policy = Retry::exponential(5, Duration::from_millis(100), Duration::from_secs(2))
///     .jitter(0.5);
/// assert_eq!(policy.attempts(), 5);
/// let fixed = Retry::fixed(3, Duration::from_secs(1));
/// assert_eq!(fixed.backoff(2), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Retry {
    /// Most attempts, the first run included.
    attempts: u32,
    /// The delay after the first failure.
    first: Duration,
    /// Whether the delay doubles after each failure.
    exponential: bool,
    /// The longest delay.
    cap: Duration,
    /// The largest fraction of a delay jitter takes off, in `0.0..=1.0`.
    jitter: f64,
    /// The jitter's seed; `None`: a random one per task.
    seed: Option<u64>,
}

impl Retry {
    /// Up to `attempts` runs in all, `delay` apart. Zero attempts makes
    /// scheduling fail with [`Error::InvalidRetry`].
    pub fn fixed(attempts: u32, delay: Duration) -> Self {
        Retry {
            attempts,
            first: delay,
            exponential: false,
            cap: delay,
            jitter: 0.0,
            seed: None,
        }
    }

    /// Up to `attempts` runs in all; the delay after the first failure is
    /// `first`, doubling after each further failure, never above `cap`.
    pub fn exponential(attempts: u32, first: Duration, cap: Duration) -> Self {
        Retry {
            exponential: true,
            cap,
            ..Retry::fixed(attempts, first)
        }
    }

    /// Take a random part, up to `fraction` (`0.0..=1.0`), off each delay.
    /// Default: 0 (none). Outside that range scheduling fails with
    /// [`Error::InvalidRetry`].
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.jitter = fraction;
        self
    }

    /// Seed the jitter, so that a test sees the same delays every time.
    /// Default: a random seed per task.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::Retry;
    /// let repeatable = Retry::fixed(4, Duration::from_secs(1)).jitter(0.3).jitter_seed(42);
    /// # let _ = repeatable;
    /// ```
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Most attempts, the first run included.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The delay after the `failed`-th failed attempt, before jitter.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::Retry;
    /// let policy = Retry::exponential(10, Duration::from_secs(1), Duration::from_secs(5));
    /// let delays: Vec<u64> = (1..=4).map(|n| policy.backoff(n).as_secs()).collect();
    /// assert_eq!(delays, [1, 2, 4, 5]);
    /// ```
    pub fn backoff(&self, failed: u32) -> Duration {
        if !self.exponential {
            return self.first;
        }
        let doublings = failed.saturating_sub(1).min(63);
        let factor = 1u64 << doublings;
        let scaled = u32::try_from(factor)
            .ok()
            .and_then(|f| self.first.checked_mul(f));
        scaled.map_or(self.cap, |d| d.min(self.cap))
    }

    /// The policy, checked.
    fn checked(self) -> Result<Self, Error> {
        if self.attempts == 0 {
            return Err(Error::InvalidRetry(
                "a retry policy needs at least one attempt",
            ));
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return Err(Error::InvalidRetry("jitter must lie between 0 and 1"));
        }
        Ok(self)
    }

    /// Retry only the errors `pred` picks: an attempt that returns an
    /// error `pred` says no to (a 404, a refused credential: not worth
    /// another try) ends the task at once with that error. Panics are
    /// retried either way. Call it last, after the backoff settings.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{ManualClock, Outcome, Retry, TimerPool};
    ///
    /// #[derive(Debug, PartialEq)]
    /// enum SendError { Unavailable, NotFound }
    ///
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<&str>::builder().workers(1).clock(clock.clone()).build()?;
    /// let policy = Retry::fixed(5, Duration::from_secs(1))
    ///     .retry_if(|e: &SendError| *e == SendError::Unavailable);
    /// let h = pool.schedule_retrying("hook", Duration::ZERO, policy, || -> Result<(), _> {
    ///     Err(SendError::NotFound)
    /// })?;
    /// pool.settle(Duration::from_secs(10))?;
    /// let done = h.wait();
    /// assert_eq!((done.outcome, done.attempts), (Outcome::Completed(Err(SendError::NotFound)), 1));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn retry_if<E, P>(self, pred: P) -> RetryIf<P>
    where
        P: FnMut(&E) -> bool + Send + 'static,
    {
        RetryIf { retry: self, pred }
    }

    /// The delay after the `failed`-th failure, jittered by `rng`.
    fn delay(&self, failed: u32, rng: &mut SplitMix) -> Duration {
        let d = self.backoff(failed);
        if self.jitter == 0.0 {
            return d;
        }
        d.saturating_sub(d.mul_f64(self.jitter * rng.unit()))
    }
}

/// A [`Retry`] that retries only the errors its predicate picks: made by
/// [`Retry::retry_if`].
#[derive(Clone, Copy)]
pub struct RetryIf<P> {
    /// The backoff.
    retry: Retry,
    /// Which errors are worth another attempt.
    pred: P,
}

impl<P> fmt::Debug for RetryIf<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryIf")
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// What [`TimerPool::schedule_retrying`] takes for a task whose attempts
/// return `Result<_, E>`: a [`Retry`] (every error is retried) or a
/// [`RetryIf`] (the errors its predicate picks). Sealed: those two are
/// all.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{Retry, RetryPolicy};
///
/// fn accepts<E>(_: impl RetryPolicy<E>) {}
/// accepts::<std::io::Error>(Retry::fixed(3, Duration::from_secs(1)));
/// accepts(Retry::fixed(3, Duration::from_secs(1)).retry_if(|e: &std::io::Error| {
///     e.kind() == std::io::ErrorKind::TimedOut
/// }));
/// ```
pub trait RetryPolicy<E>: sealed::Policy<E> {}

impl<E, P: sealed::Policy<E>> RetryPolicy<E> for P {}

/// The methods of [`RetryPolicy`], out of reach outside the crate.
mod sealed {
    use super::Retry;

    /// A retry policy as the pool uses it.
    pub trait Policy<E>: Send + 'static {
        /// The backoff.
        fn backoff_policy(&self) -> Retry;
        /// True if an attempt that returned `error` may be tried again
        /// (attempts permitting). Runs user code.
        fn retries(&mut self, error: &E) -> bool;
    }

    impl<E> Policy<E> for Retry {
        fn backoff_policy(&self) -> Retry {
            *self
        }

        fn retries(&mut self, _: &E) -> bool {
            true
        }
    }

    impl<E, P> Policy<E> for super::RetryIf<P>
    where
        P: FnMut(&E) -> bool + Send + 'static,
    {
        fn backoff_policy(&self) -> Retry {
            self.retry
        }

        fn retries(&mut self, error: &E) -> bool {
            (self.pred)(error)
        }
    }
}

/// A small seeded generator for the jitter (splitmix64).
struct SplitMix(u64);

impl SplitMix {
    /// The next number in `0.0..1.0`.
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What a retried task's attempts left, shared by its runs and its handle.
struct Attempts<T> {
    /// Attempts made.
    made: u32,
    /// The latest attempt's panic message.
    last_panic: Option<String>,
    /// What the last attempt returned: its value, or an error not retried.
    value: Option<T>,
}

/// A retried task's final result: its outcome, how many attempts ran, and
/// the last panic's message. `T` is what the task's closure returns, a
/// `Result`.
///
/// The outcome is [`Outcome::Completed`] with what the last attempt
/// returned: `Ok` from the attempt that succeeded, or `Err` with the typed
/// error of the last attempt once the attempts are spent or the policy
/// declined to retry it; [`Outcome::Panicked`] with the message once the
/// last attempt panicked; or why the task stopped before (cancelled,
/// replaced, shut down, expired).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{ManualClock, Outcome, Retry, TimerPool};
///
/// let clock = ManualClock::new();
/// let pool = TimerPool::<&str>::builder().workers(1).clock(clock.clone()).build()?;
/// let mut calls = 0;
/// let h = pool.schedule_retrying("flaky", Duration::ZERO, Retry::fixed(3, Duration::from_secs(1)), move || {
///     calls += 1;
///     if calls < 2 { Err(format!("try {calls} failed")) } else { Ok(calls) }
/// })?;
/// pool.advance(Duration::from_secs(5))?;
/// let done = h.wait();
/// assert_eq!(done.outcome, Outcome::Completed(Ok(2)));
/// assert_eq!((done.attempts, done.last_panic), (2, None));
/// # Ok::<(), timerpool::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retried<T> {
    /// [`Outcome::Completed`] with what the last attempt returned (`Ok`,
    /// or an `Err` not retried); [`Outcome::Panicked`] with the last
    /// message once the last attempt panicked; or why it stopped before
    /// (cancelled, replaced, shut down, expired).
    pub outcome: Outcome<T>,
    /// Attempts that ran.
    pub attempts: u32,
    /// The message of the latest attempt that panicked, if any did.
    pub last_panic: Option<String>,
}

/// The handle of a retried task ([`TimerPool::schedule_retrying`]); `T` is
/// what the task's closure returns, a `Result`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{ManualClock, Outcome, Retry, TimerPool};
/// let clock = ManualClock::new();
/// let pool = TimerPool::<&str>::builder().workers(1).clock(clock.clone()).build()?;
/// let h = pool.schedule_retrying("sync", Duration::ZERO, Retry::fixed(5, Duration::from_secs(60)), || -> Result<(), _> {
///     Err("remote down")
/// })?;
/// pool.settle(Duration::from_secs(10))?;
/// assert_eq!((h.attempts(), h.is_finished(), h.key()), (1, false, Some(&"sync")));
/// assert!(h.cancel()); // stop retrying
/// let done = h.wait();
/// assert_eq!((done.outcome, done.attempts), (Outcome::Cancelled, 1));
/// # Ok::<(), timerpool::Error>(())
/// ```
pub struct RetryHandle<T, K> {
    /// The periodic task the retries run as.
    inner: PeriodicHandle<K>,
    /// What its attempts left.
    attempts: Arc<Mutex<Attempts<T>>>,
}

impl<T, K> fmt::Debug for RetryHandle<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryHandle")
            .field("attempts", &self.attempts.lock().made)
            .finish_non_exhaustive()
    }
}

impl<T, K: Hash + Eq + Clone + Send + 'static> RetryHandle<T, K> {
    /// Stop the task: true iff it was still live (pending, or an attempt
    /// running, after which no other follows); the outcome is then
    /// [`Outcome::Cancelled`].
    #[doc(alias = "abort")]
    pub fn cancel(&self) -> bool {
        self.inner.cancel()
    }

    /// The key; `None` for a keyless task.
    pub fn key(&self) -> Option<&K> {
        self.inner.key()
    }

    /// Attempts that ran so far.
    pub fn attempts(&self) -> u32 {
        self.attempts.lock().made
    }

    /// True once the task has stopped.
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }

    /// Block until the task stops; its result.
    pub fn wait(self) -> Retried<T> {
        let RetryHandle { inner, attempts } = self;
        result(inner.wait(), &attempts)
    }

    /// Wait at most `timeout` for the task to stop.
    ///
    /// # Errors
    ///
    /// The handle itself, when the task is still live after `timeout`.
    pub fn wait_timeout(self, timeout: Duration) -> Result<Retried<T>, Self> {
        let RetryHandle { inner, attempts } = self;
        match inner.wait_timeout(timeout) {
            Ok(outcome) => Ok(result(outcome, &attempts)),
            Err(inner) => Err(RetryHandle { inner, attempts }),
        }
    }
}

/// A retry handle is a future of the task's [`Retried`] result, as
/// [`RetryHandle::wait`], in any executor; dropping it does not cancel the
/// task.
///
/// # Panics
///
/// Polled again after it returned the result.
impl<T, K> Future for RetryHandle<T, K> {
    type Output = Retried<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Retried<T>> {
        let outcome = self.inner.poll_outcome(cx);
        outcome.map(|outcome| result(outcome, &self.attempts))
    }
}

/// The result of a retried task whose periodic task ended with `outcome`.
fn result<T>(outcome: Outcome<()>, attempts: &Mutex<Attempts<T>>) -> Retried<T> {
    let mut a = attempts.lock();
    let outcome = match outcome {
        Outcome::Completed(()) => match a.value.take() {
            Some(v) => Outcome::Completed(v),
            // Stopped after its last attempt panicked.
            None => Outcome::Panicked(a.last_panic.clone().unwrap_or_default()),
        },
        Outcome::Panicked(m) => Outcome::Panicked(m),
        Outcome::Cancelled => Outcome::Cancelled,
        Outcome::Replaced => Outcome::Replaced,
        Outcome::Shutdown => Outcome::Shutdown,
        Outcome::Expired => Outcome::Expired,
    };
    Retried {
        outcome,
        attempts: a.made,
        last_panic: a.last_panic.clone(),
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> TimerPool<K> {
    /// Run `f` at `when` under `key`; while an attempt returns an `Err`
    /// that `retry` retries (every error for a [`Retry`], those its
    /// predicate picks for a [`RetryIf`]) or panics, run it again after the
    /// backoff `retry` says, until an attempt returns `Ok`, returns an
    /// error not worth retrying, or `retry`'s attempts are spent.
    ///
    /// The handle's [`Retried`] carries the outcome
    /// (`Completed(Ok(value))`, `Completed(Err(error))` with the typed
    /// error of the last attempt, `Panicked` if the last attempt panicked,
    /// or why it stopped before), the attempts made and the last panic's
    /// message. An `Err` is a value, not a panic: nothing is printed for
    /// it. A panicking attempt still goes through the process's panic hook
    /// unless the pool has [`quiet_panics`](crate::Builder::quiet_panics);
    /// a predicate that panics ends the task as [`Outcome::Panicked`].
    ///
    /// Between attempts the task is pending under `key`: a schedule of the
    /// key replaces it, [`cancel`](Self::cancel) stops it and
    /// [`reschedule`](Self::reschedule) moves its next attempt, as for any
    /// task. A retried task is a dynamic periodic task underneath: it
    /// counts as one in [`stats`](Self::stats) (each attempt a periodic
    /// run; an attempt's panic is caught by the retry, so it shows in
    /// [`Retried`] and the periodic panic counters stay at zero). After a
    /// run skipped as stale
    /// ([`expire_after`](crate::Builder::expire_after)) it tries again
    /// after the first backoff. A shutdown stops it between attempts
    /// ([`Outcome::Shutdown`]) unless the pool was built with
    /// [`Builder::drain_follow_ups`](crate::Builder::drain_follow_ups).
    ///
    /// A closure that cannot fail but may panic returns
    /// `Ok::<_, std::convert::Infallible>(value)`.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Self::schedule), and [`Error::InvalidRetry`] for
    /// zero attempts or a jitter outside `0..=1`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{ManualClock, Outcome, Retry, TimerPool};
    ///
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<&str>::builder().workers(1).clock(clock.clone()).build()?;
    /// let policy = Retry::exponential(3, Duration::from_secs(1), Duration::from_secs(60));
    /// let h = pool.schedule_retrying("upload", Duration::ZERO, policy, || -> Result<(), u16> {
    ///     Err(503)
    /// })?;
    /// // Attempts at 0 s, 1 s and 3 s.
    /// pool.advance(Duration::from_secs(10))?;
    /// let done = h.wait();
    /// assert_eq!((done.outcome, done.attempts), (Outcome::Completed(Err(503)), 3));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn schedule_retrying<F, T, E>(
        &self,
        key: K,
        when: impl Into<Due>,
        retry: impl RetryPolicy<E>,
        f: F,
    ) -> Result<RetryHandle<Result<T, E>, K>, Error>
    where
        F: FnMut() -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        self.add_retrying(TaskKey::Keyed(key), when.into(), retry, f)
    }

    /// Keyless [`schedule_retrying`](Self::schedule_retrying).
    ///
    /// # Errors
    ///
    /// As [`schedule_retrying`](Self::schedule_retrying).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, Retry, TimerPool};
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let h = pool.submit_retrying(Duration::ZERO, Retry::fixed(3, Duration::from_millis(1)), || {
    ///     Ok::<_, std::io::Error>("first try")
    /// })?;
    /// let done = h.wait_timeout(Duration::from_secs(10)).unwrap();
    /// assert_eq!((done.outcome.completed().unwrap().unwrap(), done.attempts), ("first try", 1));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn submit_retrying<F, T, E>(
        &self,
        when: impl Into<Due>,
        retry: impl RetryPolicy<E>,
        f: F,
    ) -> Result<RetryHandle<Result<T, E>, K>, Error>
    where
        F: FnMut() -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        self.add_retrying(self.shared.anon_key(), when.into(), retry, f)
    }

    /// A retried task, as a dynamic periodic task.
    fn add_retrying<F, T, E>(
        &self,
        key: TaskKey<K>,
        when: Due,
        policy: impl RetryPolicy<E>,
        f: F,
    ) -> Result<RetryHandle<Result<T, E>, K>, Error>
    where
        F: FnMut() -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let retry = match policy.backoff_policy().checked() {
            Ok(r) => r,
            Err(e) => {
                self.shared.counters.refused(1);
                drop_quietly((f, policy));
                return Err(e);
            }
        };
        let attempts = Arc::new(Mutex::new(Attempts {
            made: 0,
            last_panic: None,
            value: None,
        }));
        let seed = retry
            .seed
            .unwrap_or_else(|| std::collections::hash_map::RandomState::new().hash_one(0u8));
        let job = attempt(f, policy, retry, SplitMix(seed), attempts.clone());
        // Runs after a stale skip as a fixed delay of the first backoff.
        let repeat = Repeat::fixed_delay(retry.first.max(Duration::from_nanos(1)));
        let inner = self.add_periodic(key, when, repeat, job, true)?;
        Ok(RetryHandle { inner, attempts })
    }
}

/// The closure the periodic task runs: one attempt of `f`, its panic
/// caught and recorded, an error put to `policy`, and the pick of what
/// follows.
fn attempt<F, T, E>(
    mut f: F,
    mut policy: impl RetryPolicy<E>,
    retry: Retry,
    mut rng: SplitMix,
    attempts: Arc<Mutex<Attempts<Result<T, E>>>>,
) -> impl FnMut() -> Next + Send + 'static
where
    F: FnMut() -> Result<T, E> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    move || {
        let result = catch_unwind(AssertUnwindSafe(&mut f));
        let made = {
            let mut a = attempts.lock();
            a.made += 1;
            a.made
        };
        let more = made < retry.attempts;
        match result {
            Ok(Err(e)) if more && policy.retries(&e) => {
                drop(e);
                Next::After(retry.delay(made, &mut rng))
            }
            Ok(returned) => {
                attempts.lock().value = Some(returned);
                Next::Stop
            }
            Err(payload) => {
                let msg = panic_message(payload);
                attempts.lock().last_panic = Some(msg);
                match more {
                    true => Next::After(retry.delay(made, &mut rng)),
                    false => Next::Stop,
                }
            }
        }
    }
}
