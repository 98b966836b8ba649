//! Broken twins of protocol steps, for the loom models: each is reached only
//! through a one-line guard on its [`Fault`](super::fault::Fault), which is
//! never set outside `--cfg loom`. They are here, beside the fault list, so
//! that the real steps read the same with or without loom.

use super::outcome::Abandon;
use super::shared::{Key, Mode, Shared, State};
use super::task::{Lookup, TaskKey};
use super::time::Now;
use crate::sync::MutexGuard;

/// `Fault::CancelCheckThenRemove`: look up, unlock, remove, and report the
/// lookup. `seq` restricts it to one stamp, as a handle's cancel does.
pub(crate) fn cancel_check_then_remove<K: Key, Q: ?Sized + Lookup<K>>(
    shared: &Shared<K>,
    key: &Q,
    seq: Option<u64>,
) -> bool {
    let pending = match shared.state.lock().pending.get(key) {
        Some((_, s)) => seq.is_none_or(|want| want == s),
        None => false,
    };
    let removed = shared.state.lock().remove_pending(key, seq);
    if let Some(entry) = removed {
        shared.abandon(&entry.key, entry.due, entry.value, Abandon::Cancelled);
    }
    pending
}

/// `Fault::ShutdownNowCheckThenDrain`: read the pending keys (taking the
/// tasks out and putting them back, keeping their stamps), unlock, then stop
/// and drain as `stop_now` does, and report the keys first read.
pub(crate) fn stop_now_check_then_drain<K: Key>(shared: &Shared<K>) -> Vec<K> {
    let keys: Vec<K> = {
        let mut st = shared.state.lock();
        let pending = st.pending.drain();
        let keys = pending
            .iter()
            .filter_map(|e| e.key.keyed().cloned())
            .collect();
        for entry in pending {
            let _ = st.pending.restore(entry);
        }
        keys
    };
    drop(shared.stop_now_here());
    keys
}

/// `Fault::ReplaceKeepsOld`: a pending key gets a fresh keyless number, so
/// the new task goes in beside the old one instead of replacing it.
pub(crate) fn beside_old<K: Key>(shared: &Shared<K>, st: &State<K>, key: TaskKey<K>) -> TaskKey<K> {
    if st.pending.contains_key(&key) {
        shared.anon_key()
    } else {
        key
    }
}

/// `Fault::UnlockBeforeWait`: let go of the lock between the decision to
/// wait and the wait. False when the pool stopped meanwhile (then the leader
/// does not wait, so the model's shutdown still ends).
pub(crate) fn relock_still_running<K>(st: &mut MutexGuard<'_, State<K>>) -> bool {
    MutexGuard::unlocked(st, || ());
    st.mode == Mode::Running
}

/// `Fault::StaleClock`: the first reading of a leadership, kept for all of it.
#[derive(Debug, Default)]
pub(crate) struct FirstReading(Option<Now>);

impl FirstReading {
    /// The first reading seen, instead of `now`.
    pub(crate) fn keep(&mut self, now: Now) -> Now {
        *self.0.get_or_insert(now)
    }
}
