//! Follow-ups during a graceful shutdown (`Builder::drain_follow_ups`):
//! which calls a draining pool still admits, which periodic tasks it keeps,
//! and why its leader may not stop while a task runs.
//!
//! # Ground rules
//!
//! - A follow-up is a scheduling call made on one of the pool's worker
//!   threads, recognised by the ids `Crew::start` records before the first
//!   task can start. Only a `Draining` pool asks, so a running pool pays
//!   nothing; a `Stopped` one admits nothing.
//! - With the option on, a draining pool is drained only when nothing is
//!   pending and no worker holds a running key: the worker whose run ends
//!   clears its slot and then notifies (`worker::start_one`), under the
//!   lock, so the leader cannot miss the last run's end.

use super::shared::{Key, Mode, Shared, State};
use super::task::Task;
use crate::sync::thread;

impl<K: Key> Shared<K> {
    /// True when a refused-by-mode call is a follow-up this pool admits:
    /// draining, with the option on, from one of its workers.
    pub(crate) fn admits_follow_up(&self, st: &State<K>) -> bool {
        st.mode == Mode::Draining && self.config.drain_follow_ups && self.on_a_worker()
    }

    /// True on one of this pool's worker threads.
    fn on_a_worker(&self) -> bool {
        let me = thread::current().id();
        self.worker_ids.get().is_some_and(|ids| ids.contains(&me))
    }

    /// True for a periodic task (or stand-in) a graceful shutdown keeps: a
    /// retried one-shot task, with the option on.
    pub(crate) fn keeps_in_drain(&self, task: &Task) -> bool {
        self.config.drain_follow_ups && task.is_retry()
    }

    /// True while a running task may still add a follow-up the pool must
    /// wait for: the option is on and a worker holds a running key.
    pub(crate) fn follow_ups_may_come(&self, st: &State<K>) -> bool {
        self.config.drain_follow_ups && self.any_running(st, |_| true)
    }
}
