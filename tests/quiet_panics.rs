//! Tests for `Builder::quiet_panics`: panics on a quiet pool's workers skip
//! the process's panic hook, every other thread's still reach it. One test
//! only, since the panic hook is the whole process's.

mod common;
use common::*;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use timerpool::{Outcome, TimerPool};

#[test]
fn quiet_pools_keep_their_panics_from_the_hook_and_others_do_not() {
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    std::panic::set_hook(Box::new(move |_| {
        s.fetch_add(1, SeqCst);
    }));
    let quiet = TimerPool::<u64>::builder()
        .workers(2)
        .quiet_panics(true)
        .build()
        .unwrap();
    let loud = TimerPool::<u64>::builder().workers(1).build().unwrap();
    for k in 0..20 {
        let h = quiet
            .schedule(k, Duration::ZERO, || panic!("quiet"))
            .unwrap();
        assert_eq!(done(h), Outcome::Panicked("quiet".to_string()));
    }
    assert_eq!(
        seen.load(SeqCst),
        0,
        "a quiet pool's panic reached the hook"
    );
    let h = loud.schedule(1, Duration::ZERO, || panic!("loud")).unwrap();
    assert_eq!(done(h), Outcome::Panicked("loud".to_string()));
    assert_eq!(
        seen.load(SeqCst),
        1,
        "the other pool's panic skipped the hook"
    );
    let caught = std::panic::catch_unwind(|| panic!("this thread"));
    assert!(caught.is_err());
    assert_eq!(
        seen.load(SeqCst),
        2,
        "the test thread's panic skipped the hook"
    );
    let _ = std::panic::take_hook();
}
