//! A session service on tokio: every client session keeps an idle timeout
//! keyed by its session id. Each request re-arms it (scheduling the key
//! again replaces the pending timeout), a logout cancels it, and a session
//! left idle is expired by the timeout's closure. Client tasks `.await`
//! their timeout handles; a monitor task reacts to the pool's completion
//! stream as timeouts end, without polling any handle.
//!
//! The pool's threads run the timeouts; tokio runs the clients. No task
//! blocks a tokio worker: handles are futures, and the completion stream is
//! a `futures_core::Stream`, which ends once the pool has shut down.
//!
//! ```text
//! cargo run --release --example async_service [-- --sessions N]
//! ```

use futures_core::Stream;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use timerpool::{CompletionKind, CompletionReceiver, Outcome, TimerPool};

/// A session idle this long is expired.
const IDLE: Duration = Duration::from_millis(120);
/// The longest a client waits for its timeout's outcome.
const BOUND: Duration = Duration::from_secs(10);

/// The service's state shared by the sessions and the monitor.
struct Service {
    pool: TimerPool<u64>,
    /// Sessions the idle timeout expired.
    expired: AtomicU64,
}

impl Service {
    /// (Re-)arm `session`'s idle timeout; the previous one, if pending, ends
    /// `Replaced`.
    fn touch(&self, session: u64) -> timerpool::TaskHandle<u64, u64> {
        self.pool
            .schedule(session, IDLE, move || {
                if session % 197 == 13 {
                    // A cleanup bug, to show how a panic is reported.
                    panic!("cleanup of session {session} failed");
                }
                session
            })
            .expect("the pool is running")
    }
}

/// One client: a few requests with pauses, then a logout or silence.
async fn client(service: Arc<Service>, session: u64) -> Outcome<u64> {
    let requests = 1 + session % 4;
    let mut timeout = service.touch(session);
    for r in 0..requests {
        // Think time, shorter than the idle window: the session stays alive.
        tokio::time::sleep(Duration::from_millis(10 + (session * 7 + r * 13) % 40)).await;
        timeout = service.touch(session);
    }
    if session.is_multiple_of(3) {
        // Logout: the timeout never fires.
        service.pool.cancel(&session);
    }
    // Await the latest timeout's outcome, without a thread per wait.
    let outcome = match tokio::time::timeout(BOUND, timeout).await {
        Ok(outcome) => outcome,
        Err(_) => panic!("session {session}: no outcome within {BOUND:?}"),
    };
    if let Outcome::Completed(_) = outcome {
        service.expired.fetch_add(1, Relaxed);
    }
    outcome
}

/// The monitor: reacts to every timeout's end as it happens.
async fn monitor(mut ends: CompletionReceiver<u64>) -> HashMap<&'static str, u64> {
    let mut tally = HashMap::new();
    let mut worst_late = Duration::ZERO;
    // The next record, or `None` once the pool has shut down and sent its
    // last one (`StreamExt::next` from futures-util or tokio-stream does the
    // same).
    while let Some(c) = std::future::poll_fn(|cx| Pin::new(&mut ends).poll_next(cx)).await {
        assert_eq!(c.kind, CompletionKind::OneShot);
        let what = match &c.outcome {
            Outcome::Completed(()) => "expired",
            Outcome::Replaced => "re-armed",
            Outcome::Cancelled => "logged out",
            Outcome::Panicked(msg) => {
                eprintln!("alert: session {:?}: {msg}", c.key);
                "cleanup failed"
            }
            Outcome::Shutdown => "shut down",
            Outcome::Expired => "stale",
        };
        *tally.entry(what).or_insert(0) += 1;
        if let (Some(due), Some(started)) = (c.due, c.started) {
            worst_late = worst_late.max(started.saturating_duration_since(due));
        }
    }
    println!("monitor: latest timeout start {worst_late:?} after its due time");
    tally
}

fn main() {
    let sessions: u64 = std::env::args()
        .skip_while(|a| a != "--sessions")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000);
    let pool = TimerPool::<u64>::builder()
        .workers(2)
        .quiet_panics(true)
        // Room for a burst of ends; a slower monitor would lose records,
        // counted in Stats::completions_dropped, never stall the pool.
        .completions(4_096)
        .build()
        .expect("pool");
    let ends = pool.completions().expect("configured");
    let service = Arc::new(Service {
        pool,
        expired: AtomicU64::new(0),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("tokio");
    let watcher = rt.spawn(monitor(ends));
    let clients: Vec<_> = (0..sessions)
        .map(|s| rt.spawn(client(service.clone(), s)))
        .collect();
    let mut seen: HashMap<&'static str, u64> = HashMap::new();
    rt.block_on(async {
        for c in clients {
            let what = match c.await.expect("client") {
                Outcome::Completed(_) => "expired",
                Outcome::Cancelled => "logged out",
                Outcome::Panicked(_) => "cleanup failed",
                other => panic!("a client's last timeout ended {other:?}"),
            };
            *seen.entry(what).or_insert(0) += 1;
        }
    });
    let stats = service.pool.stats();
    println!(
        "clients: {sessions} sessions, {} expired, {seen:?}",
        service.expired.load(Relaxed)
    );
    // The monitor's stream ends at shutdown, though `service` still holds
    // the pool.
    service.pool.shutdown();
    let tally = rt.block_on(async { watcher.await.expect("monitor") });
    drop(service);
    println!("monitor: {tally:?}");
    println!(
        "pool: {} scheduled, {} replaced, {} records dropped",
        stats.scheduled, stats.replaced, stats.completions_dropped
    );
    for (what, n) in &seen {
        assert_eq!(
            tally.get(what),
            Some(n),
            "monitor and clients disagree on {what}"
        );
    }
    assert_eq!(tally.get("re-armed").copied().unwrap_or(0), stats.replaced);
    assert_eq!(stats.completions_dropped, 0);
}
