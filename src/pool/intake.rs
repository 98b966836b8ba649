//! Intake, protocol step 6: a scheduling call admits its tasks under the
//! lock, replacing a pending task under the same key, and notifies the
//! leader when the earliest due time changes. Every task goes into the heap,
//! a task already due too: it is pending until a worker starts it.
//!
//! One path serves a single task and a batch: a batch is admitted under one
//! acquisition of the lock, all or none.

use super::broken;
use super::fault::Fault;
use super::few::Few;
use super::outcome::Abandon;
use super::shared::{Key, Mode, Shared, State, NEAR};
use super::task::{Lookup, Task, TaskKey};
use crate::contain::drop_quietly;
use crate::heap::Inserted;
use crate::sync::MutexGuard;
use crate::Error;

/// How far past the latest clock reading taken under the lock a new task
/// may be due and still join the ready lane without a reading of its own:
/// while workers start tasks, that reading is microseconds old, and a task
/// due "now" by the caller's clock is due by then.
const LANE_AHEAD: i64 = 1_000_000;

/// One task a scheduling call hands the pool.
pub(crate) struct Arrival<K> {
    /// Its key (keyless tasks get a fresh number before they arrive).
    pub(crate) key: TaskKey<K>,
    /// Due time, nanoseconds since the epoch.
    pub(crate) due: i64,
    /// The task.
    pub(crate) task: Task,
}

/// An admitted task's stamp, and whether it replaced a pending task.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stamp {
    /// The heap's stamp of its entry.
    pub(crate) seq: u64,
    /// It replaced a task pending under its key.
    pub(crate) replaced: bool,
}

/// Tasks a scheduling call handed the pool and got back, with why.
pub(crate) struct Refusal {
    /// Why they were refused.
    pub(crate) error: Error,
    /// The refused tasks, unrun, in arrival order.
    pub(crate) tasks: Vec<Task>,
}

/// A pending task an arrival replaced: its key, due time and task.
type Replaced<K> = (TaskKey<K>, i64, Task);

/// One arrival's admission: its stamp and the task it replaced in the heap,
/// or its key and task back at capacity.
type Admission<K> = Result<(Stamp, Option<Replaced<K>>), (TaskKey<K>, Task)>;

/// What admitting leaves to do once the lock is released.
struct Admitted<K> {
    /// Pending tasks the arrivals replaced (key, due, task), told
    /// `Replaced` after it (and their keys dropped then: user `Drop` never
    /// runs under the lock).
    replaced: Few<Replaced<K>>,
    /// Arrivals the heap took.
    count: u64,
}

impl<K: Key> Shared<K> {
    /// Step 6: admit `arrivals` under one lock, all or none, and
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
        stamped: impl FnMut(usize, Stamp),
    ) -> Result<(), Error>
    where
        I: ExactSizeIterator<Item = Arrival<K>>,
    {
        self.admit_or_return(arrivals, stamped).map_err(|refused| {
            refused.tasks.into_iter().for_each(drop_quietly);
            refused.error
        })
    }

    /// [`admit`](Self::admit), handing the refused tasks back (after the
    /// lock is released) instead of dropping them.
    pub(crate) fn admit_or_return<I>(
        &self,
        arrivals: I,
        mut stamped: impl FnMut(usize, Stamp),
    ) -> Result<(), Refusal>
    where
        I: ExactSizeIterator<Item = Arrival<K>>,
    {
        let mut st = self.state.lock();
        if let Some(error) = self.refusal(&st, arrivals.len()) {
            drop(st);
            let tasks = arrivals.map(|a| a.task).collect();
            return Err(Refusal { error, tasks });
        }
        let (head, mut out) = self.begin_admission(&mut st);
        let mut now = None;
        for (i, arrival) in arrivals.enumerate() {
            let now = self.now_for(&mut st, arrival.due, &mut now);
            match self.admit_one(&mut st, arrival, now, &mut out) {
                Ok((stamp, replaced)) => {
                    out.replaced.extend(replaced);
                    stamped(i, stamp);
                }
                Err((key, task)) => return Err(self.refuse_at_capacity(st, key, task, out)),
            }
        }
        self.end_admission(st, head, out);
        Ok(())
    }

    /// [`admit_or_return`](Self::admit_or_return) for one task, returning
    /// its stamp: the same steps without the loop over a batch, for the
    /// single-task scheduling calls.
    pub(crate) fn admit_single(&self, arrival: Arrival<K>) -> Result<Stamp, Refusal> {
        let mut st = self.state.lock();
        if let Some(error) = self.refusal(&st, 1) {
            drop(st);
            let tasks = vec![arrival.task];
            return Err(Refusal { error, tasks });
        }
        let (head, mut out) = self.begin_admission(&mut st);
        let now = self.now_for(&mut st, arrival.due, &mut None);
        match self.admit_one(&mut st, arrival, now, &mut out) {
            Ok((stamp, replaced)) => {
                self.end_admission(st, head, out);
                // The task it replaced is told once the lock is released,
                // as after_admission tells a batch's (without the list).
                if let Some((key, due, old)) = replaced {
                    self.abandon(&key, due, old, Abandon::Replaced);
                }
                Ok(stamp)
            }
            Err((key, task)) => Err(self.refuse_at_capacity(st, key, task, out)),
        }
    }

    /// Under the lock, before the first arrival: the earliest due time
    /// (to tell whether the arrivals moved it) and nothing admitted yet.
    #[inline]
    fn begin_admission(&self, st: &mut MutexGuard<'_, State<K>>) -> (Option<i64>, Admitted<K>) {
        if self.faults.has(Fault::IntakeOutsideLock) {
            MutexGuard::unlocked(st, || ());
        }
        let out = Admitted {
            replaced: Few::new(),
            count: 0,
        };
        (st.pending.peek_due(), out)
    }

    /// After the last arrival: count them, notify the leader if the
    /// earliest due time moved, release the lock, and tell the replaced
    /// tasks.
    #[inline]
    fn end_admission(&self, mut st: MutexGuard<'_, State<K>>, head: Option<i64>, out: Admitted<K>) {
        st.scheduled += out.count;
        if st.pending.peek_due() != head && !self.faults.has(Fault::NoNotifyOnNewHead) {
            self.notify_leader();
        }
        drop(st);
        // Most calls replace nothing: checked here, so that they do not pay
        // for passing the list to a call that returns at once.
        if !out.replaced.is_empty() {
            self.after_admission(out.replaced, Few::new());
        }
    }

    /// A reading of the clock against which a task due at `due` may be due
    /// on arrival (and join the ready lane, `pending.rs`): the latest one
    /// seen under the lock if the task is due by it; the task's own due
    /// time if that lies within [`LANE_AHEAD`] of it, so that a burst of
    /// tasks due now joins the lane without a clock read per task; a fresh
    /// one (taken once per call, in `read`) if it is due within [`NEAR`];
    /// and otherwise none (`i64::MIN`: the task goes into the heap). The
    /// lane may so hold a task due a moment from now; a start still takes
    /// only what its own reading finds due (`Pending::pop_due`).
    fn now_for(&self, st: &mut State<K>, due: i64, read: &mut Option<i64>) -> i64 {
        if due <= st.seen_now {
            return st.seen_now;
        }
        if due <= st.seen_now.saturating_add(LANE_AHEAD) {
            return due;
        }
        if due > st.seen_now.saturating_add(NEAR) && read.is_none() {
            return i64::MIN;
        }
        let now = *read.get_or_insert_with(|| self.time.now().ns);
        st.seen_now = st.seen_now.max(now);
        now
    }

    /// Step 6, in place: move `key`'s pending task to `due`, keeping its
    /// task, its stamp and so its handle. True iff one was pending; a
    /// running periodic task's stand-in is not (its next run is put back
    /// when the run ends). Notifies the leader when the head moved.
    pub(crate) fn reschedule<Q: ?Sized + Lookup<K>>(&self, key: &Q, due: i64) -> bool {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        // A task held for its busy key (exclusive keys) is pending too.
        if let Some(held) = st.exclusive.take(key, None) {
            if let Err(entry) = st.pending.restore(held) {
                debug_assert!(false, "a held key was also in the heap");
                drop(guard);
                entry.value.lose();
                return false;
            }
        }
        let head = st.pending.peek_due();
        if st.pending.reschedule(key, due).is_none() {
            return false;
        }
        if st.pending.peek_due() != head {
            self.notify_leader();
        }
        true
    }

    /// Why a call adding `n` tasks is refused whole, if it is: the pool no
    /// longer takes work, or a batch would not fit (a single task is checked
    /// by the heap, so that it may replace a pending key at capacity).
    fn refusal(&self, st: &State<K>, n: usize) -> Option<Error> {
        let capacity = self.config.capacity;
        if st.mode != Mode::Running && !self.admits_follow_up(st) {
            Some(Error::ShutDown)
        } else if n > 1 && st.pending_count().saturating_add(n) > capacity {
            Some(Error::CapacityReached { capacity })
        } else {
            None
        }
    }

    /// Admit one task into the heap under the lock, replacing a pending task
    /// under its key. Returns its stamp and the task it replaced in the heap
    /// (a held task it replaced goes to `out`), or the key and task back
    /// when a new key finds the heap at capacity.
    fn admit_one(
        &self,
        st: &mut State<K>,
        a: Arrival<K>,
        now: i64,
        out: &mut Admitted<K>,
    ) -> Admission<K> {
        // A held task (exclusive keys) is pending too: this replaces it.
        // Most pools hold none: checked here, which spares every arrival a
        // call returning an empty entry.
        let replaced_held = !st.exclusive.is_empty() && Self::replace_held(st, &a.key, out);
        let task = a.task;
        let key = if self.faults.has(Fault::ReplaceKeepsOld) {
            broken::beside_old(self, st, a.key)
        } else {
            a.key
        };
        let limit = self.config.capacity.saturating_sub(st.exclusive.len());
        let admitted = match st.pending.try_insert(key, a.due, task, limit, now) {
            Ok(Inserted::New { seq }) => {
                let replaced = replaced_held;
                (Stamp { seq, replaced }, None)
            }
            Ok(Inserted::Replaced {
                seq,
                old,
                old_due,
                key,
                ..
            }) => {
                let replaced = true;
                (Stamp { seq, replaced }, Some((key, old_due, old)))
            }
            Err(refused) => return Err(refused),
        };
        out.count += 1;
        Ok(admitted)
    }

    /// Take `key`'s held task (exclusive keys) out, to be told `Replaced`;
    /// true iff there was one.
    fn replace_held(st: &mut State<K>, key: &TaskKey<K>, out: &mut Admitted<K>) -> bool {
        let Some(held) = st.exclusive.take(key, None) else {
            return false;
        };
        out.replaced.push((held.key, held.due, held.value));
        true
    }

    /// A single task refused at capacity: nothing changed but the held task
    /// it may have replaced, which is told `Replaced`. The task comes back.
    fn refuse_at_capacity(
        &self,
        st: MutexGuard<'_, State<K>>,
        key: TaskKey<K>,
        task: Task,
        out: Admitted<K>,
    ) -> Refusal {
        debug_assert!(out.count == 0, "a batch passed its capacity check");
        drop(st);
        let mut keys = Few::new();
        keys.push(key);
        self.after_admission(out.replaced, keys);
        Refusal {
            error: Error::CapacityReached {
                capacity: self.config.capacity,
            },
            tasks: vec![task],
        }
    }

    /// Once the lock is released: tell the replaced tasks, drop the keys.
    fn after_admission(&self, replaced: Few<Replaced<K>>, mut keys: Few<TaskKey<K>>) {
        for (key, due, old) in replaced {
            self.abandon(&key, due, old, Abandon::Replaced);
            keys.push(key);
        }
        drop(keys);
    }
}
