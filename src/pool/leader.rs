//! The leader: the one worker in a timed wait on the heap. Protocol and proof
//! sketch: `docs/protocol.md`.
//!
//! # Ground rules
//!
//! - Only the holder of the [`Lead`] token waits on `Shared::leader_cv`; so
//!   `notify_one` always reaches the leader, and no follower ever sleeps on a
//!   clock.
//! - The head, the clock and the mode are read under the state lock in the
//!   same critical section that decides to wait, and re-read after every
//!   wake: nothing is carried across a wait.
//! - Claimed tasks leave the heap under the lock and are sent, with the
//!   token after them, only once the lock is released.

use super::task::BoxJob;
use super::worker::Msg;
use super::{Mode, Shared};
use std::hash::Hash;

/// The leadership token. Exactly one exists per running pool; holding it is
/// the only way to claim tasks.
#[derive(Debug)]
pub(crate) struct Lead(());

impl Lead {
    /// The pool's one token, made once at start-up.
    pub(crate) fn first() -> Self {
        Lead(())
    }
}

/// How a leadership ended.
pub(crate) enum Led {
    /// Claimed tasks and the token were sent; go back to serving.
    HandedOff,
    /// The pool is stopping; the exit pill was sent; this worker exits.
    Exit,
}

/// Lead until there is due work to hand off, or the pool stops.
pub(crate) fn lead<K: Hash + Eq + Clone + Send + 'static>(shared: &Shared<K>, token: Lead) -> Led {
    let mut batch: Vec<BoxJob> = Vec::new();
    let mut st = shared.state.lock();
    loop {
        match st.mode {
            Mode::Stopped => break,
            Mode::Draining if st.heap.is_empty() => break,
            _ => {}
        }
        let now = shared.now_ns();
        match st.heap.peek_due() {
            None => shared.leader_cv.wait(&mut st),
            Some(due) if due > now => match shared.real_deadline(due) {
                Some(deadline) => {
                    shared.leader_cv.wait_until(&mut st, deadline);
                }
                None => shared.leader_cv.wait(&mut st),
            },
            Some(_) => {
                while batch.len() < shared.claim_batch {
                    match st.heap.pop_due(now) {
                        Some(entry) => batch.push(entry.value),
                        None => break,
                    }
                }
                drop(st);
                for job in batch {
                    let _ = shared.tx.send(Msg::Run(job));
                }
                let _ = shared.tx.send(Msg::Lead(token));
                return Led::HandedOff;
            }
        }
    }
    drop(st);
    let Lead(()) = token;
    let _ = shared.tx.send(Msg::Exit);
    Led::Exit
}
