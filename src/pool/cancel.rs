//! Removal, protocol steps 7 and 8: cancel takes one pending task out;
//! shutdown stops intake and, at once, takes out everything pending.
//! Removed tasks are told their outcome after the lock is released.

use super::broken;
use super::fault::Fault;
use super::outcome::Abandon;
use super::shared::{Key, Mode, Shared, State};
use super::task::{Lookup, PoolEntry, Task, TaskKey};

impl<K: Key> State<K> {
    /// Remove `key`'s pending task, from the heap or held for its key; only
    /// the one stamped `seq`, if given.
    pub(crate) fn remove_pending<Q: ?Sized + Lookup<K>>(
        &mut self,
        key: &Q,
        seq: Option<u64>,
    ) -> Option<PoolEntry<K>> {
        let in_heap = match seq {
            Some(seq) => self.pending.remove_seq(key, seq),
            None => self.pending.remove(key),
        };
        in_heap.or_else(|| self.exclusive.take(key, seq))
    }
}

impl<K: Key> Shared<K> {
    /// Step 7: cancel `key`'s pending task (only the one stamped `seq`, if
    /// given, so a handle never cancels a replacement). True iff one was
    /// pending; it is then told `Cancelled` and never runs.
    pub(crate) fn cancel<Q: ?Sized + Lookup<K>>(&self, key: &Q, seq: Option<u64>) -> bool {
        if self.faults.has(Fault::CancelCheckThenRemove) {
            return broken::cancel_check_then_remove(self, key, seq);
        }
        self.cancel_pending(key, || seq)
    }

    /// Step 7, for a periodic task's handle: the task's current entry (the
    /// task or its stand-in), whose stamp `seq` reads under the lock.
    pub(crate) fn cancel_current(&self, key: &TaskKey<K>, seq: impl FnOnce() -> u64) -> bool {
        self.cancel_pending(key, || Some(seq()))
    }

    /// Remove `key`'s pending task (the one stamped as `seq` says, read
    /// under the lock) and tell it `Cancelled`. Wakes a draining leader if
    /// that left nothing pending.
    fn cancel_pending<Q: ?Sized + Lookup<K>>(
        &self,
        key: &Q,
        seq: impl FnOnce() -> Option<u64>,
    ) -> bool {
        let (removed, retired) = {
            let mut st = self.state.lock();
            let removed = st.remove_pending(key, seq());
            if removed.is_some() {
                self.notify_if_drained(&st);
            }
            (removed, st.pending.take_retired())
        };
        // Buffers the heap shrank away are freed outside the lock.
        drop(retired);
        match removed {
            Some(entry) => {
                self.abandon(&entry.key, entry.due, entry.value, Abandon::Cancelled);
                true
            }
            None => false,
        }
    }

    /// Step 8, graceful: refuse new work, let pending one-shot tasks run when
    /// due, and stop periodic tasks (they never drain by themselves).
    pub(crate) fn begin_drain(&self) {
        let stopped = {
            let mut st = self.state.lock();
            if st.mode == Mode::Running {
                st.mode = Mode::Draining;
            }
            let stops = |task: &Task| task.is_periodic() && !self.keeps_in_drain(task);
            let mut stopped = st.pending.remove_where(stops);
            stopped.extend(st.exclusive.drain_periodic(stops));
            if !self.faults.has(Fault::ShutdownNoNotify) {
                self.notify_leader();
            }
            stopped
        };
        #[cfg(feature = "tracing")]
        super::trace::shutdown("drain", stopped.len());
        for entry in stopped {
            self.abandon(&entry.key, entry.due, entry.value, Abandon::Shutdown);
        }
    }

    /// Step 8, at once: refuse new work, remove every pending task (due or
    /// not: a task is pending until a worker starts it), and tell each
    /// `Shutdown`. Returns the keys of the removed keyed tasks in due order
    /// (a running periodic task's stand-in is stopped, not returned).
    pub(crate) fn stop_now(&self) -> Vec<K> {
        if self.faults.has(Fault::ShutdownNowCheckThenDrain) {
            return broken::stop_now_check_then_drain(self);
        }
        self.stop_now_here()
    }

    /// [`stop_now`](Self::stop_now), in one critical section.
    pub(crate) fn stop_now_here(&self) -> Vec<K> {
        let drained = {
            let mut st = self.state.lock();
            st.mode = Mode::Stopped;
            // Held tasks are already due: they come first.
            let mut drained = st.exclusive.drain();
            drained.extend(st.pending.drain());
            self.notify_leader();
            drained
        };
        #[cfg(feature = "tracing")]
        super::trace::shutdown("now", drained.len());
        let mut keys = Vec::new();
        for entry in drained {
            let stand_in = entry.value.is_stand_in();
            self.abandon(&entry.key, entry.due, entry.value, Abandon::Shutdown);
            if let (TaskKey::Keyed(k), false) = (entry.key, stand_in) {
                keys.push(k);
            }
        }
        keys
    }
}
