//! Configuration of a [`TimerPool`](super::TimerPool): the builder and the
//! validated [`Config`] the engine keeps.

use super::completion::Observe;
#[cfg(loom)]
use super::fault::Fault;
use super::fault::Faults;
use super::time::nanos;
use super::wake::{Precision, MAX_WINDOW};
use crate::clock::{Clock, SystemClock};
use crate::heap::{check_capacity, MAX_LEN};
use crate::sync::Arc;
use crate::Error;
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::time::Duration;

/// The most worker threads a pool accepts.
pub const MAX_WORKERS: usize = 1024;

/// Builds a [`TimerPool`](crate::TimerPool); made by
/// [`TimerPool::builder`](crate::TimerPool::builder).
///
/// # Examples
///
/// ```
/// use timerpool::TimerPool;
/// let pool = TimerPool::<u64>::builder()
///     .workers(2)
///     .capacity(10_000)
///     .thread_name("offers")
///     .build()
///     .unwrap();
/// pool.shutdown();
/// ```
pub struct Builder<K> {
    /// Worker threads; `None` means `num_cpus::get()`.
    workers: Option<usize>,
    /// Staleness tolerance, checked when the pool is built.
    expire_after: Option<Duration>,
    /// Everything else, as the pool will keep it.
    config: Config,
    /// How errors name keys, if they do ([`debug_keys`](Self::debug_keys)).
    key_names: Option<fn(&K) -> String>,
    /// The completion channel and listener asked for (`completion/send.rs`),
    /// and the tracing key format (`trace.rs`).
    observe: Observe<K>,
    /// The key type.
    _key: PhantomData<fn(K)>,
}

/// A function run on each worker thread as it starts or stops.
#[derive(Clone)]
pub(crate) struct Hook(pub(crate) Arc<dyn Fn() + Send + Sync>);

impl fmt::Debug for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hook")
    }
}

/// A pool's configuration, as its engine keeps it.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Worker threads.
    pub(crate) workers: usize,
    /// Most pending tasks.
    pub(crate) capacity: usize,
    /// Prefix of worker thread names.
    pub(crate) thread_name: String,
    /// The pool's time source.
    pub(crate) clock: Arc<dyn Clock>,
    /// Keep a key's tasks from running at the same time.
    pub(crate) exclusive_keys: bool,
    /// Staleness tolerance in nanoseconds.
    pub(crate) expire_after: Option<i64>,
    /// How closely the pool watches the clock (`wake.rs`).
    pub(crate) precision: Precision,
    /// Whether panics on the workers bypass the process's panic hook.
    pub(crate) quiet_panics: bool,
    /// Whether a graceful shutdown lets running work add its follow-ups.
    pub(crate) drain_follow_ups: bool,
    /// Run on each worker thread as it starts.
    pub(crate) on_start: Option<Hook>,
    /// Run on each worker thread as it stops.
    pub(crate) on_stop: Option<Hook>,
    /// Stack size of the worker threads, if not the platform's default.
    pub(crate) stack_size: Option<usize>,
    /// The protocol step the loom models asked to break, if any.
    pub(crate) faults: Faults,
}

impl<K> fmt::Debug for Builder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("expire_after", &self.expire_after)
            .field("config", &self.config)
            .field("observe", &self.observe)
            .finish()
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> Builder<K> {
    pub(crate) fn new() -> Self {
        Builder {
            workers: None,
            expire_after: None,
            config: Config {
                workers: 0,
                capacity: MAX_LEN,
                thread_name: "timerpool".to_string(),
                clock: Arc::new(SystemClock),
                exclusive_keys: false,
                expire_after: None,
                precision: Precision::Frugal,
                quiet_panics: false,
                drain_follow_ups: false,
                on_start: None,
                on_stop: None,
                stack_size: None,
                faults: Faults::default(),
            },
            key_names: None,
            observe: Observe::default(),
            _key: PhantomData,
        }
    }

    /// Number of worker threads. Default: `num_cpus::get()`. Zero or more
    /// than [`MAX_WORKERS`] makes [`build`](Self::build) fail.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::{Error, TimerPool};
    /// let pool = TimerPool::<u64>::builder().workers(4).build()?;
    /// assert_eq!(pool.workers(), 4);
    /// assert_eq!(TimerPool::<u64>::builder().workers(0).build().unwrap_err(), Error::ZeroWorkers);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = Some(n);
        self
    }

    /// Most tasks pending at once (keyed and keyless together); a new task
    /// beyond it is refused with [`Error::CapacityReached`]. Default:
    /// `u32::MAX`, the most the index can address.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Error, TimerPool};
    /// let pool = TimerPool::<u64>::builder().workers(1).capacity(1).build()?;
    /// pool.schedule(1, Duration::from_secs(60), || ())?;
    /// let full = pool.schedule(2, Duration::from_secs(60), || ());
    /// assert_eq!(full.unwrap_err(), Error::CapacityReached { capacity: 1 });
    /// pool.schedule(1, Duration::from_secs(90), || ())?; // a replace is allowed
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn capacity(mut self, n: usize) -> Self {
        self.config.capacity = n;
        self
    }

    /// Prefix of the worker threads' names (`{prefix}-{i}`). Default:
    /// `"timerpool"`. A NUL byte in it makes
    /// [`build`](Self::build) fail.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(1).thread_name("offers").build()?;
    /// let name = pool.submit(Duration::ZERO, || std::thread::current().name().map(String::from))?;
    /// assert_eq!(name.wait().completed().flatten().as_deref(), Some("offers-0"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn thread_name(mut self, prefix: impl Into<String>) -> Self {
        self.config.thread_name = prefix.into();
        self
    }

    /// The pool's clock. Default: [`SystemClock`]. Pass a
    /// [`ManualClock`](crate::ManualClock) to drive time by hand in tests.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{ManualClock, TimerPool};
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<u64>::builder().workers(1).clock(clock.clone()).build()?;
    /// let h = pool.schedule(1, Duration::from_secs(3600), || "an hour later")?;
    /// clock.advance(Duration::from_secs(3600)); // no waiting
    /// assert_eq!(h.wait().completed(), Some("an hour later"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.config.clock = Arc::new(clock);
        self
    }

    /// Never start a keyed task while a task under the same key is still
    /// running: a replacement that falls due meanwhile waits (pending,
    /// cancellable, replaceable) until the running one returns, without
    /// holding up any worker. For callbacks that are not safe to run twice at
    /// once. Default: `false` (a key's next task may start while the previous
    /// one runs).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<&str>::builder().workers(2).exclusive_keys(true).build()?;
    /// let (started, release) = (mpsc::channel(), mpsc::channel::<()>());
    /// let (tell, wait) = (started.0, release.1);
    /// let first = pool.schedule("account-9", Duration::ZERO, move || {
    ///     tell.send(()).unwrap();
    ///     let _ = wait.recv();
    /// })?;
    /// started.1.recv().unwrap();
    /// // Due now, a worker is free, but its key is busy: it waits, pending.
    /// let second = pool.schedule("account-9", Duration::ZERO, || "after the first")?;
    /// assert!(pool.is_pending(&"account-9") && !second.is_finished());
    /// drop(release.0);
    /// assert_eq!(first.wait(), Outcome::Completed(()));
    /// assert_eq!(second.wait(), Outcome::Completed("after the first"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn exclusive_keys(mut self, on: bool) -> Self {
        self.config.exclusive_keys = on;
        self
    }

    /// Skip any run that could only start later than its due time plus
    /// `tolerance`: a one-shot task gets [`Outcome::Expired`](crate::Outcome::Expired)
    /// and never runs; a periodic task skips that run (counted in
    /// [`PeriodicHandle::missed`](crate::PeriodicHandle::missed)) and stays
    /// scheduled. Default: no tolerance, every task runs however late. A
    /// tolerance of zero makes [`build`](Self::build) fail
    /// ([`Error::ZeroExpiry`]): it would expire almost every task; so does
    /// one shorter than a [`Precision::Slack`] ([`Error::WindowTooLong`]),
    /// which lets tasks start up to the slack late by design. Keep the
    /// tolerance above the slack by the machine's wake-up latency.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Error, TimerPool};
    ///
    /// // Offers older than half a second are worthless: skip them.
    /// let pool = TimerPool::<u64>::builder()
    ///     .expire_after(Duration::from_millis(500))
    ///     .build()?;
    /// # drop(pool);
    /// let zero = TimerPool::<u64>::builder().expire_after(Duration::ZERO).build();
    /// assert_eq!(zero.unwrap_err(), Error::ZeroExpiry);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn expire_after(mut self, tolerance: Duration) -> Self {
        self.expire_after = Some(tolerance);
        self
    }

    /// How closely the pool watches the clock: [`Precision::Frugal`] (the
    /// default) sleeps in timed waits and starts tasks about as late as
    /// the operating system's timed waits end, at little CPU;
    /// [`Precision::Spin`] spins a window before each due time to start
    /// tasks within microseconds of it, at up to one busy core while a due
    /// time is that close; [`Precision::Slack`] lets tasks start up to a
    /// slack late and wakes once per slack for all of them. Tasks never
    /// start before their due time in any mode, and an idle pool uses no
    /// CPU. A spin window or slack over [`MAX_WINDOW`] makes
    /// [`build`](Self::build) fail.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Precision, TimerPool};
    /// let pool = TimerPool::<u64>::builder()
    ///     .precision(Precision::Spin(Duration::from_micros(250)))
    ///     .build()?;
    /// # drop(pool);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "spin_before_due")]
    pub fn precision(mut self, precision: Precision) -> Self {
        self.config.precision = precision;
        self
    }

    /// Keep panics on the pool's workers (a task's, or a key's contained
    /// panic) from reaching the process's panic hook, so they do not print:
    /// the pool already reports each as an outcome ([`Outcome::Panicked`]
    /// with its message) and counts it. Default: `false`, and then every
    /// caught panic still goes through the hook, which by default prints
    /// its message, and with `RUST_BACKTRACE=1` a backtrace, to stderr.
    ///
    /// The first pool built with it chains a hook in front of the one
    /// installed at that moment; the new hook calls the old one for every
    /// thread that is not a quiet pool's worker. A program that sets its
    /// own hook should do so before it builds such a pool (a later
    /// `std::panic::set_hook` replaces the chain).
    ///
    /// [`Outcome::Panicked`]: crate::Outcome::Panicked
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).quiet_panics(true).build()?;
    /// let h = pool.submit(Duration::ZERO, || panic!("flaky job"))?;
    /// assert_eq!(h.wait(), Outcome::Panicked("flaky job".to_string()));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn quiet_panics(mut self, on: bool) -> Self {
        self.config.quiet_panics = on;
        self
    }

    /// Let in-flight work finish its own follow-ups during a graceful
    /// shutdown ([`shutdown`](crate::TimerPool::shutdown),
    /// [`begin_shutdown`](crate::TimerPool::begin_shutdown),
    /// [`shutdown_timeout`](crate::TimerPool::shutdown_timeout) before its
    /// deadline): a scheduling call made on one of the pool's worker
    /// threads (by a running task: a retry, the next step of a job) is
    /// admitted and runs at its time, and tasks of
    /// [`schedule_retrying`](crate::TimerPool::schedule_retrying) keep
    /// retrying; the workers exit once nothing is pending and nothing runs.
    /// Calls from any other thread are still refused with
    /// [`Error::ShutDown`], and `shutdown_now` (or a drop, or
    /// `shutdown_timeout`'s deadline) still removes everything pending.
    /// Work that keeps adding follow-ups keeps a plain `shutdown` waiting:
    /// bound it with `shutdown_timeout`. Default: `false` (during any
    /// shutdown every new task is refused, a running task's follow-up too,
    /// and pending retries stop with [`Outcome::Shutdown`](crate::Outcome::Shutdown)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    ///
    /// let pool = Arc::new(TimerPool::<u32>::builder().workers(1).drain_follow_ups(true).build()?);
    /// let steps = Arc::new(Mutex::new(Vec::new()));
    /// let (p, s) = (Arc::downgrade(&pool), steps.clone());
    /// pool.schedule(1, Duration::from_millis(5), move || {
    ///     s.lock().unwrap().push("step one");
    ///     let s = s.clone();
    ///     // Scheduled while the pool drains: admitted, it is a follow-up.
    ///     let next = p.upgrade().unwrap().schedule(2, Duration::ZERO, move || {
    ///         s.lock().unwrap().push("step two");
    ///     });
    ///     assert!(next.is_ok());
    /// })?;
    /// pool.shutdown();
    /// assert_eq!(*steps.lock().unwrap(), ["step one", "step two"]);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn drain_follow_ups(mut self, on: bool) -> Self {
        self.config.drain_follow_ups = on;
        self
    }

    /// Run `hook` on each worker thread as it starts, before it serves
    /// anything: tracing context, CPU affinity, metrics registration. If it
    /// panics on any worker, [`build`](Self::build) stops the workers
    /// already started and fails with [`Error::ThreadStart`]. Default: none.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use timerpool::TimerPool;
    ///
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let s = started.clone();
    /// let pool = TimerPool::<u64>::builder()
    ///     .workers(3)
    ///     .on_thread_start(move || {
    ///         s.fetch_add(1, Ordering::SeqCst);
    ///     })
    ///     .build()?;
    /// assert_eq!(started.load(Ordering::SeqCst), 3); // all ran before build returned
    /// # drop(pool);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn on_thread_start(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.config.on_start = Some(Hook(Arc::new(hook)));
        self
    }

    /// Run `hook` on each worker thread as it stops, after it served its
    /// last task. A panic in it is contained (counted in
    /// [`Stats::contained_panics`](crate::Stats::contained_panics)); the
    /// shutdown still completes. Default: none.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use timerpool::TimerPool;
    ///
    /// let stopped = Arc::new(AtomicUsize::new(0));
    /// let s = stopped.clone();
    /// let pool = TimerPool::<u64>::builder()
    ///     .workers(2)
    ///     .on_thread_stop(move || {
    ///         s.fetch_add(1, Ordering::SeqCst);
    ///     })
    ///     .build()?;
    /// pool.shutdown();
    /// assert_eq!(stopped.load(Ordering::SeqCst), 2);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn on_thread_stop(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.config.on_stop = Some(Hook(Arc::new(hook)));
        self
    }

    /// The stack size of the worker threads, in bytes. Default: the
    /// platform's (`std::thread`'s default, 2 MiB on most).
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(1).stack_size(256 * 1024).build()?;
    /// # drop(pool);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.config.stack_size = Some(bytes);
        self
    }

    /// Break one step of the protocol on purpose, so a loom model can show
    /// it catches that break. Exists only under `--cfg loom`; the names are
    /// listed in `docs/loom.md`.
    ///
    /// # Panics
    ///
    /// On an unknown name.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn fault(mut self, name: &str) -> Self {
        self.config.faults = Faults::with(Fault::named(name));
        self
    }

    /// How errors name keys: set by [`debug_keys`](Self::debug_keys).
    pub(crate) fn key_names(&self) -> Option<fn(&K) -> String> {
        self.key_names
    }

    /// What observes the pool, for `completion/send.rs` and `trace.rs`.
    pub(crate) fn observe_mut(&mut self) -> &mut Observe<K> {
        &mut self.observe
    }

    /// Take what observes the pool, checking the completion capacity.
    pub(crate) fn take_observe(&mut self) -> Result<Observe<K>, Error> {
        if self.observe.capacity == Some(0) {
            return Err(Error::ZeroCapacity);
        }
        Ok(std::mem::take(&mut self.observe))
    }

    /// Check the settings and resolve the defaults.
    pub(crate) fn validate(self) -> Result<Config, Error> {
        let workers = self.workers.unwrap_or_else(num_cpus::get);
        if workers == 0 {
            return Err(Error::ZeroWorkers);
        }
        if workers > MAX_WORKERS {
            return Err(Error::TooManyWorkers {
                requested: workers,
                max: MAX_WORKERS,
            });
        }
        let c = &self.config;
        check_capacity(c.capacity)?;
        if c.thread_name.contains('\0') {
            return Err(Error::InvalidThreadName);
        }
        // A slack may not outlast the staleness tolerance either: it would
        // expire the tasks it lets start late.
        let max = match (c.precision, self.expire_after) {
            (Precision::Slack(_), Some(tolerance)) => MAX_WINDOW.min(tolerance),
            _ => MAX_WINDOW,
        };
        let window = c.precision.span();
        if window > max {
            return Err(Error::WindowTooLong {
                requested: window,
                max,
            });
        }
        let expire_after = match self.expire_after {
            Some(Duration::ZERO) => return Err(Error::ZeroExpiry),
            Some(t) => Some(nanos(t).ok_or(Error::TimeOutOfRange)?),
            None => None,
        };
        Ok(Config {
            workers,
            expire_after,
            ..self.config
        })
    }
}

impl<K: fmt::Debug + Hash + Eq + Clone + Send + 'static> Builder<K> {
    /// Name keys by their `Debug` form: with it, [`Error::NotSettled`]
    /// lists the keys still running when
    /// [`settle`](crate::TimerPool::settle) gives up, and, with the
    /// `tracing` feature, spans and events carry each task's key (without
    /// it a keyed task shows as `<keyed>`: a key may be sensitive, or
    /// costly to format). Default: `false`
    /// (the error gives counts only; the key type need not be `Debug`, and
    /// [`TimerPool::running_keys`](crate::TimerPool::running_keys) still
    /// gives the keys themselves).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    /// use timerpool::{Error, TimerPool};
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).debug_keys(true).build()?;
    /// let (started, release) = (mpsc::channel(), mpsc::channel::<()>());
    /// let (tell, wait) = (started.0, release.1);
    /// pool.schedule("stuck-job", Duration::ZERO, move || {
    ///     tell.send(()).unwrap();
    ///     let _ = wait.recv();
    /// })?;
    /// started.1.recv().unwrap();
    /// let e = pool.settle(Duration::from_millis(20)).unwrap_err();
    /// assert!(matches!(e, Error::NotSettled { running_keys, .. } if running_keys == ["\"stuck-job\""]));
    /// drop(release.0);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn debug_keys(mut self, on: bool) -> Self {
        self.key_names = on.then_some(debug_name::<K> as fn(&K) -> String);
        #[cfg(feature = "tracing")]
        {
            self.observe_mut().key_format = on.then_some(<K as fmt::Debug>::fmt);
        }
        self
    }
}

/// A key's `Debug` form.
fn debug_name<K: fmt::Debug>(key: &K) -> String {
    format!("{key:?}")
}
