//! Replace and cancel racing claims: producers schedule keys due within a
//! few milliseconds and at once replace or cancel some, so the operations
//! meet claims in flight; then every outcome is checked. The blocking and
//! the async node both pass it.

use super::{client, live, outcome_counts, wait_until};
use std::collections::HashSet;
use std::time::Duration;
use timerpool_pg::{NewTask, Queue};

/// What one racing client did.
#[derive(Debug, Default)]
pub struct Tally {
    pub scheduled: usize,
    pub replaced: usize,
    pub cancelled: usize,
    pub lost_cancels: usize,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.scheduled += o.scheduled;
        self.replaced += o.replaced;
        self.cancelled += o.cancelled;
        self.lost_cancels += o.lost_cancels;
    }
}

/// Schedules keys due within a few ms and immediately replaces or cancels
/// some, so the operations meet claims in flight.
fn race(q: &Queue, thread: usize, keys: usize) -> Tally {
    let mut c = client();
    let mut t = Tally::default();
    for i in 0..keys {
        let key = format!("t{thread}-{}", i % 10);
        let due = Duration::from_millis((i % 7 * 15) as u64);
        let s = q
            .schedule(&mut c, &NewTask::new(key.clone(), "h").after(due))
            .unwrap();
        t.scheduled += 1;
        t.replaced += usize::from(s.replaced);
        if i % 3 == 0 {
            // A key scheduled a few statements ago: pending or just claimed.
            let older = format!("t{thread}-{}", (i + 7) % 10);
            if q.cancel(&mut c, &older).unwrap() {
                t.cancelled += 1;
            } else {
                t.lost_cancels += 1;
            }
        }
    }
    t
}

/// Three producers race 200 schedules each (and cancels) on queue `q`
/// of `schema`, in rounds until the race went both ways (a minute at
/// most), served by nodes whose handler "h" logs each run's task
/// id; `ran` reads that log. Every schedule must end in one outcome, only
/// completed tasks may have run, each once, and the race must be shown to
/// have happened both ways (replaced and cancelled pending tasks, and
/// cancels that came too late).
pub fn replace_and_cancel_race(q: &Queue, schema: &str, ran: impl Fn() -> Vec<i64>) {
    const KEYS: usize = 200;
    let mut c = client();
    let mut totals = Tally::default();
    // Whether a replace or cancel meets a pending or a claimed task
    // depends on how fast the schedules go: on a loaded machine a round
    // can miss one way, so rounds repeat until both ways were seen.
    let exercised = |t: &Tally| t.cancelled > 0 && t.replaced > 0 && t.lost_cancels > 0;
    let _ = wait_until(Duration::from_secs(60), || {
        let racers: Vec<_> = (0..3)
            .map(|t| {
                let q = q.clone();
                std::thread::spawn(move || race(&q, t, KEYS))
            })
            .collect();
        for r in racers {
            totals.add(&r.join().unwrap());
        }
        exercised(&totals)
    });
    assert!(wait_until(Duration::from_secs(30), || live(
        &mut c, schema, "q"
    ) == 0));
    let counts = outcome_counts(&mut c, schema, "q");
    let count = |k: &str| counts.get(k).copied().unwrap_or(0) as usize;
    // Every schedule created one task and every task has one outcome.
    assert_eq!(count("replaced"), totals.replaced);
    assert_eq!(count("cancelled"), totals.cancelled);
    assert_eq!(
        count("completed") + count("replaced") + count("cancelled"),
        totals.scheduled
    );
    let known = ["completed", "replaced", "cancelled"];
    assert!(
        counts.keys().all(|k| known.contains(&k.as_str())),
        "{counts:?}"
    );
    // Only completed tasks ran, each once.
    let runs = ran();
    let ran: HashSet<i64> = runs.iter().copied().collect();
    assert_eq!(ran.len(), runs.len(), "a task ran twice");
    let unrun: HashSet<i64> = c
        .query(
            &format!("SELECT id FROM {schema}.outcomes WHERE outcome <> 'completed'"),
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(ran.is_disjoint(&unrun), "a cancelled or replaced task ran");
    assert_eq!(ran.len(), count("completed"));
    assert!(exercised(&totals), "the race was not exercised: {totals:?}");
}
