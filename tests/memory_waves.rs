//! Tests for memory after cancel-all: waves of keyed tasks scheduled far
//! ahead, then all cancelled, in one pool. After each wave's cancel-all
//! the memory the waves added to the process's resident set must fall
//! below a tenth of what they added at that wave's peak, wave after wave,
//! with detached tasks and with a handle per task (dropped at once). (It
//! is measured above the resident memory before the first wave, the test
//! process's own, which a wave small enough for a debug build does not
//! dwarf.)
//!
//! Linux only: resident memory is read from `/proc/self/status`. The
//! handles' wave also needs glibc there: the shared state of each task is
//! an allocation of the process's allocator, which the pool asks glibc to
//! trim after a large drain; other C libraries have no such call (musl's
//! allocator returns memory by itself).
//!
//! Resident memory is the whole process's, so every wave runs from one
//! test function, one scenario after the other: tests of this file running
//! in parallel would see each other's memory.

#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};
use timerpool::TimerPool;

/// Resident memory of this process in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}

/// What one wave's memory did, in KiB above the resident memory before
/// the first wave.
#[derive(Debug)]
struct Wave {
    /// Once every task was scheduled: the highest reading of the wave.
    peak: u64,
    /// After the cancel-all: the lowest reading within the bound, taken
    /// as soon as one fell under a tenth of the peak.
    after: u64,
}

/// Run `waves` waves of `keys` keyed tasks an hour ahead, each followed by
/// a cancel of every key, in one pool.
fn waves(keys: u64, waves: usize, handles: bool) -> Vec<Wave> {
    let pool = TimerPool::<u64>::builder()
        .workers(2)
        .build()
        .expect("a pool");
    let hour = Duration::from_secs(3600);
    let base = rss_kib();
    let added = || rss_kib().saturating_sub(base);
    let mut seen = Vec::new();
    for _ in 0..waves {
        let mut peak = added();
        for k in 0..keys {
            if handles {
                drop(pool.schedule(k, hour, move || k).expect("scheduled"));
            } else {
                pool.schedule_detached(k, hour, move || assert!(k < u64::MAX))
                    .expect("scheduled");
            }
            if k % 16_384 == 0 {
                peak = peak.max(added());
            }
        }
        peak = peak.max(added());
        for k in 0..keys {
            assert!(pool.cancel(&k), "key {k} was pending");
        }
        assert!(pool.is_empty());
        // What the cancels gave up is freed by the cancelling thread or a
        // free worker: wait for it, with a generous bound.
        let bound = Instant::now() + Duration::from_secs(10);
        let mut after = added();
        while after * 10 >= peak && Instant::now() < bound {
            std::thread::sleep(Duration::from_millis(20));
            after = after.min(added());
        }
        seen.push(Wave { peak, after });
    }
    seen
}

#[test]
fn memory_falls_under_a_tenth_of_each_waves_peak_after_cancel_all() {
    // Large enough that a wave's tables and tasks dwarf the test process
    // itself, small enough for a debug build.
    let keys = 250_000;
    let detached = waves(keys, 3, false);
    for (i, w) in detached.iter().enumerate() {
        assert!(
            w.after * 10 < w.peak,
            "detached, wave {}: {} KiB kept after cancel-all of a {} KiB peak: {detached:?}",
            i + 1,
            w.after,
            w.peak
        );
    }
    if cfg!(target_env = "gnu") {
        let handles = waves(keys, 3, true);
        for (i, w) in handles.iter().enumerate() {
            assert!(
                w.after * 10 < w.peak,
                "handles, wave {}: {} KiB kept after cancel-all of a {} KiB peak: {handles:?}",
                i + 1,
                w.after,
                w.peak
            );
        }
    }
}
