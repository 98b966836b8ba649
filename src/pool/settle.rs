//! Settling, for tests of timed code: wait until nothing due is waiting and
//! nothing runs.
//!
//! # Ground rules
//!
//! - Settled means, under the state lock: no pending task is due by the
//!   pool's clock (none held for its key either), and every run a worker
//!   started has ended (a periodic task is back in the heap by then).
//! - A worker that finds nothing due to start notifies `Shared::settled`,
//!   under the lock, only while someone waits to settle, so the protocol
//!   pays nothing otherwise.

use super::shared::{Key, Shared, State};
use crate::Error;
use std::time::Instant;

impl<K: Key> Shared<K> {
    /// True when nothing due waits and nothing runs.
    fn is_settled(&self, st: &State<K>) -> bool {
        let now = self.time.now().ns;
        let due = st.heap.peek_due().is_some_and(|d| d <= now) || !st.exclusive.is_empty();
        !due && st.started == self.counters.finished()
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
                break Ok(());
            }
            match deadline {
                Some(d) if Instant::now() >= d => break Err(self.unsettled(&st)),
                Some(d) => {
                    self.settled.wait_until(&mut st, d);
                }
                None => self.settled.wait(&mut st),
            }
        };
        st.settle_waiters -= 1;
        settled
    }

    /// What keeps the pool from settling.
    fn unsettled(&self, st: &State<K>) -> Error {
        let finished = self.counters.finished();
        Error::NotSettled {
            running: st.started.saturating_sub(finished) as usize,
            pending: st.heap.len() + st.exclusive.len(),
        }
    }

    /// A worker found nothing due: wake those who wait to settle.
    pub(crate) fn notify_settle(&self, st: &State<K>) {
        if st.settle_waiters > 0 {
            self.settled.notify_all();
        }
    }
}
