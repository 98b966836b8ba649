//! Settling, for tests of timed code: wait until nothing due is waiting and
//! nothing runs.
//!
//! # Ground rules
//!
//! - Settled means, under the state lock: no pending task is due by the
//!   pool's clock (none held for its key either), and every run a worker
//!   started has ended (a periodic task is back in the heap by then) and
//!   its worker has taken its key out of the running slots.
//! - A worker that finds nothing due to start notifies `Shared::settled`,
//!   under the lock, only while someone waits to settle, so the protocol
//!   pays nothing otherwise.

use super::shared::{Key, Shared, State};
use super::task::TaskKey;
use crate::contain::drop_quietly;
use crate::sync::MutexGuard;
use crate::Error;
use std::time::Instant;

impl<K: Key> Shared<K> {
    /// True when nothing due waits and nothing runs.
    fn is_settled(&self, st: &State<K>) -> bool {
        let now = self.time.now().ns;
        let due = st.pending.peek_due().is_some_and(|d| d <= now)
            || !st.exclusive.is_empty()
            || st.pending.held_waiting();
        !due && self.started(st) == self.counters.finished() && !self.any_running(st, |_| true)
    }

    /// Wait until settled, or `deadline` (`None`: without a bound).
    ///
    /// # Errors
    ///
    /// [`Error::NotSettled`] at the deadline, with what still ran or was due.
    pub(crate) fn settle(&self, deadline: Option<Instant>) -> Result<(), Error> {
        let mut st = self.state.lock();
        st.settle_waiters += 1;
        let settled = loop {
            if self.is_settled(&st) {
                break true;
            }
            match deadline {
                Some(d) if Instant::now() >= d => break false,
                Some(d) => {
                    self.settled.wait_until(&mut st, d);
                }
                None => self.settled.wait(&mut st),
            }
        };
        st.settle_waiters -= 1;
        match settled {
            true => Ok(()),
            false => Err(self.unsettled(st)),
        }
    }

    /// What keeps the pool from settling. The running keys are cloned
    /// under the lock, named and dropped after it.
    fn unsettled(&self, st: MutexGuard<'_, State<K>>) -> Error {
        let finished = self.counters.finished();
        let running = self.started(&st).saturating_sub(finished) as usize;
        let pending = st.pending.len() + st.exclusive.len();
        let keys = match self.key_names {
            Some(_) => self
                .each_hold(&st)
                .filter_map(|h| h.running.clone())
                .collect(),
            None => Vec::new(),
        };
        drop(st);
        let running_keys = keys.iter().map(|k| self.name_key(k)).collect();
        drop_quietly(keys);
        Error::NotSettled {
            running,
            pending,
            running_keys,
        }
    }

    /// A key as errors name it: [`Builder::debug_keys`](crate::Builder::debug_keys)'s
    /// `Debug` form, `"<keyless>"` for a keyless task.
    fn name_key(&self, key: &TaskKey<K>) -> String {
        match (key, self.key_names) {
            (TaskKey::Keyed(k), Some(name)) => name(k),
            _ => "<keyless>".to_string(),
        }
    }

    /// The caller's keys of the tasks running now, cloned under the lock.
    pub(crate) fn running_keys(&self) -> Vec<K> {
        let st = self.state.lock();
        let keyed = |h: crate::sync::MutexGuard<'_, super::hold::Held<K>>| {
            h.running.as_ref().and_then(TaskKey::keyed).cloned()
        };
        let keys = self.each_hold(&st).filter_map(keyed).collect();
        drop(st);
        keys
    }

    /// A worker found nothing due: wake those who wait to settle.
    pub(crate) fn notify_settle(&self, st: &State<K>) {
        if st.settle_waiters > 0 {
            self.settled.notify_all();
        }
    }
}
