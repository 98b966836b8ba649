//! Tests for the completion stream: one record per task's end, for handle
//! and detached tasks alike, periodic runs and ends, tasks removed unrun;
//! the slow-consumer rule (a full channel drops and counts, never blocks);
//! a contained listener panic; and a job runner that reacts to every outcome
//! of 10,000 flaky jobs without polling.

mod common;
use common::*;

use crossbeam_channel::select;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use timerpool::{
    Completion, CompletionKind, Error, ManualClock, Next, OnPanic, Outcome, Repeat, TimerPool,
};

/// A pool on a manual clock with a completion channel of `capacity`.
fn streaming_pool(workers: usize, capacity: usize) -> (ManualClock, TimerPool<&'static str>) {
    let clock = ManualClock::new();
    let pool = TimerPool::builder()
        .workers(workers)
        .clock(clock.clone())
        .quiet_panics(true)
        .completions(capacity)
        .build()
        .unwrap();
    (clock, pool)
}

/// Every record waiting in `rx` (the pool is quiet or joined).
fn drain<K>(rx: &timerpool::CompletionReceiver<K>) -> Vec<Completion<K>> {
    rx.try_iter().collect()
}

#[test]
fn every_kind_of_end_sends_one_record() {
    let (clock, pool) = streaming_pool(2, 64);
    let rx = pool.completions().expect("configured");
    let ran = pool.schedule("ran", Duration::from_secs(1), || 1).unwrap();
    pool.schedule_detached("detached", Duration::from_secs(1), || panic!("boom"))
        .unwrap();
    pool.submit_detached(Duration::from_secs(1), || ()).unwrap();
    pool.schedule_detached("cancelled", Duration::from_secs(60), || ())
        .unwrap();
    assert!(pool.cancel(&"cancelled"));
    let old = pool
        .schedule("replaced", Duration::from_secs(60), || 0)
        .unwrap();
    pool.schedule_detached("replaced", Duration::from_secs(90), || ())
        .unwrap();
    assert_eq!(done(old), Outcome::Replaced);
    clock.advance(Duration::from_secs(1));
    pool.settle(BOUND).unwrap();
    assert_eq!(done(ran), Outcome::Completed(1));

    let mut seen: HashMap<Option<&str>, Completion<&str>> = HashMap::new();
    for r in drain(&rx) {
        assert_eq!(r.kind, CompletionKind::OneShot);
        assert!(seen.insert(r.key, r).is_none(), "two records for one key");
    }
    assert_eq!(seen[&Some("ran")].outcome, Outcome::Completed(()));
    let boom = &seen[&Some("detached")];
    assert_eq!(boom.outcome, Outcome::Panicked("boom".into()));
    let (due, started, finished) = (
        boom.due.unwrap(),
        boom.started.unwrap(),
        boom.finished.unwrap(),
    );
    assert!(due <= started && started <= finished, "{boom:?}");
    assert_eq!(seen[&None].outcome, Outcome::Completed(()));
    assert_eq!(seen[&Some("cancelled")].outcome, Outcome::Cancelled);
    assert_eq!(seen[&Some("cancelled")].started, None);
    assert_eq!(seen[&Some("replaced")].outcome, Outcome::Replaced);
    assert_eq!(seen.len(), 5);

    // The replacement is still pending: shutdown_now removes it.
    assert_eq!(pool.shutdown_now(), vec!["replaced"]);
    let rest = drain(&rx);
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].key, Some("replaced"));
    assert_eq!(rest[0].outcome, Outcome::Shutdown);
    assert_eq!(pool.stats().completions_dropped, 0);
}

#[test]
fn a_stale_task_is_reported_expired() {
    let clock = ManualClock::new();
    let pool = TimerPool::<u8>::builder()
        .workers(1)
        .clock(clock.clone())
        .expire_after(Duration::from_millis(10))
        .completions(8)
        .build()
        .unwrap();
    let rx = pool.completions().unwrap();
    pool.schedule_detached(1, Duration::from_secs(1), || ())
        .unwrap();
    clock.advance(Duration::from_secs(2));
    pool.settle(BOUND).unwrap();
    let r = rx.recv_timeout(BOUND).unwrap();
    assert_eq!(
        (r.key, r.outcome, r.started),
        (Some(1), Outcome::Expired, None)
    );
}

#[test]
fn periodic_runs_and_the_end_are_reported() {
    let (clock, pool) = streaming_pool(1, 64);
    let rx = pool.completions().unwrap();
    let runs = AtomicU32::new(0);
    let h = pool
        .schedule_dynamic(
            "beat",
            Duration::from_secs(1),
            Repeat::fixed_delay(Duration::from_secs(1)).on_panic(OnPanic::Continue),
            move || match runs.fetch_add(1, SeqCst) {
                0 => Next::OnSchedule,
                1 => panic!("second beat"),
                _ => Next::Stop,
            },
        )
        .unwrap();
    for _ in 0..3 {
        clock.advance(Duration::from_secs(1));
        pool.settle(BOUND).unwrap();
    }
    assert_eq!(h.wait_timeout(BOUND).ok().unwrap(), Outcome::Completed(()));
    pool.shutdown();
    let got: Vec<(CompletionKind, Outcome<()>)> = drain(&rx)
        .into_iter()
        .map(|r| (r.kind, r.outcome))
        .collect();
    use CompletionKind::*;
    assert_eq!(
        got,
        vec![
            (PeriodicRun, Outcome::Completed(())),
            (PeriodicRun, Outcome::Panicked("second beat".into())),
            (PeriodicRun, Outcome::Completed(())),
            (PeriodicEnd, Outcome::Completed(())),
        ]
    );
}

#[test]
fn a_periodic_task_stopped_by_shutdown_ends_once() {
    let (_clock, pool) = streaming_pool(1, 8);
    let rx = pool.completions().unwrap();
    let h = pool
        .schedule_repeating(
            "tick",
            Duration::from_secs(1),
            Repeat::fixed_rate(Duration::from_secs(1)),
            || (),
        )
        .unwrap();
    pool.shutdown();
    assert_eq!(h.wait_timeout(BOUND).ok().unwrap(), Outcome::Shutdown);
    let got = drain(&rx);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].kind, CompletionKind::PeriodicEnd);
    assert_eq!(got[0].outcome, Outcome::Shutdown);
}

#[test]
fn a_full_channel_drops_and_counts_and_never_blocks_a_worker() {
    let (clock, pool) = streaming_pool(2, 4);
    let rx = pool.completions().unwrap();
    for _ in 0..10 {
        pool.submit_detached(Duration::from_secs(1), || ()).unwrap();
    }
    clock.advance(Duration::from_secs(1));
    // Nobody reads: the workers still finish every task.
    pool.settle(BOUND).unwrap();
    let s = pool.stats();
    assert_eq!(s.completed, 10);
    assert_eq!(s.completions_dropped, 6);
    assert_eq!(rx.len(), 4, "the channel holds its capacity");
    // Once the consumer catches up, records flow again.
    assert_eq!(drain(&rx).len(), 4);
    pool.submit_detached(Duration::ZERO, || ()).unwrap();
    assert!(rx.recv_timeout(BOUND).is_ok());
    assert_eq!(pool.stats().completions_dropped, 6);
}

#[test]
fn a_consumer_that_cancels_cannot_deadlock_on_a_full_channel() {
    let (_clock, pool) = streaming_pool(1, 1);
    let rx = pool.completions().unwrap();
    pool.schedule_detached("a", Duration::from_secs(60), || ())
        .unwrap();
    pool.schedule_detached("b", Duration::from_secs(60), || ())
        .unwrap();
    // The consumer's own cancels fill the channel; the second one returns.
    assert!(pool.cancel(&"a"));
    assert!(pool.cancel(&"b"));
    assert_eq!(rx.recv_timeout(BOUND).unwrap().key, Some("a"));
    assert_eq!(pool.stats().completions_dropped, 1);
}

#[test]
fn a_listener_sees_every_end_and_its_panic_is_contained() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let clock = ManualClock::new();
    let pool = TimerPool::<u32>::builder()
        .workers(2)
        .clock(clock.clone())
        .quiet_panics(true)
        .completions(16)
        .on_completion(move |c: &Completion<u32>| {
            log.lock().unwrap().push((c.key, c.outcome.clone()));
            if c.key == Some(13) {
                panic!("unlucky listener");
            }
        })
        .build()
        .unwrap();
    let rx = pool.completions().unwrap();
    for k in 10..15 {
        pool.schedule_detached(k, Duration::from_secs(1), || ())
            .unwrap();
    }
    clock.advance(Duration::from_secs(1));
    pool.settle(BOUND).unwrap();
    let mut keys: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(k, _)| k.unwrap())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, vec![10, 11, 12, 13, 14]);
    // The channel still got the record whose listener call panicked.
    assert_eq!(drain(&rx).len(), 5);
    let s = pool.stats();
    assert_eq!((s.completed, s.contained_panics), (5, 1));
}

#[test]
fn the_channel_works_in_select() {
    let (clock, pool) = streaming_pool(1, 8);
    let done = pool.completions().unwrap();
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(1);
    pool.schedule_detached("job", Duration::from_secs(1), || ())
        .unwrap();
    clock.advance(Duration::from_secs(1));
    select! {
        recv(done.as_crossbeam()) -> r => assert_eq!(r.unwrap().key, Some("job")),
        recv(stop_rx) -> _ => panic!("stopped"),
        default(BOUND) => panic!("no record within {BOUND:?}"),
    }
    drop(stop_tx);
}

#[test]
fn without_a_stream_there_is_no_receiver_and_a_zero_capacity_is_refused() {
    let pool = TimerPool::<u8>::builder().workers(1).build().unwrap();
    assert!(pool.completions().is_none());
    let err = TimerPool::<u8>::builder()
        .workers(1)
        .completions(0)
        .build()
        .unwrap_err();
    assert_eq!(err, Error::ZeroCapacity);
}

/// A job runner: 10,000 flaky jobs, each retried until it succeeds, driven
/// only by the completion channel (a blocking `recv`, no sweep of handles).
/// In flight (pending jobs plus unread records) never exceeds the number of
/// jobs, so a channel of that capacity can never drop a record.
#[test]
fn a_runner_reacts_to_every_outcome_of_ten_thousand_flaky_jobs() {
    const JOBS: u32 = 10_000;
    let pool = TimerPool::<u32>::builder()
        .workers(2)
        .quiet_panics(true)
        .completions(JOBS as usize)
        .build()
        .unwrap();
    let done = pool.completions().unwrap();
    let attempts: Arc<Vec<AtomicU32>> = Arc::new((0..JOBS).map(|_| AtomicU32::new(0)).collect());
    let job = |id: u32, attempts: Arc<Vec<AtomicU32>>| {
        move || {
            // Every job fails its first two attempts, and every third job a
            // third time.
            let n = attempts[id as usize].fetch_add(1, SeqCst);
            if n < 2 || (id.is_multiple_of(3) && n < 3) {
                panic!("flaky job {id} attempt {n}");
            }
        }
    };
    for id in 0..JOBS {
        pool.schedule_detached(id, Duration::ZERO, job(id, attempts.clone()))
            .unwrap();
    }
    let (mut succeeded, mut retries) = (0u32, 0usize);
    while succeeded < JOBS {
        let r = done.recv_timeout(BOUND).expect("a record within the bound");
        let id = r.key.expect("keyed");
        match r.outcome {
            Outcome::Completed(()) => succeeded += 1,
            Outcome::Panicked(msg) => {
                assert!(msg.starts_with(&format!("flaky job {id} ")), "{msg}");
                retries += 1;
                pool.schedule_detached(id, Duration::from_millis(1), job(id, attempts.clone()))
                    .unwrap();
            }
            other => panic!("job {id}: {other:?}"),
        }
    }
    assert_eq!(retries, 2 * JOBS as usize + (JOBS as usize).div_ceil(3));
    // A run is reported before it is counted: join the workers to read
    // final counters.
    pool.shutdown();
    let s = pool.stats();
    assert_eq!(s.completions_dropped, 0);
    assert_eq!(s.completed, u64::from(JOBS));
    let runs: usize = attempts.iter().map(|a| a.load(SeqCst) as usize).sum();
    assert_eq!(runs, JOBS as usize + retries);
    assert!(done.try_recv().is_err(), "a record for a job already done");
}

/// A key whose `Clone` panics once `BAD_CLONES` is set.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Fragile(u32);

static BAD_CLONES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Clone for Fragile {
    fn clone(&self) -> Self {
        if BAD_CLONES.load(SeqCst) && self.0 == 2 {
            panic!("cannot clone key {}", self.0);
        }
        Fragile(self.0)
    }
}

#[test]
fn a_key_whose_clone_panics_loses_only_its_record() {
    let clock = ManualClock::new();
    let pool = TimerPool::<Fragile>::builder()
        .workers(1)
        .clock(clock.clone())
        .quiet_panics(true)
        .completions(8)
        .build()
        .unwrap();
    let rx = pool.completions().unwrap();
    let h1 = pool
        .schedule(Fragile(1), Duration::from_secs(1), || 1)
        .unwrap();
    let h2 = pool
        .schedule(Fragile(2), Duration::from_secs(1), || 2)
        .unwrap();
    BAD_CLONES.store(true, SeqCst);
    clock.advance(Duration::from_secs(1));
    assert_eq!(done(h1), Outcome::Completed(1));
    assert_eq!(
        done(h2),
        Outcome::Completed(2),
        "the task itself is unharmed"
    );
    pool.settle(BOUND).unwrap();
    let keys: Vec<_> = drain(&rx).into_iter().map(|r| r.key).collect();
    assert_eq!(keys, vec![Some(Fragile(1))]);
    let s = pool.stats();
    assert_eq!((s.completions_dropped, s.contained_panics), (1, 1));
}

#[test]
fn a_listener_may_call_the_pool() {
    // The listener reads the pool (which takes its lock): it would deadlock
    // if it ran under the lock.
    let pool_cell: Arc<std::sync::OnceLock<std::sync::Weak<TimerPool<u8>>>> = Arc::default();
    let lens = Arc::new(Mutex::new(Vec::new()));
    let (cell, seen) = (pool_cell.clone(), lens.clone());
    let pool = Arc::new(
        TimerPool::<u8>::builder()
            .workers(1)
            .on_completion(move |_| {
                if let Some(pool) = cell.get().and_then(|w| w.upgrade()) {
                    seen.lock().unwrap().push(pool.len());
                }
            })
            .build()
            .unwrap(),
    );
    pool_cell.set(Arc::downgrade(&pool)).unwrap();
    let far = pool.schedule(9, Duration::from_secs(60), || ()).unwrap();
    let now = pool.schedule(1, Duration::ZERO, || ()).unwrap();
    assert_eq!(done(now), Outcome::Completed(()));
    pool.settle(BOUND).unwrap();
    assert_eq!(*lens.lock().unwrap(), vec![1], "the far task was pending");
    assert!(far.cancel());
    assert_eq!(*lens.lock().unwrap(), vec![1, 0]);
}

/// Clones of keys the pool made while it ran 4 keyed detached tasks, and
/// while it cancelled a fifth, with or without a completion channel.
fn key_clones(stream: bool) -> (u32, u32) {
    let clones = Arc::new(AtomicU32::new(0));
    let clock = ManualClock::new();
    let mut builder = TimerPool::<Counted>::builder()
        .workers(1)
        .clock(clock.clone());
    if stream {
        builder = builder.completions(16);
    }
    let pool = builder.build().unwrap();
    for k in 0..4 {
        let key = Counted(k, clones.clone());
        pool.schedule_detached(key, Duration::from_secs(1), || ())
            .unwrap();
    }
    let far = Counted(9, clones.clone());
    pool.schedule_detached(Counted(9, clones.clone()), Duration::from_secs(60), || ())
        .unwrap();
    let before = clones.load(SeqCst);
    clock.advance(Duration::from_secs(1));
    pool.settle(BOUND).unwrap();
    let runs = clones.load(SeqCst) - before;
    let before = clones.load(SeqCst);
    assert!(pool.cancel(&far));
    (runs, clones.load(SeqCst) - before)
}

#[test]
fn keys_are_cloned_only_for_a_configured_stream() {
    let (runs, cancel) = key_clones(false);
    assert_eq!(runs, 0, "no stream: running clones no key");
    let (runs_streamed, cancel_streamed) = key_clones(true);
    assert_eq!(runs_streamed, 4, "one clone per record");
    assert_eq!(cancel_streamed, cancel + 1, "one clone for the record");
}

#[test]
fn iterating_the_receiver_ends_when_the_pool_is_dropped() {
    let (_clock, pool) = streaming_pool(1, 8);
    let rx = pool.completions().unwrap();
    let kept = pool
        .schedule("kept", Duration::from_secs(60), || 1)
        .unwrap();
    let (tx, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(rx.iter().collect::<Vec<_>>()));
    drop(pool);
    // The handle is still held: it does not keep the stream open.
    let records = ended.recv_timeout(BOUND).expect("the iteration ended");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, Outcome::Shutdown);
    assert_eq!(done(kept), Outcome::Shutdown);
}
