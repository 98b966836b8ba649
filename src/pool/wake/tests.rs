//! Tests of the wake policy: batches, the early wake, the budget, deputies.

use super::*;

const US: Duration = Duration::from_micros(1);

/// A frugal plan that has learnt that waits end 50 µs late.
fn learnt() -> WakePlan {
    let mut plan = WakePlan::new(Precision::Frugal, None);
    let t = Instant::now();
    for _ in 0..200 {
        plan.woke(t, t + 50 * US);
    }
    plan
}

/// The batch of the head due at `head` among the pending `dues`.
fn batch_of(precision: Precision, head: i64, dues: &[i64]) -> Batch {
    batch(precision, head, |upto, out| {
        let due: Vec<i64> = dues.iter().copied().filter(|&d| d <= upto).collect();
        let room = out.get_mut(..due.len())?;
        room.copy_from_slice(&due);
        Some(due.len())
    })
}

#[test]
fn a_batch_ends_at_its_last_due_time_before_a_quiet_spell() {
    let us = |n: i64| n * 1_000;
    let gap = nanos(BATCH_GAP);
    // Due times 0, 40 and 90 µs, then nothing for longer than the gap:
    // one wait, for the last of them.
    let dues = [us(90), 0, us(40), us(90) + gap + 1];
    let b = batch_of(Precision::Frugal, 0, &dues);
    assert_eq!(
        b,
        Batch {
            due: us(90),
            lone: false
        }
    );
    // Alone within the gap: its own due time, an isolated one.
    let b = batch_of(Precision::Frugal, 0, &[0, gap + 1]);
    assert_eq!(b, Batch { due: 0, lone: true });
    // Nothing else pending at all.
    assert_eq!(
        batch_of(Precision::Frugal, 7, &[7]),
        Batch { due: 7, lone: true }
    );
}

#[test]
fn a_stream_with_no_quiet_spell_is_waited_for_due_time_by_due_time() {
    let step = nanos(BATCH_GAP) / 2;
    // Due times every half gap for longer than the span: a stream.
    let stream: Vec<i64> = (0..20).map(|i| i * step).collect();
    let b = batch_of(Precision::Frugal, 0, &stream);
    assert_eq!(
        b,
        Batch {
            due: 0,
            lone: false
        }
    );
    // More due within the window than a batch reads: a stream too.
    let crowd = vec![5; BATCH_LOOK + 1];
    assert_eq!(
        batch_of(Precision::Frugal, 5, &crowd),
        Batch {
            due: 5,
            lone: false
        }
    );
    // Precision mode waits for each due time.
    let b = batch_of(Precision::Spin(Duration::from_micros(50)), 0, &[0, 10, 20]);
    assert_eq!(b, Batch { due: 0, lone: true });
}

#[test]
fn only_a_lone_due_time_gets_the_early_wake() {
    let mut plan = learnt();
    let now = Instant::now();
    let due = now + Duration::from_millis(2);
    let Wait::Until { at, .. } = plan.leader_wait(Some(due), false, None, now) else {
        panic!("a timed wait");
    };
    assert_eq!(at, due, "a batch's wait ends at its due time");
    let Wait::Until { at, .. } = plan.leader_wait(Some(due), true, None, now) else {
        panic!("a timed wait");
    };
    assert!(at < due, "a lone due time wakes early");
}

#[test]
fn nothing_to_wait_for_by_the_clock_is_an_untimed_wait() {
    let mut plan = learnt();
    assert_eq!(
        plan.leader_wait(None, true, None, Instant::now()),
        Wait::Untimed
    );
}

#[test]
fn a_sparse_due_time_gets_an_early_wake_and_a_spin_that_ends_at_it() {
    let mut plan = learnt();
    let now = Instant::now();
    let due = now + Duration::from_millis(2);
    let Wait::Until { at, learn: true } = plan.leader_wait(Some(due), true, None, now) else {
        panic!("a timed wait")
    };
    assert!(
        at < due && due - at == plan.early(),
        "ends early by the estimate"
    );
    // At the wake: spin towards the due time, a round at a time.
    let Wait::Spin(until) = plan.leader_wait(Some(due), true, None, at) else {
        panic!("a spin")
    };
    assert_eq!(until, due.min(at + SPIN_ROUND));
    let near = due - 5 * US;
    assert_eq!(
        plan.leader_wait(Some(due), true, None, near),
        Wait::Spin(due)
    );
}

#[test]
fn a_dense_due_time_waits_until_it() {
    let mut plan = learnt();
    let now = Instant::now();
    let due = now + Duration::from_millis(2);
    let last = Some(due - plan.early() * DENSE_GAPS / 2);
    assert!(plan.dense(due, last));
    assert_eq!(
        plan.leader_wait(Some(due), true, last, now),
        Wait::Until {
            at: due,
            learn: true
        }
    );
    let long_ago = Some(due - plan.early() * DENSE_GAPS * 2);
    assert!(!plan.dense(due, long_ago), "further apart: sparse");
}

#[test]
fn the_spin_budget_runs_dry_and_then_the_wait_ends_at_the_due_time() {
    let mut plan = learnt();
    let mut now = Instant::now();
    // Due times 300 µs apart (none started: sparse), each spun for its
    // whole window: spinning a sixth of the time, the budget runs dry.
    let mut spun = 0;
    for _ in 0..100 {
        let due = now + 300 * US;
        match plan.leader_wait(Some(due), true, None, now) {
            Wait::Until { at, .. } if at == due => break,
            Wait::Until { at, .. } => {
                let w = plan.leader_wait(Some(due), true, None, at);
                assert!(matches!(w, Wait::Spin(_)), "{w:?}");
                plan.spun(due);
                spun += 1;
            }
            other => panic!("{other:?}"),
        }
        now = due;
    }
    assert!(spun > 0, "it spun while the budget lasted");
    assert!(spun < 100, "then waited until the due time");
    // A tenth of real time earns a window back.
    let early = plan.early();
    let later = now + early * SPIN_SHARE * 2;
    let due = later + Duration::from_millis(1);
    assert!(matches!(
        plan.leader_wait(Some(due), true, None, later),
        Wait::Until { at, .. } if at == due - early
    ));
}

#[test]
fn relaxed_mode_waits_long_without_a_warm_up() {
    let mut plan = WakePlan::new(Precision::Slack(Duration::from_millis(2)), None);
    let now = Instant::now();
    let far = now + WARM_AFTER * 10;
    assert_eq!(
        plan.leader_wait(Some(far), false, None, now),
        Wait::Until {
            at: far,
            learn: false
        }
    );
}

#[test]
fn a_long_wait_warms_up_and_teaches_nothing() {
    let mut plan = WakePlan::new(Precision::Frugal, None);
    let now = Instant::now();
    let far = now + WARM_AFTER + Duration::from_millis(1);
    assert_eq!(
        plan.leader_wait(Some(far), true, None, now),
        Wait::Until {
            at: far - WARM_AHEAD,
            learn: false
        }
    );
    let short = now + WARM_AFTER;
    assert_eq!(
        plan.leader_wait(Some(short), true, None, now),
        Wait::Until {
            at: short,
            learn: true
        }
    );
}

#[test]
fn precision_mode_spins_its_window_even_on_dense_due_times() {
    let window = Duration::from_micros(300);
    let mut plan = WakePlan::new(Precision::Spin(window), None);
    let now = Instant::now();
    let due = now + Duration::from_millis(1);
    let dense = Some(due - US);
    assert_eq!(
        plan.leader_wait(Some(due), true, dense, now),
        Wait::Until {
            at: due - window,
            learn: true
        }
    );
    assert!(matches!(
        plan.leader_wait(Some(due), true, dense, due - window),
        Wait::Spin(_)
    ));
    assert!(Precision::Spin(window).tight_timers());
    assert!(!Precision::Frugal.tight_timers());
}

#[test]
fn a_prior_gives_the_first_due_time_an_early_wake_and_waits_teach_it_down() {
    assert_eq!(
        WakePlan::new(Precision::Frugal, None).early(),
        Duration::ZERO
    );
    let mut plan = WakePlan::new(Precision::Frugal, Some(50 * US));
    assert_eq!(plan.early(), 100 * US);
    let t = Instant::now();
    for _ in 0..64 {
        plan.woke(t, t);
    }
    assert!(plan.early() < 5 * US, "{:?}", plan.early());
    let capped = WakePlan::new(Precision::Frugal, Some(Duration::from_secs(1)));
    assert_eq!(capped.early(), MAX_EARLY);
}

#[test]
fn long_runs_of_spin_rounds_shrink_the_estimate() {
    let mut plan = WakePlan::new(Precision::Frugal, None);
    let t = Instant::now();
    for _ in 0..200 {
        plan.woke(t, t + Duration::from_secs(1));
    }
    assert_eq!(plan.early(), MAX_EARLY);
    for _ in 0..ROUNDS_PER_DECAY * 100 {
        plan.spun(t);
    }
    assert!(plan.early() < MAX_EARLY / 2, "{:?}", plan.early());
}

#[test]
fn all_free_workers_stand_deputy_up_to_three_just_past_the_due_time() {
    assert_eq!(deputies(1), 0);
    assert_eq!(deputies(2), 1);
    assert_eq!(deputies(3), 2);
    assert_eq!(deputies(4), 3);
    assert_eq!(deputies(64), MAX_DEPUTIES);
}

#[test]
fn deputies_back_up_due_times_closely_only_while_tasks_have_run_long_lately() {
    let ms = 1_000_000;
    // Nothing ran long yet: the short-runs backup, which still bounds the
    // wait behind a first long task.
    assert_eq!(backup(5 * ms, None), SHORT_RUNS_BACKUP);
    assert!(SHORT_RUNS_BACKUP > BACKUP);
    // A run longer than the short-runs backup is long; one as long is not
    // (nor a time slice lent to another thread).
    let b = SHORT_RUNS_BACKUP.as_nanos() as i64;
    assert!(ran_long(0, b + 1));
    assert!(!ran_long(0, b));
    // A long run keeps the backup short for its memory, then not.
    let memory = LONG_RUN_MEMORY.as_nanos() as i64;
    assert_eq!(backup(ms, Some(ms)), BACKUP);
    assert_eq!(backup(ms + memory - 1, Some(ms)), BACKUP);
    assert_eq!(backup(ms + memory, Some(ms)), SHORT_RUNS_BACKUP);
    let due = Instant::now();
    assert_eq!(deputy_until(due, BACKUP), due + BACKUP);
}

#[test]
fn spin_budget_earns_a_tenth_of_real_time_and_pays_only_for_a_whole_window() {
    let t0 = Instant::now();
    let mut b = SpinBudget::default();
    assert!(b.affords(t0, MAX_SAVED));
    b.spend(MAX_SAVED);
    assert!(!b.affords(t0, US), "spent");
    // 1 ms of real time earns 100 µs of spinning, not more.
    let t1 = t0 + Duration::from_millis(1);
    assert!(!b.affords(t1, 101 * US));
    assert!(b.affords(t1, 100 * US));
    assert!(b.affords(t0 + Duration::from_secs(60), MAX_SAVED));
    assert_eq!(b.saved, MAX_SAVED, "saving up stops");
}

#[test]
fn relaxed_mode_waits_until_its_slack_past_the_head_and_keeps_no_deadline_without_one() {
    let slack = Duration::from_micros(700);
    let ns = slack.as_nanos() as i64;
    let no_dues =
        |_: i64, _: &mut [i64]| -> Option<usize> { panic!("relaxed mode reads no due times") };
    let b = batch(Precision::Slack(slack), 1_000, no_dues);
    assert_eq!((b.due, b.lone), (1_000 + ns, false));
    // A head near the end of the clock's range stays a due time; no
    // deadline stays none.
    assert_eq!(
        batch(Precision::Slack(slack), NEVER - 10, no_dues).due,
        NEVER - 1
    );
    assert_eq!(batch(Precision::Slack(slack), NEVER, no_dues).due, NEVER);
    // No spinning and no early wake in relaxed mode.
    assert_eq!(Precision::Slack(slack).window(), Duration::ZERO);
    assert!(!Precision::Slack(slack).tight_timers());
    assert_eq!(Precision::Slack(slack).span(), slack);
}
