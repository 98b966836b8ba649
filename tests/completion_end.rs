//! Tests for the end of the completion stream: the receiver, blocking or
//! polled as a `Stream` in tokio, ends once the pool has shut down and its
//! last record was sent, while the pool itself is still held; no record is
//! lost to the end, whichever thread ends the last task.

mod common;
use common::*;

use futures_core::{FusedStream, Stream};
use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use timerpool::{Completion, CompletionKind, CompletionReceiver, Outcome, Repeat, TimerPool};

/// The next item of `s`, as `StreamExt::next` would give it.
async fn next<S: Stream + Unpin>(s: &mut S) -> Option<S::Item> {
    std::future::poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
}

/// Every record of `s` until it ends, each wait bounded by [`BOUND`].
async fn collect<K>(s: &mut CompletionReceiver<K>) -> Vec<Completion<K>> {
    let mut all = Vec::new();
    loop {
        match tokio::time::timeout(BOUND, next(s)).await {
            Ok(Some(c)) => all.push(c),
            Ok(None) => return all,
            Err(_) => panic!("the stream neither yielded nor ended within {BOUND:?}"),
        }
    }
}

/// Every record of `rx` until it ends, read on a thread of its own; the
/// receiver gets them once the iteration ended.
fn collect_blocking(
    rx: CompletionReceiver<u64>,
) -> std::sync::mpsc::Receiver<Vec<Completion<u64>>> {
    let (tx, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(rx.into_iter().collect::<Vec<_>>()));
    ended
}

/// A pool with a completion channel of `capacity`, shared as a service
/// shares it.
fn shared_pool(workers: usize, capacity: usize) -> Arc<TimerPool<u64>> {
    let pool = TimerPool::builder()
        .workers(workers)
        .quiet_panics(true)
        .completions(capacity)
        .build()
        .unwrap();
    Arc::new(pool)
}

/// The keys of the final (`OneShot`, `PeriodicEnd`) records, each once.
fn final_keys(records: &[Completion<u64>]) -> HashSet<u64> {
    let mut keys = HashSet::new();
    for r in records
        .iter()
        .filter(|r| r.kind != CompletionKind::PeriodicRun)
    {
        let k = r.key.expect("keyed");
        assert!(keys.insert(k), "two final records for {k}");
    }
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_ends_in_tokio_after_shutdown_while_the_pool_is_still_held() {
    let pool = shared_pool(2, 1024);
    let mut stream = pool.completions().unwrap();
    let consumer = tokio::spawn(async move {
        let records = collect(&mut stream).await;
        (records, stream.is_terminated())
    });
    let handles: Vec<_> = (0..100)
        .map(|k| pool.schedule(k, Duration::ZERO, move || k).unwrap())
        .collect();
    for (k, h) in (0..).zip(handles) {
        assert_eq!(h.await, Outcome::Completed(k));
    }
    // Due in a minute: a graceful shutdown waits for it; a shutdown now
    // removes it.
    pool.schedule_detached(100, Duration::from_secs(60), || ())
        .unwrap();
    let service = pool.clone(); // still held while the stream ends
    let removed = tokio::task::spawn_blocking(move || service.shutdown_now())
        .await
        .unwrap();
    assert_eq!(removed, vec![100]);
    let (records, terminated) = tokio::time::timeout(BOUND, consumer)
        .await
        .expect("the stream ended")
        .unwrap();
    assert_eq!(final_keys(&records), (0..=100).collect());
    let last = records.iter().find(|r| r.key == Some(100)).unwrap();
    assert_eq!(last.outcome, Outcome::Shutdown);
    assert!(terminated, "a fused stream knows it ended");
    assert!(Arc::strong_count(&pool) == 1 && pool.is_terminated());
}

#[tokio::test]
async fn a_stream_waiting_for_a_record_is_woken_by_the_end() {
    let pool = shared_pool(1, 16);
    let mut stream = pool.completions().unwrap();
    // Polled while nothing can come: the consumer waits on its waker.
    let waiting = tokio::spawn(async move { next(&mut stream).await.map(|c| c.key) });
    tokio::task::yield_now().await;
    pool.begin_shutdown(); // no await_termination: the last worker ends it
    let got = tokio::time::timeout(BOUND, waiting).await.expect("woken");
    assert_eq!(got.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_share_the_records_and_all_see_the_end() {
    let pool = shared_pool(2, 1024);
    let streams: Vec<_> = (0..3).map(|_| pool.completions().unwrap()).collect();
    let consumers: Vec<_> = streams
        .into_iter()
        .map(|mut s| tokio::spawn(async move { collect(&mut s).await }))
        .collect();
    for k in 0..300 {
        pool.schedule_detached(k, Duration::ZERO, || ()).unwrap();
    }
    let service = pool.clone();
    tokio::task::spawn_blocking(move || service.shutdown())
        .await
        .unwrap();
    let mut all = Vec::new();
    for c in consumers {
        all.extend(
            tokio::time::timeout(BOUND, c)
                .await
                .expect("ended")
                .unwrap(),
        );
    }
    assert_eq!(all.len(), 300, "each record went to one receiver");
    assert_eq!(final_keys(&all), (0..300).collect());
}

#[test]
fn the_blocking_receiver_ends_after_a_graceful_shutdown_while_the_pool_is_held() {
    let pool = shared_pool(2, 1024);
    let ended = collect_blocking(pool.completions().unwrap());
    for k in 0..50 {
        pool.schedule_detached(k, Duration::from_millis(k % 5), || ())
            .unwrap();
    }
    let service = pool.clone();
    service.shutdown(); // runs what is pending, then joins the workers
    let records = ended.recv_timeout(BOUND).expect("the iteration ended");
    assert_eq!(final_keys(&records), (0..50).collect());
    assert!(records.iter().all(|r| r.outcome == Outcome::Completed(())));
    assert_eq!(Arc::strong_count(&pool), 2, "the pool is still held");
}

#[test]
fn a_periodic_task_stopped_by_a_graceful_shutdown_is_reported_before_the_end() {
    // The shutdown removes the periodic task on the caller's thread; the
    // workers, with nothing left, may exit before that record is sent: it
    // must still come before the end. Repeated, since it is a race.
    for round in 0..50 {
        let pool = shared_pool(2, 64);
        let ended = collect_blocking(pool.completions().unwrap());
        let every = Repeat::fixed_rate(Duration::from_secs(3600));
        let tick = pool
            .schedule_repeating(round, Duration::from_secs(3600), every, || {})
            .unwrap();
        pool.begin_shutdown();
        let records = ended.recv_timeout(BOUND).expect("the iteration ended");
        assert_eq!(
            final_keys(&records),
            HashSet::from([round]),
            "round {round}"
        );
        assert_eq!(records[0].kind, CompletionKind::PeriodicEnd);
        assert_eq!(done_periodic(tick), Outcome::Shutdown);
    }
}

/// A periodic handle's final outcome within [`BOUND`].
fn done_periodic<K: std::hash::Hash + Eq + Clone + Send + 'static>(
    h: timerpool::PeriodicHandle<K>,
) -> Outcome<()> {
    h.wait_timeout(BOUND)
        .unwrap_or_else(|_| panic!("no outcome within {BOUND:?}"))
}

#[test]
fn dropping_the_pool_reports_every_removed_task_before_the_end() {
    for round in 0..20 {
        let pool = TimerPool::<u64>::builder()
            .workers(2)
            .completions(256)
            .build()
            .unwrap();
        let ended = collect_blocking(pool.completions().unwrap());
        for k in 0..100 {
            pool.schedule_detached(k, Duration::from_secs(60), || ())
                .unwrap();
        }
        drop(pool);
        let records = ended.recv_timeout(BOUND).expect("the iteration ended");
        assert_eq!(final_keys(&records), (0..100).collect(), "round {round}");
        assert!(records.iter().all(|r| r.outcome == Outcome::Shutdown));
    }
}

#[test]
fn cancels_racing_a_graceful_shutdown_lose_no_record_to_the_end() {
    // Callers cancel the last pending tasks while the pool drains: a
    // cancel's record is sent on its caller's thread after the workers may
    // have exited, and must still come before the end.
    for round in 0..20 {
        let pool = shared_pool(2, 1024);
        let ended = collect_blocking(pool.completions().unwrap());
        let n = 200u64;
        for k in 0..n {
            pool.schedule_detached(k, Duration::from_secs(60), || ())
                .unwrap();
        }
        let cancellers: Vec<_> = (0..2)
            .map(|part| {
                let pool = pool.clone();
                std::thread::spawn(move || {
                    (0..n)
                        .filter(|k| k % 2 == part)
                        .filter(|k| pool.cancel(k))
                        .count()
                })
            })
            .collect();
        pool.begin_shutdown();
        let cancelled: usize = cancellers.into_iter().map(|c| c.join().unwrap()).sum();
        // What no canceller reached runs at its due time: end it now.
        let removed = pool.shutdown_now();
        assert_eq!(cancelled + removed.len(), n as usize, "round {round}");
        let records = ended.recv_timeout(BOUND).expect("the iteration ended");
        assert_eq!(final_keys(&records), (0..n).collect(), "round {round}");
        let cancels = records
            .iter()
            .filter(|r| r.outcome == Outcome::Cancelled)
            .count();
        assert_eq!(cancels, cancelled, "round {round}");
    }
}

#[test]
fn a_receiver_taken_after_the_end_reads_what_is_left_then_ends() {
    let pool = shared_pool(1, 16);
    let early = pool.completions().unwrap();
    pool.schedule(1, Duration::ZERO, || ()).unwrap().wait();
    pool.shutdown();
    let late = pool.completions().unwrap();
    assert!(late.is_ended() && early.is_ended());
    assert_eq!(late.recv().unwrap().key, Some(1));
    assert!(late.recv().is_err() && early.recv().is_err());
    assert_eq!(pool.stats().completions_dropped, 0);
}
