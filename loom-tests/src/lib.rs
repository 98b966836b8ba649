//! Helpers shared by the loom models in `tests/`: see `docs/loom.md` for what
//! each model checks and `run.sh` for how to run them.
//!
//! Everything here exists only under `--cfg loom`; a normal build of this
//! crate is empty.

#[cfg(loom)]
pub use imp::*;

#[cfg(loom)]
mod imp {
    use std::panic::{self, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};
    use timerpool::{Builder, ManualClock, TimerPool};

    /// The preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set, so
    /// that no run is ever unbounded by accident.
    pub const DEFAULT_PREEMPTIONS: &str = "3";

    /// How far the models' "later" tasks lie: the frozen manual clock never
    /// gets there unless a model thread advances it.
    pub const LATER: Duration = Duration::from_secs(10);

    /// Explore every interleaving of `f` (up to the preemption bound) with
    /// loom, and report on stderr how many executions that took.
    ///
    /// # Panics
    ///
    /// When any execution panics (an assertion of the model) or deadlocks
    /// (loom's `deadlock; threads = [...]`).
    pub fn model<F>(name: &str, f: F)
    where
        F: Fn() + Sync + Send + 'static,
    {
        if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
            std::env::set_var("LOOM_MAX_PREEMPTIONS", DEFAULT_PREEMPTIONS);
        }
        // Name the line each thread is blocked on in loom's deadlock report,
        // so a broken variant's test can check which wait never ended.
        std::env::set_var("LOOM_LOCATION", "1");
        let bound = std::env::var("LOOM_MAX_PREEMPTIONS").unwrap_or_default();
        static EXECUTIONS: AtomicUsize = AtomicUsize::new(0);
        EXECUTIONS.store(0, Ordering::Relaxed);
        let start = Instant::now();
        let explored = panic::catch_unwind(AssertUnwindSafe(|| {
            loom::model(move || {
                EXECUTIONS.fetch_add(1, Ordering::Relaxed);
                f();
            })
        }));
        if let Err(payload) = explored {
            eprintln!(
                "model {name}: failed in execution {} after {:.2?} (preemption bound {bound})",
                EXECUTIONS.load(Ordering::Relaxed),
                start.elapsed(),
            );
            let deadlock = match payload.downcast_ref::<String>() {
                Some(msg) if msg.starts_with("deadlock") => Some(describe_deadlock(msg)),
                _ => None,
            };
            match deadlock {
                Some(report) => panic!("model {name}: {report}"),
                None => panic::resume_unwind(payload),
            }
        }
        eprintln!(
            "model {name}: {} executions in {:.2?} (preemption bound {bound})",
            EXECUTIONS.load(Ordering::Relaxed),
            start.elapsed(),
        );
    }

    /// A pool of `workers` on `clock`, with the protocol broken as `fault`
    /// names (`None`: the real protocol).
    pub fn pool<K>(workers: usize, clock: &ManualClock, fault: Option<&str>) -> TimerPool<K>
    where
        K: std::hash::Hash + Eq + Clone + Send + 'static,
    {
        pool_with(workers, clock, fault, |builder| builder)
    }

    /// [`pool`], with `configure` applied to the builder first (e.g.
    /// `|b| b.exclusive_keys(true)`).
    pub fn pool_with<K>(
        workers: usize,
        clock: &ManualClock,
        fault: Option<&str>,
        configure: impl FnOnce(Builder<K>) -> Builder<K>,
    ) -> TimerPool<K>
    where
        K: std::hash::Hash + Eq + Clone + Send + 'static,
    {
        let mut builder = configure(TimerPool::builder().workers(workers).clock(clock.clone()));
        if let Some(name) = fault {
            builder = builder.fault(name);
        }
        builder.build().expect("the pool starts")
    }

    /// How a model's main thread stops the pool.
    #[derive(Clone, Copy, Debug)]
    pub enum Stop {
        /// `shutdown()`: pending work still runs.
        Graceful,
        /// `shutdown_now()`: pending work is removed unrun.
        Now,
    }

    impl Stop {
        /// Stop `pool` this way. `shutdown_now` here must find nothing
        /// pending: the models' tasks are due at once.
        pub fn apply<K>(self, pool: &TimerPool<K>)
        where
            K: std::hash::Hash + Eq + Clone + Send + 'static,
        {
            match self {
                Stop::Graceful => pool.shutdown(),
                Stop::Now => assert!(pool.shutdown_now().is_empty()),
            }
        }
    }

    /// A count that model threads bump and the main thread can block on (a
    /// loom mutex and condvar, so a wait that never ends is a loom
    /// deadlock), e.g. the runs of a periodic task.
    #[derive(Default)]
    pub struct Count {
        /// The count.
        n: loom::sync::Mutex<usize>,
        /// Notified on every bump.
        bumped: loom::sync::Condvar,
    }

    impl Count {
        /// A count at zero.
        pub fn new() -> Self {
            Count::default()
        }

        /// Add one; the new value.
        pub fn bump(&self) -> usize {
            let mut n = self.n.lock().unwrap();
            *n += 1;
            self.bumped.notify_all();
            *n
        }

        /// The current value.
        pub fn get(&self) -> usize {
            *self.n.lock().unwrap()
        }

        /// Block until the count reaches `at_least`.
        #[track_caller]
        pub fn wait_for(&self, at_least: usize) {
            let mut n = self.n.lock().unwrap();
            while *n < at_least {
                n = self.bumped.wait(n).unwrap();
            }
        }
    }

    /// loom's `deadlock; threads = [(Id(0), Blocked(Location(Some(Location {
    /// file: "src/pool/outcome.rs", line: 161, .. })))), ..]` as
    /// `deadlock: thread 0 (main) in src/pool/outcome.rs, .. (blocked at
    /// lines 161, ..)`: the files first, so a test can expect which wait each
    /// thread was stuck in without naming line numbers.
    pub fn describe_deadlock(msg: &str) -> String {
        let mut threads = Vec::new();
        let mut lines = Vec::new();
        for part in msg.split("(Id(").skip(1) {
            let id = part.split(')').next().unwrap_or("?");
            let who = if id == "0" {
                "thread 0 (main)".to_string()
            } else {
                format!("thread {id}")
            };
            match (field(part, "file: \""), field(part, "line: ")) {
                (Some(file), Some(line)) => {
                    threads.push(format!("{who} in {file}"));
                    lines.push(line);
                }
                _ => {
                    let state = part
                        .trim_start_matches(|c: char| !c.is_alphabetic())
                        .split(|c: char| !c.is_alphanumeric())
                        .next()
                        .unwrap_or("?")
                        .to_lowercase();
                    threads.push(format!("{who} {state}"));
                }
            }
        }
        format!(
            "deadlock: {} (blocked at lines {})",
            threads.join(", "),
            lines.join(", ")
        )
    }

    /// The text after `tag` in `s`, up to the next `"` or `,`.
    fn field<'a>(s: &'a str, tag: &str) -> Option<&'a str> {
        let rest = &s[s.find(tag)? + tag.len()..];
        rest.split(['"', ',']).next()
    }
}
