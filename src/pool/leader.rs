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

#[cfg(loom)]
use super::fault::Fault;
use super::worker::{Claimed, Msg};
use super::{Mode, Shared, TaskKey, NEVER};
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
    let mut batch: Vec<Claimed<K>> = Vec::new();
    let mut st = shared.state.lock();
    #[cfg(loom)]
    let mut first_now: Option<i64> = None;
    loop {
        match st.mode {
            Mode::Stopped => break,
            Mode::Draining if st.drained() => break,
            #[cfg(loom)]
            Mode::Draining if shared.faulty(Fault::DrainIgnoresHeld) && st.heap.is_empty() => break,
            _ => {}
        }
        let (now_at, now) = shared.now_pair();
        #[cfg(loom)]
        let now = if shared.faulty(Fault::StaleClock) {
            *first_now.get_or_insert(now)
        } else {
            now
        };
        #[cfg(loom)]
        if shared.faulty(Fault::UnlockBeforeWait)
            && st.mode == Mode::Running
            && st.heap.peek_due().map_or(true, |d| d > now)
        {
            drop(st);
            st = shared.state.lock();
            if st.mode == Mode::Running {
                shared.leader_cv.wait(&mut st);
            }
            continue;
        }
        match st.heap.peek_due() {
            None => {
                shared.leader_cv.wait(&mut st);
                st.wakeups += 1;
            }
            Some(due) if due > now => {
                match shared.real_deadline(due) {
                    Some(deadline) => {
                        shared.leader_cv.wait_until(&mut st, deadline);
                    }
                    None => shared.leader_cv.wait(&mut st),
                }
                st.wakeups += 1;
            }
            Some(_) => {
                while batch.len() < shared.claim_batch {
                    let Some(entry) = st.heap.pop_due(now) else {
                        break;
                    };
                    if shared.exclusive && matches!(entry.key, TaskKey::Keyed(_)) {
                        #[cfg(loom)]
                        if shared.faulty(Fault::ExclusiveNoHold) {
                            st.busy.remove(&entry.key);
                        }
                        if st.busy.contains(&entry.key) {
                            // Its key's previous task still runs: hold it
                            // until that one returns (worker::execute).
                            st.held.insert(entry.key.clone(), entry);
                            continue;
                        }
                        st.busy.insert(entry.key.clone());
                    }
                    if let Some(stand_in) = entry.value.stand_in() {
                        // A periodic task stays findable under its key while
                        // it runs.
                        stand_in.set_seq(st.heap.next_seq());
                        let _ = st.heap.insert(entry.key.clone(), NEVER, stand_in);
                    }
                    batch.push(Claimed {
                        job: entry.value,
                        key: entry.key,
                        due: entry.due,
                        claimed: now_at,
                    });
                }
                if batch.is_empty() {
                    // Everything due was held back: check again.
                    continue;
                }
                drop(st);
                #[cfg(loom)]
                if shared.faulty(Fault::LeadBeforeRuns) {
                    let _ = shared.tx.send(Msg::Lead(token));
                    for claimed in batch {
                        let _ = shared.tx.send(Msg::Run(claimed));
                    }
                    return Led::HandedOff;
                }
                for claimed in batch {
                    let _ = shared.tx.send(Msg::Run(claimed));
                }
                #[cfg(loom)]
                if shared.faulty(Fault::DropLead) {
                    let Lead(()) = token;
                    return Led::HandedOff;
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
