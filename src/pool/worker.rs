//! Worker threads: lead when the token reaches them, start due tasks one at
//! a time, run them, and settle what a run leaves.
//!
//! # Ground rules
//!
//! - A worker that is not leading and has nothing due to start blocks in
//!   `recv`, never on a clock. Receiving the [`Lead`](super::handoff::Lead)
//!   token makes it the leader until it passes the token on (`leader.rs`).
//! - A worker *starts* a task by taking it out of the heap under the lock
//!   (step 4, [`start_one`]), one task at a time and only to run it at once,
//!   outside every lock. Until then the task is pending: cancel, replace and
//!   `shutdown_now` find it, capacity counts it, and it waits behind no other
//!   task. After a run the worker starts the next due task, until none is
//!   due.
//! - After a run it takes the lock only when the run leaves something to
//!   settle: a periodic task to put back (step 10) or an exclusive key to
//!   release (step 11). See `docs/protocol.md`.
//! - The critical section that starts a task moves its key into the
//!   worker's running slot (in its hold, `hold.rs`); the worker's next
//!   critical section (its next start, or settling the run) takes it back,
//!   and the key is dropped after that lock is released. So the record of
//!   running keys costs no extra lock round and no clone.
//! - A worker that starts a plain one-shot task from a backlog in the
//!   ready lane takes a few more due ones into its hold in the same
//!   critical section (step 4b) and starts them one by one under the
//!   hold's own lock; a worker whose hold is empty takes the earliest due
//!   task, another worker's held one included (step 4c), so no task waits
//!   behind a running one.
//! - A start that leaves the heap's tables sparse does not shrink them:
//!   the worker does, after the run, in a critical section of its own
//!   (step 4d), so that the shrink never delays the task it started.
//! - A task's own panic is caught in its run. Any other user code a worker
//!   runs (a key's traits while settling, the `Drop` of a key) is contained
//!   too: a panic there is counted and the worker keeps serving; keys are
//!   dropped only after the lock is released.

use super::context::{RunningKey, Worker};
use super::deputy::{self, Received, Watch};
use super::fault::Fault;
use super::handoff::{Lead, Msg};
use super::leader::{self, Led};
use super::outcome::{Outcome, Ran, RunCtx};
use super::periodic::{After, PeriodicJob};
use super::shared::{Key, Shared, State};
use super::task::{or_lose, PoolEntry, Runnable, Task, TaskKey};
use super::time::{Now, NEVER};
use super::wake;
use crate::contain::{catch, drop_quietly, forget_payload};
use crate::heap::Inserted;
use crate::sync::{Arc, Weak};

/// A started task, with what the worker needs to run it.
pub(crate) struct Started<K> {
    /// The task.
    task: Runnable,
    /// Its number if it is keyless; `None` if it has a caller's key (which
    /// waits in the worker's running slot, for periodic
    /// re-insertion and exclusive keys).
    anon: Option<u64>,
    /// A copy of its key, only while a completion stream or tracing shows
    /// keys (`Shared::shows_keys`); `Err` if the key's `Clone` panicked.
    shown: Option<Result<TaskKey<K>, ()>>,
    /// Its due time, nanoseconds since the pool's epoch.
    due: i64,
    /// The clock's reading in the critical section that took it out of
    /// the heap to run it at once: when it started (`Timing::claimed`).
    at: Now,
    /// Its start left the heap's tables sparse: shrink them after the run
    /// (step 4d).
    shrink: bool,
}

/// What a run leaves to do under the lock (steps 10, 11).
enum Finished {
    /// Nothing: a one-shot task delivered its outcome.
    Done,
    /// A periodic task to put back at this due time.
    Again(i64, Box<PeriodicJob>),
    /// A periodic task that stops by itself with this outcome.
    Stop(Box<PeriodicJob>, Outcome<()>),
}

/// What settling leaves to do once the lock is released.
enum Leftover<K> {
    /// Nothing.
    Nothing,
    /// What the heap handed back when the task went back in for its
    /// stand-in (the stand-in and the spare key), to drop outside the lock.
    Replaced(Task, TaskKey<K>),
    /// A periodic task whose stand-in was removed: whoever removed it
    /// delivered the outcome, so it is only dropped.
    Drop(Box<PeriodicJob>),
    /// A periodic task stopping by itself, with its removed stand-in entry.
    Finish(Box<PeriodicJob>, Outcome<()>, PoolEntry<K>),
}

/// A worker's whole life; `index` picks its counters.
pub(crate) fn work<K: Key>(shared: &Arc<Shared<K>>, index: usize) {
    // Its tasks find their keys through it (`TaskContext::key`).
    let engine: Weak<dyn RunningKey> = Arc::downgrade(shared) as Weak<dyn RunningKey>;
    let _worker = Worker::enter(engine, index);
    // The earliest pending due time this worker saw when it last found
    // nothing due, to watch over as the deputy.
    let mut watch = None;
    loop {
        let msg = match deputy::receive(shared, watch) {
            Received::Msg(msg) => msg,
            Received::Rescue => {
                shared.counters.deputy_woke(index);
                let next = run_due(shared, index, None, true);
                // The same head still pending and not due by the pool's
                // clock although its real deadline passed: a clock whose
                // sleep deadlines run ahead of it. Watching it again would
                // spin; wait untimed until the next message instead.
                watch = next.filter(|w| Some(w.due) != watch.map(|w| w.due));
                continue;
            }
        };
        match msg {
            Msg::Free(buffers) => drop(buffers),
            // Step 3a: look at the heap (step 4), then stand deputy over
            // what it found pending (step 4a).
            Msg::Watch => watch = run_due(shared, index, None, false),
            Msg::Lead(token) => {
                watch = None;
                if let Some(Led::Start(held)) = contain(shared, || leader::lead(shared, token)) {
                    watch = run_due(shared, index, held, false);
                }
            }
            Msg::Exit => {
                // Every worker passes the pill on, so one Exit stops them all.
                shared.handoff.send(Msg::Exit);
                let mut live = shared.live.lock();
                *live -= 1;
                shared.exited.notify_all();
                let last = *live == 0;
                drop(live);
                if last {
                    shared.workers_exited();
                }
                return;
            }
        }
    }
}

/// Run `step`, containing a panic of user code outside a task's run (which
/// catches its own): it is counted and the worker keeps serving.
fn contain<K, R>(shared: &Shared<K>, step: impl FnOnce() -> R) -> Option<R> {
    match catch(step) {
        Ok(r) => Some(r),
        Err(payload) => {
            forget_payload(payload);
            shared.counters.contained();
            None
        }
    }
}

/// Start and run due tasks, one at a time, until none is due; returns the
/// earliest pending due time seen then and the backup past it, for
/// [`receive`] to watch over.
/// `held` is the token of a leader broken on purpose
/// (`Fault::RunBeforePass`), passed on only after its first run; `rescue`
/// counts the starts as the deputy's.
fn run_due<K: Key>(
    shared: &Shared<K>,
    index: usize,
    mut held: Option<Lead>,
    rescue: bool,
) -> Option<Watch> {
    let mut runs = Runs::default();
    let watch = loop {
        let c = match contain(shared, || start_next(shared, index, runs)) {
            Some(Ok(c)) => c,
            Some(Err(next)) => break next,
            None => {
                // Cold: a key's traits panicked mid-start; the running slot
                // may still hold the previous run's key.
                let ended = shared.holds[index].lock().running.take();
                drop_key(shared, ended);
                break None;
            }
        };
        if rescue {
            shared.counters.rescued(index);
        }
        let shrink = c.shrink;
        runs.started(c.at.ns);
        contain(shared, || execute(shared, index, c));
        if shrink {
            shrink_heap(shared);
        }
        if let Some(token) = held.take() {
            shared.handoff.send(Msg::Lead(token));
        }
    };
    if let Some(token) = held {
        shared.handoff.send(Msg::Lead(token));
    }
    watch
}

/// What a worker's starts tell the deputies' backup (step 4): when the
/// latest task it started began, and the latest long run ([`wake::ran_long`])
/// a start noticed. A start from the hold takes no state lock, so the next
/// look at the heap records what it noticed.
#[derive(Debug, Default, Clone, Copy)]
struct Runs {
    /// When the latest task started began.
    last: Option<i64>,
    /// When a start last found that the task before it ran long.
    long: Option<i64>,
}

impl Runs {
    /// A task started at `at`, so the one before it ran until then.
    fn started(&mut self, at: i64) {
        if self.last.is_some_and(|before| wake::ran_long(before, at)) {
            self.long = Some(at);
        }
        self.last = Some(at);
    }

    /// The latest long run as of a look at the heap at `now`: the one a
    /// start noticed, or the latest task's run if it lasted until now.
    fn long_run(self, now: i64) -> Option<i64> {
        let until_now = self.last.filter(|&before| wake::ran_long(before, now));
        until_now.map(|_| now).or(self.long)
    }
}

/// Step 4: start the next task from this worker's hold (step 4b), or
/// else the earliest due one (step 4).
fn start_next<K: Key>(
    shared: &Shared<K>,
    index: usize,
    runs: Runs,
) -> Result<Started<K>, Option<Watch>> {
    match start_held(shared, index) {
        Some(c) => Ok(c),
        None => start_one(shared, index, runs),
    }
}

/// Step 4b: take the first task out of this worker's hold to run it now,
/// under the hold's lock only, moving its key into the running slot in
/// the same critical section; from here `cancel` returns false for it.
/// The clock is read to date the start: the task was due by a reading
/// taken when it went into the hold. `None`: the hold is empty.
fn start_held<K: Key>(shared: &Shared<K>, index: usize) -> Option<Started<K>> {
    let mut hold = shared.holds[index].lock();
    let (_, entry) = hold.waiting.pop_front()?;
    let task = match entry.value {
        Task::Once(job) => Runnable::Once(job),
        Task::Watched(job) => Runnable::Watched(job),
        other => {
            debug_assert!(false, "only plain one-shot tasks are held");
            drop(hold);
            other.lose();
            return None;
        }
    };
    hold.started += 1;
    let at = shared.time.now();
    let shown = shared.shows_keys().then(|| show(shared, &entry.key));
    let anon = match entry.key {
        TaskKey::Keyed(_) => None,
        TaskKey::Anon(n) => Some(n),
    };
    let ended = hold.running.replace(entry.key);
    drop(hold);
    drop_key(shared, ended);
    Some(Started {
        task,
        anon,
        shown,
        due: entry.due,
        at,
        shrink: false,
    })
}

/// Step 4d: shrink the heap's tables, which a start left sparse, in a
/// critical section of its own after that start's run, and send what they
/// gave up to a free worker to free (`Msg::Free`). Inside the start the copy (`heap/shrink.rs`: on
/// this project's guest about 0.1 ms for 8,191 entries while it moved the
/// slots too, 30-60 µs since) made that task late by as much; after its
/// run it falls between due times, where a start meets it only in a
/// backlog. Another removal may have shrunk them meanwhile: then nothing
/// is left to do.
fn shrink_heap<K: Key>(shared: &Shared<K>) {
    let mut st = shared.state.lock();
    st.pending.shrink_heap();
    let retired = st.pending.take_retired();
    drop(st);
    // A free worker frees them, as step 5's `Free`: this one may share its
    // CPU with the worker it just woke to lead.
    shared.free_elsewhere(retired);
}

/// Step 4: take the earliest due task out of the heap to run it now. From
/// here `cancel` returns false for it. Exclusive keys hold a task whose key
/// is busy (step 11); a periodic task leaves its stand-in (step 10); a task
/// whose key panics on the way is told `Panicked`. `None`: nothing is due.
/// The started task's key goes into worker `index`'s running slot; the key
/// of its previous run, if still there, comes out and is dropped after the
/// lock. The same reading tells whether this worker's latest task ran
/// long, which goes with any long run its starts noticed (`runs`) into
/// the deputies' backup. `Err`: nothing is due; what to watch over as a
/// deputy, if anything is pending.
fn start_one<K: Key>(
    shared: &Shared<K>,
    index: usize,
    runs: Runs,
) -> Result<Started<K>, Option<Watch>> {
    // One reading, under the lock, decides what is due and dates the start
    // (the run begins as the lock is released).
    let mut st = shared.state.lock();
    let now = shared.time.now();
    st.seen_now = st.seen_now.max(now.ns);
    st.long_run = st.long_run.max(runs.long_run(now.ns));
    loop {
        // The earliest due task: the heap's, or another worker's held
        // one (step 4c), so none waits behind a running task.
        let Some(entry) = st.pending.next_due(now.ns, index) else {
            let next = shared.batch(&st).map(|b| Watch {
                due: b.due,
                backup: shared.backup(&st),
            });
            st.pending.forget_held(index);
            let ended = shared.holds[index].lock().running.take();
            shared.notify_if_drained(&st);
            shared.notify_settle(&st);
            let retired = st.pending.take_retired();
            drop(st);
            drop(retired);
            drop_key(shared, ended);
            return Err(next);
        };
        match or_lose(entry, |entry| start_entry(&mut st, entry, now)) {
            Some(Some((mut started, key))) => {
                if shared.shows_keys() {
                    started.shown = Some(show(shared, &key));
                }
                st.started += 1;
                st.latest_start = st.latest_start.max(Some(started.due));
                started.shrink = st.pending.heap_sparse();
                let ended = shared.holds[index].lock().running.replace(key);
                let held = match holds_tasks(shared, &started) {
                    true => fill(shared, &mut st, now.ns, index),
                    false => 0,
                };
                drop(st);
                if held > 0 {
                    shared.counters.held(index, held);
                }
                drop_key(shared, ended);
                return Ok(started);
            }
            Some(None) => {} // held for its busy key
            None => shared.counters.lost_to_a_panic(),
        }
    }
}

/// True if a worker that made `started` may take more due tasks into
/// its hold: a plain one-shot task, in a pool without exclusive keys.
fn holds_tasks<K: Key>(shared: &Shared<K>, started: &Started<K>) -> bool {
    let plain = matches!(started.task, Runnable::Once(_) | Runnable::Watched(_));
    plain && !shared.config.exclusive_keys
}

/// Step 4b, under the state lock: move a few more due tasks into worker
/// `index`'s hold; if tasks wait there (moved now, or taken over from
/// another hold, step 4c), notify the leader, so that a free worker takes
/// them rather than wait while this one runs. Returns how many moved.
fn fill<K: Key>(shared: &Shared<K>, st: &mut State<K>, now: i64, index: usize) -> usize {
    let (moved, waiting) = st.pending.fill_hold(now, index, shared.config.workers);
    if waiting > 0 {
        shared.notify_leader();
    }
    moved
}

/// A copy of a started task's key for its completion record and tracing
/// span; a panic of the key's `Clone` is contained and costs only those.
fn show<K: Key>(shared: &Shared<K>, key: &TaskKey<K>) -> Result<TaskKey<K>, ()> {
    catch(|| key.clone()).map_err(|payload| {
        forget_payload(payload);
        shared.counters.contained();
    })
}

/// Take one due entry, unless exclusive keys hold it for its busy key. A
/// periodic task leaves its stand-in under its key (step 10); a stand-in is
/// due never, so it is never taken.
fn start_entry<K: Key>(
    st: &mut State<K>,
    entry: PoolEntry<K>,
    at: Now,
) -> Option<(Started<K>, TaskKey<K>)> {
    let entry = st.exclusive.start(entry)?;
    let task = match entry.value {
        Task::Once(job) => Runnable::Once(job),
        Task::Watched(job) => Runnable::Watched(job),
        Task::Periodic(job) => {
            let stand_in = Task::StandIn(job.ctl().clone());
            let (Inserted::New { seq } | Inserted::Replaced { seq, .. }) =
                st.pending.insert(entry.key.clone(), NEVER, stand_in);
            job.ctl().set_seq(seq);
            Runnable::Periodic(job)
        }
        Task::StandIn(ctl) => {
            debug_assert!(false, "a stand-in was due");
            let _ = st.pending.insert(entry.key, NEVER, Task::StandIn(ctl));
            return None;
        }
    };
    let started = Started {
        task,
        anon: match entry.key {
            TaskKey::Keyed(_) => None,
            TaskKey::Anon(n) => Some(n),
        },
        shown: None,
        due: entry.due,
        at,
        shrink: false,
    };
    Some((started, entry.key))
}

/// Run one started task, then what the run left (steps 10, 11).
fn execute<K: Key>(shared: &Shared<K>, index: usize, c: Started<K>) {
    let finished = run_started(shared, index, c.task, (c.shown, c.anon), c.due, c.at);
    let exclusive = shared.config.exclusive_keys && c.anon.is_none();
    if matches!(finished, Finished::Done) && !exclusive {
        // Its key stays in the running slot until the next start.
        return;
    }
    after_run(shared, index, finished, exclusive);
}

/// Drop a key (user code) outside every lock, containing its panic.
fn drop_key<K>(shared: &Shared<K>, key: impl Into<Option<TaskKey<K>>>) {
    if let Some(key @ TaskKey::Keyed(_)) = key.into() {
        if let Err(payload) = catch(move || drop(key)) {
            forget_payload(payload);
            shared.counters.contained();
        }
    }
}

/// Run (or, past the staleness tolerance, expire) a started task outside
/// every lock, count the run, and report it to a completion stream.
fn run_started<K: Key>(
    shared: &Shared<K>,
    index: usize,
    task: Runnable,
    (key, anon): (Option<Result<TaskKey<K>, ()>>, Option<u64>),
    due: i64,
    started: Now,
) -> Finished {
    #[cfg(not(feature = "tracing"))]
    let _ = anon; // only traces name keyless tasks by their number
                  // A calendar task's recheck of the wall clock is decided first: it
                  // runs nothing, so it has no tick to be stale for and no span.
    let task = match task {
        Runnable::Periodic(job) => match job.recheck(started.ns) {
            Some(after) => return waited(shared, index, job, after),
            None => Runnable::Periodic(job),
        },
        task => task,
    };
    let reports = shared.reports();
    let ctx = RunCtx {
        due,
        due_at: shared.time.instant_of(due),
        started: started.at,
        started_ns: started.ns,
        keep_panic: reports || cfg!(feature = "tracing"),
    };
    let late = started.ns.saturating_sub(due);
    let stale = shared.config.expire_after.is_some_and(|t| late > t);
    let finish = || shared.time.now();
    #[cfg(feature = "tracing")]
    let span = {
        let key = key.as_ref().and_then(|k| k.as_ref().ok());
        shared.run_span(key, anon, matches!(task, Runnable::Periodic(_)), late)
    }
    .entered();
    let mut panic = None;
    let (ran, finished) = run_task(task, &ctx, stale, &finish, &mut panic);
    let periodic = !matches!(finished, Finished::Done);
    #[cfg(feature = "tracing")]
    {
        shared.trace_ran(ran, panic.as_deref());
        drop(span);
    }
    // Reported before it is counted: a run `settle` sees ended is reported.
    if let (true, Some(key)) = (reports, key) {
        shared.report_run(key, &ctx, ran, panic, periodic);
    }
    shared
        .counters
        .ran(index, (!stale).then_some(late), ran, periodic);
    finished
}

/// Run a started task (or skip it as stale): what it did and what is left
/// to settle; a panic's message goes to `panic` if `ctx` keeps it.
// Always inlined: it is `run_started`'s body, on every run's path; left to
// the compiler it became a call costing about 38 instructions a run in the
// burst (docs/benchmarks.md, "Tracing and the completion stream").
#[inline(always)]
fn run_task(
    task: Runnable,
    ctx: &RunCtx,
    stale: bool,
    finish: &dyn Fn() -> super::time::Now,
    panic: &mut Option<String>,
) -> (Ran, Finished) {
    match task {
        Runnable::Once(mut job) if stale => {
            job.expire(ctx.started);
            (Ran::Expired, Finished::Done)
        }
        Runnable::Once(mut job) => (job.run(ctx, finish, panic), Finished::Done),
        Runnable::Watched(job) if stale => {
            job.expire(ctx.started);
            (Ran::Expired, Finished::Done)
        }
        Runnable::Watched(job) => (job.run(ctx, finish, panic), Finished::Done),
        Runnable::Periodic(mut job) => {
            let (ran, after) = if stale {
                (Ran::Expired, job.expire(ctx))
            } else {
                job.run(ctx, finish)
            };
            if ctx.keep_panic && ran == Ran::Panicked {
                *panic = job.ctl().last_panic();
            }
            (ran, settle_periodic(job, after))
        }
    }
}

/// What a periodic task leaves to settle: put it back, or stop it.
fn settle_periodic(job: Box<PeriodicJob>, after: After) -> Finished {
    match after {
        After::Again(next) => Finished::Again(next, job),
        After::Stop(outcome) => Finished::Stop(job, outcome),
    }
}

/// A calendar task's wake that found the wall clock before its tick
/// ([`Ran::Waited`]): nothing ran, so no span, staleness, report or
/// lateness sample; only its end is counted (the start was), and the entry
/// goes back as `after` says.
#[cold]
fn waited<K: Key>(
    shared: &Shared<K>,
    index: usize,
    job: Box<PeriodicJob>,
    after: After,
) -> Finished {
    shared.counters.ran(index, None, Ran::Waited, true);
    settle_periodic(job, after)
}

/// Steps 10 and 11, under the lock: put a periodic task back (or stop it),
/// release an exclusive key, and notify the leader if either moved the head
/// or emptied a draining pool.
fn after_run<K: Key>(shared: &Shared<K>, index: usize, finished: Finished, exclusive: bool) {
    let mut let_go = Vec::new();
    let (key, leftover) = {
        let mut guard = shared.state.lock();
        let st = &mut *guard;
        // The run's key, out of the running slot its start put it in.
        let Some(key) = shared.holds[index].lock().running.take() else {
            debug_assert!(false, "a settled run had no running key");
            drop(guard);
            return drop_quietly(finished);
        };
        let head = st.pending.peek_due();
        let leftover = put_back(shared, st, &key, finished);
        let put_back_moved = st.pending.peek_due() != head;
        let head = st.pending.peek_due();
        if exclusive {
            let_go = st.exclusive.release(&key, &mut st.pending);
        }
        let release_moved = st.pending.peek_due() != head;
        shared.notify_if_drained(st);
        if put_back_moved || release_moved {
            shared.notify_leader();
        }
        (key, leftover)
    };
    let_go.into_iter().for_each(|k| drop_key(shared, k));
    match leftover {
        Leftover::Nothing => {}
        Leftover::Replaced(old, key) => {
            drop_quietly(old);
            drop_key(shared, key);
        }
        Leftover::Drop(job) => drop_quietly(job),
        Leftover::Finish(job, outcome, stand_in) => {
            drop_quietly(stand_in);
            shared
                .counters
                .stopped(index, matches!(outcome, Outcome::Panicked(_)));
            let last_run = job.ctl().last_run();
            let report = shared.reports().then(|| outcome.clone());
            job.finish(outcome);
            if let Some(outcome) = report {
                shared.report_end(&key, outcome, last_run);
            }
        }
    }
    drop_key(shared, key);
}

/// Step 10: swap a periodic task back in for its stand-in at its next due
/// time, only if the stand-in is still there (same stamp); a task that
/// stops by itself removes its stand-in, if it is still there.
fn put_back<K: Key>(
    shared: &Shared<K>,
    st: &mut State<K>,
    key: &TaskKey<K>,
    finished: Finished,
) -> Leftover<K> {
    match finished {
        Finished::Done => Leftover::Nothing,
        Finished::Again(due, job) => {
            let stand_in = st.pending.get(key).map(|(_, seq)| seq);
            let found = stand_in == Some(job.ctl().seq());
            if !found && !shared.faults.has(Fault::ReinsertWithoutStandInCheck) {
                return Leftover::Drop(job);
            }
            let ctl = job.ctl().clone();
            match st.pending.insert(key.clone(), due, Task::Periodic(job)) {
                Inserted::New { seq } => {
                    ctl.set_seq(seq);
                    Leftover::Nothing
                }
                Inserted::Replaced { seq, old, key, .. } => {
                    ctl.set_seq(seq);
                    Leftover::Replaced(old, key)
                }
            }
        }
        Finished::Stop(job, outcome) => match st.pending.remove_seq(key, job.ctl().seq()) {
            Some(stand_in) => Leftover::Finish(job, outcome, stand_in),
            None => Leftover::Drop(job),
        },
    }
}

#[cfg(test)]
mod tests;
