//! Intake, protocol steps 6 and 12: a scheduling call admits its tasks
//! under the lock, replacing a pending task under the same key, and
//! notifies the leader when the earliest due time changes; a one-shot task
//! already due while nothing pending is due is claimed on arrival and sent
//! to the workers before the lock is released.
//!
//! One path serves a single task and a batch: a batch is admitted under one
//! acquisition of the lock, all or none.

use super::broken;
use super::fault::Fault;
use super::handoff::{Claimed, Few};
use super::outcome::Abandon;
use super::shared::{Key, Mode, Shared, State};
use super::task::{Runnable, Task, TaskKey};
use super::time::Now;
use crate::contain::drop_quietly;
use crate::heap::Inserted;
use crate::sync::MutexGuard;
use crate::Error;

/// One task a scheduling call hands the pool.
pub(crate) struct Arrival<K> {
    /// Its key (keyless tasks get a fresh number before they arrive).
    pub(crate) key: TaskKey<K>,
    /// Due time, nanoseconds since the epoch.
    pub(crate) due: i64,
    /// The task.
    pub(crate) task: Task,
}

/// What admitting leaves to do once the lock is released.
struct Admitted<K> {
    /// Tasks claimed on arrival, sent before the lock is released.
    claimed: Few<Claimed<K>>,
    /// Pending tasks the arrivals replaced, told `Replaced` after it.
    replaced: Few<Task>,
    /// Keys to drop after it (user `Drop` never runs under the lock).
    keys: Few<TaskKey<K>>,
    /// Arrivals the heap took or that were claimed.
    count: u64,
}

impl<K: Key> Shared<K> {
    /// Steps 6 and 12: admit `arrivals` under one lock, all or none, and
    /// tell `stamped` each one's position and stamp (under the lock, so a
    /// periodic task can record it before anyone else sees the entry).
    ///
    /// # Errors
    ///
    /// [`Error::ShutDown`] once the pool stops taking work;
    /// [`Error::CapacityReached`] for a new key at capacity, or for a batch
    /// that does not fit. The refused tasks are dropped outside the lock.
    pub(crate) fn admit<I>(
        &self,
        arrivals: I,
        mut stamped: impl FnMut(usize, u64),
    ) -> Result<(), Error>
    where
        I: ExactSizeIterator<Item = Arrival<K>>,
    {
        let mut st = self.state.lock();
        if let Some(e) = self.refusal(&st, arrivals.len()) {
            drop(st);
            arrivals.for_each(|a| drop_quietly(a.task));
            return Err(e);
        }
        if self.faults.has(Fault::IntakeOutsideLock) {
            MutexGuard::unlocked(&mut st, || ());
        }
        let head = st.heap.peek_due();
        let mut claim = self.claim_window(&st);
        let mut out = Admitted {
            claimed: Few::new(),
            replaced: Few::new(),
            keys: Few::new(),
            count: 0,
        };
        for (i, arrival) in arrivals.enumerate() {
            match self.admit_one(&mut st, arrival, &mut claim, &mut out) {
                Ok(seq) => stamped(i, seq),
                Err((key, task)) => return self.refuse_at_capacity(st, key, task, out),
            }
        }
        self.counters.scheduled(out.count);
        if st.heap.peek_due() != head && !self.faults.has(Fault::NoNotifyOnNewHead) {
            self.leader_cv.notify_one();
        }
        self.send_claimed(st, out.claimed);
        self.after_admission(out.replaced, out.keys);
        Ok(())
    }

    /// Why a call adding `n` tasks is refused whole, if it is: the pool no
    /// longer takes work, or a batch would not fit (a single task is checked
    /// by the heap, so that it may replace a pending key at capacity).
    fn refusal(&self, st: &State<K>, n: usize) -> Option<Error> {
        let capacity = self.config.capacity;
        if st.mode != Mode::Running {
            Some(Error::ShutDown)
        } else if n > 1 && st.pending().saturating_add(n) > capacity {
            Some(Error::CapacityReached { capacity })
        } else {
            None
        }
    }

    /// The clock's reading if tasks due now may be claimed on arrival: the
    /// pool claims on submission and nothing pending is due (so the hand-off
    /// queue stays in due order).
    fn claim_window(&self, st: &State<K>) -> Option<Now> {
        if !self.config.claim_on_submit {
            return None;
        }
        let now = self.time.now();
        let head_due = st.heap.peek_due().is_some_and(|d| d <= now.ns);
        (!head_due).then_some(now)
    }

    /// Admit one task under the lock: claimed on arrival while `claim`
    /// holds, or into the heap (which ends claiming for the rest of a batch,
    /// keeping due order). Returns its stamp, or the key and task back when
    /// a new key finds the heap at capacity.
    fn admit_one(
        &self,
        st: &mut State<K>,
        a: Arrival<K>,
        claim: &mut Option<Now>,
        out: &mut Admitted<K>,
    ) -> Result<u64, (TaskKey<K>, Task)> {
        // A held task (exclusive keys) is pending too: this replaces it.
        if let Some(held) = st.exclusive.take(&a.key, None) {
            out.replaced.push(held.value);
            out.keys.push(held.key);
        }
        let task = match (*claim, a.task) {
            (Some(now), Task::Once(job)) if a.due <= now.ns => {
                return Ok(self.claim_on_arrival(st, a.key, a.due, job, now, out));
            }
            (_, task) => task,
        };
        *claim = None;
        let key = if self.faults.has(Fault::ReplaceKeepsOld) {
            broken::beside_old(self, st, a.key)
        } else {
            a.key
        };
        let limit = self.config.capacity.saturating_sub(st.exclusive.len());
        let seq = match st.heap.try_insert(key, a.due, task, limit) {
            Ok(Inserted::New { seq }) => seq,
            Ok(Inserted::Replaced { seq, old, key, .. }) => {
                out.replaced.push(old);
                out.keys.push(key);
                seq
            }
            Err(refused) => return Err(refused),
        };
        out.count += 1;
        Ok(seq)
    }

    /// Step 12: claim a task due on arrival. It replaces the key's pending
    /// task and takes a stamp that no heap entry will ever have (it is never
    /// pending, so a handle's cancel finds nothing).
    fn claim_on_arrival(
        &self,
        st: &mut State<K>,
        key: TaskKey<K>,
        due: i64,
        job: Box<dyn super::task::OnceJob>,
        now: Now,
        out: &mut Admitted<K>,
    ) -> u64 {
        if let TaskKey::Keyed(_) = key {
            if let Some(old) = st.heap.remove(&key) {
                out.replaced.push(old.value);
                out.keys.push(old.key);
            }
        }
        out.count += 1;
        out.claimed.push(Claimed {
            task: Runnable::Once(job),
            key,
            due,
            claimed: now.at,
        });
        st.heap.take_seq()
    }

    /// Step 12: send the tasks claimed on arrival while still holding the
    /// lock, so they are in the channel before any exit pill a later
    /// shutdown makes the leader send; then wake the leader, which helps
    /// run them if every follower is busy. Releases the lock.
    fn send_claimed(&self, st: MutexGuard<'_, State<K>>, claimed: Few<Claimed<K>>) {
        if claimed.is_empty() {
            return;
        }
        let _st = (!self.faults.has(Fault::ClaimSendAfterUnlock)).then_some(st);
        claimed.send(&self.tx, self.config.workers);
        if !self.faults.has(Fault::ClaimNoCallLeader) {
            self.leader_cv.notify_one();
        }
    }

    /// A single task refused at capacity: nothing changed but the held task
    /// it may have replaced, which is told `Replaced`.
    fn refuse_at_capacity(
        &self,
        st: MutexGuard<'_, State<K>>,
        key: TaskKey<K>,
        task: Task,
        mut out: Admitted<K>,
    ) -> Result<(), Error> {
        debug_assert!(out.count == 0, "a batch passed its capacity check");
        drop(st);
        drop_quietly(task);
        out.keys.push(key);
        self.after_admission(out.replaced, out.keys);
        Err(Error::CapacityReached {
            capacity: self.config.capacity,
        })
    }

    /// Once the lock is released: tell the replaced tasks, drop the keys.
    fn after_admission(&self, replaced: Few<Task>, keys: Few<TaskKey<K>>) {
        for old in replaced {
            self.abandon(old, Abandon::Replaced);
        }
        drop(keys);
    }
}
