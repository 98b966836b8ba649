//! Shutting down, as the caller sees it (protocol step 8): graceful and
//! immediate, bounded, and the queries about it.

use super::shared;
use super::TimerPool;
use std::hash::Hash;
use std::time::{Duration, Instant};

impl<K: Hash + Eq + Clone + Send + 'static> TimerPool<K> {
    /// Stop taking new tasks, let every pending one-shot task run at its due
    /// time (periodic tasks stop, outcome [`Outcome::Shutdown`](crate::Outcome::Shutdown)), then join
    /// the workers.
    ///
    /// Called from inside one of the pool's tasks, it starts the shutdown but
    /// does not wait (a worker cannot join itself).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Error, Outcome, Repeat, TimerPool};
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let once = pool.schedule(1, Duration::from_millis(5), || "ran")?;
    /// let tick = pool.schedule_repeating(2, Duration::from_secs(1), Repeat::fixed_rate(Duration::from_secs(1)), || {})?;
    /// pool.shutdown(); // waits for the one-shot task's due time
    /// assert_eq!(once.wait(), Outcome::Completed("ran"));
    /// assert_eq!(tick.wait(), Outcome::Shutdown);
    /// assert_eq!(pool.schedule(3, Duration::ZERO, || "late").unwrap_err(), Error::ShutDown);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn shutdown(&self) {
        {
            let _sending = self.shared.sending();
            self.shared.begin_drain();
        }
        self.crew.join();
    }

    /// Stop taking new tasks, remove every pending task unrun (outcome
    /// [`Outcome::Shutdown`](crate::Outcome::Shutdown); due tasks no worker has started are pending
    /// too), let running tasks finish, join the workers, and return the keys
    /// of the removed keyed tasks in due order.
    ///
    /// Called from inside one of the pool's tasks, it does not wait for the
    /// workers. Dropping the pool does the same.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let h = pool.schedule("b", Duration::from_secs(20), || ())?;
    /// pool.schedule("a", Duration::from_secs(10), || ())?;
    /// assert_eq!(pool.shutdown_now(), vec!["a", "b"]); // in due order
    /// assert_eq!(h.wait(), Outcome::Shutdown);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "shutdownNow")]
    pub fn shutdown_now(&self) -> Vec<K> {
        let keys = {
            let _sending = self.shared.sending();
            self.shared.stop_now()
        };
        self.crew.join();
        keys
    }

    /// Begin a graceful shutdown and return at once (Java's `shutdown()`):
    /// new work is refused with [`Error::ShutDown`](crate::Error::ShutDown) (a running task's
    /// follow-up too, unless the pool was built with
    /// [`Builder::drain_follow_ups`](crate::Builder::drain_follow_ups)), pending one-shot tasks still run at
    /// their due time, periodic tasks stop. Wait for the end with
    /// [`await_termination`](Self::await_termination).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// let h = pool.schedule(1, Duration::from_millis(10), || "done")?;
    /// pool.begin_shutdown(); // returns at once
    /// assert!(pool.is_shutdown() && !pool.is_terminated());
    /// assert!(pool.await_termination(Duration::from_secs(10)));
    /// assert_eq!(h.wait(), Outcome::Completed("done"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn begin_shutdown(&self) {
        let _sending = self.shared.sending();
        self.shared.begin_drain();
    }

    /// Wait at most `timeout` for every worker to exit after a shutdown
    /// (Java's `awaitTermination`); true when they have (and then they are
    /// joined). Called from inside one of the pool's tasks it does not
    /// wait.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(2).build()?;
    /// assert!(!pool.await_termination(Duration::from_millis(1)), "not shut down");
    /// pool.begin_shutdown();
    /// assert!(pool.await_termination(Duration::from_secs(10)));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "awaitTermination")]
    pub fn await_termination(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        self.crew.await_exit(&self.shared, deadline)
    }

    /// True once every worker has exited.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// assert!(!pool.is_terminated());
    /// pool.shutdown();
    /// assert!(pool.is_terminated());
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "isTerminated")]
    pub fn is_terminated(&self) -> bool {
        *self.shared.live.lock() == 0
    }

    /// A graceful shutdown with a deadline: like [`shutdown`](Self::shutdown)
    /// until `timeout` has passed, then like
    /// [`shutdown_now`](Self::shutdown_now) for what is still pending, whose
    /// keys it returns (empty if everything ran in time). It does not wait
    /// for tasks still running at the deadline (they are never
    /// interrupted): [`await_termination`](Self::await_termination) does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let lease = pool.schedule("lease", Duration::from_secs(1800), || ())?;
    /// assert_eq!(pool.shutdown_timeout(Duration::from_millis(10)), vec!["lease"]);
    /// assert_eq!(lease.wait(), Outcome::Shutdown);
    /// assert!(pool.await_termination(Duration::from_secs(10)));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn shutdown_timeout(&self, timeout: Duration) -> Vec<K> {
        {
            let _sending = self.shared.sending();
            self.shared.begin_drain();
        }
        if self.await_termination(timeout) {
            return Vec::new();
        }
        let _sending = self.shared.sending();
        self.shared.stop_now()
    }

    /// True once `shutdown` or `shutdown_now` has been called.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// assert!(!pool.is_shutdown());
    /// pool.begin_shutdown();
    /// assert!(pool.is_shutdown());
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    #[doc(alias = "isShutdown")]
    pub fn is_shutdown(&self) -> bool {
        self.shared.state.lock().mode != shared::Mode::Running
    }
}
