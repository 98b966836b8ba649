//! Shared pieces of the benchmark suite: the workloads, the pools under test,
//! the naive baseline and small measuring helpers. Each bench binary and
//! `benches/tools/src/bin/bench_report.rs` include this module and use a part of it.
#![allow(dead_code)] // each binary uses a different subset

pub mod naive;
pub mod pools;
pub mod session;
pub mod workloads;

use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

/// The counting allocator; a binary that reports memory installs it with
/// `#[global_allocator] static A: &StatsAlloc<System> = common::COUNTING;`.
pub static COUNTING: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Live heap bytes as counted by [`COUNTING`] (zero unless installed);
/// `realloc` growth is already in `bytes_allocated`, shrinkage in
/// `bytes_deallocated`.
pub fn live_bytes() -> i64 {
    let s = INSTRUMENTED_SYSTEM.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

/// A bijective scramble of a counter (the splitmix64 finalizer): keys that
/// look random, as real ids do, so no structure profits from sequential keys.
pub fn scramble(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Voluntary plus involuntary context switches of the process's live
/// threads, the calling (measuring) thread excluded.
pub fn ctx_switches() -> u64 {
    let me = std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_owned()));
    let mut total = 0;
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    for t in dir.flatten() {
        if Some(t.file_name()) == me {
            continue;
        }
        let Ok(s) = std::fs::read_to_string(t.path().join("status")) else {
            continue;
        };
        for line in s.lines() {
            if line.starts_with("voluntary_ctxt_switches")
                || line.starts_with("nonvoluntary_ctxt_switches")
            {
                total += line
                    .split_whitespace()
                    .last()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    total
}
