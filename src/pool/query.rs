//! Questions about keys: which are running, and (with `cancel.rs`) what a
//! cancel found.
//!
//! # Ground rules
//!
//! - The running keys are `State::running`, one slot per worker, kept by
//!   the workers' own critical sections (`worker.rs`); a query reads them
//!   under the state lock and clones nothing but what it returns.

use super::TimerPool;
use std::hash::Hash;

impl<K: Hash + Eq + Clone + Send + 'static> TimerPool<K> {
    /// The keys of the keyed tasks running now (periodic runs included),
    /// each cloned under the pool's lock, in no particular order. A key
    /// counts as running from the moment its worker starts the task until
    /// the worker's next step after the run (it may still be listed for an
    /// instant after the task's outcome was delivered); after
    /// [`settle`](Self::settle) returns, none is.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).build()?;
    /// let (tell, started) = mpsc::channel();
    /// let (release, wait) = mpsc::channel::<()>();
    /// pool.schedule("export", Duration::ZERO, move || {
    ///     tell.send(()).unwrap();
    ///     let _ = wait.recv();
    /// })?;
    /// started.recv().unwrap();
    /// assert_eq!(pool.running_keys(), vec!["export"]);
    /// assert!(pool.is_running(&"export"));
    /// drop(release);
    /// pool.settle(Duration::from_secs(10))?;
    /// assert!(!pool.is_running(&"export"));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn running_keys(&self) -> Vec<K> {
        self.shared.running_keys()
    }

    /// True while a task under `key` runs (as
    /// [`running_keys`](Self::running_keys) counts it). Reads one slot per
    /// worker under the lock; clones nothing. A key may be running and
    /// pending at once (its next task waits, or a periodic task's run).
    pub fn is_running(&self, key: &K) -> bool {
        let st = self.shared.state.lock();
        st.running.iter().flatten().any(|k| k.keyed() == Some(key))
    }
}
