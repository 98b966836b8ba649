//! Resident memory over waves of schedule-then-cancel-all in one pool:
//! each wave schedules N keyed tasks an hour ahead, then cancels every
//! key; the process's resident set (`VmRSS`) is read before the wave,
//! once the wave is scheduled (its peak) and for a while after its
//! cancel-all.
//!
//! ```sh
//! cargo run --release -p timerpool-bench-tools --bin memory_waves -- \
//!     --keys 2000000 --waves 4 [--handles] [--settle-ms 2000]
//! # the same under jemalloc or mimalloc, as a service would link them:
//! cargo run --release -p timerpool-bench-tools --features jemalloc --bin memory_waves
//! cargo run --release -p timerpool-bench-tools --features mimalloc --bin memory_waves
//! ```
//!
//! `--handles` schedules each task with a handle and drops the handle at
//! once; without it tasks are detached. Linux only (it reads
//! `/proc/self/status`).

#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use cpu_time::ProcessTime;
use std::time::{Duration, Instant};
use timerpool::TimerPool;

/// Resident memory of this process in KiB, from `/proc/self/status`.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

struct Args {
    keys: u64,
    waves: usize,
    handles: bool,
    settle: Duration,
    workers: usize,
}

fn args() -> Args {
    let mut a = Args {
        keys: 2_000_000,
        waves: 4,
        handles: false,
        settle: Duration::from_millis(2000),
        workers: 2,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || -> u64 {
            let v = it.next().unwrap_or_else(|| panic!("{flag} takes a value"));
            v.parse()
                .unwrap_or_else(|_| panic!("{flag}: not a number: {v}"))
        };
        match flag.as_str() {
            "--keys" => a.keys = value(),
            "--waves" => a.waves = value() as usize,
            "--settle-ms" => a.settle = Duration::from_millis(value()),
            "--workers" => a.workers = value() as usize,
            "--handles" => a.handles = true,
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

fn main() {
    let a = args();
    let allocator = if cfg!(feature = "jemalloc") {
        "jemalloc"
    } else if cfg!(feature = "mimalloc") {
        "mimalloc"
    } else {
        "system"
    };
    let pool = TimerPool::<u64>::builder()
        .workers(a.workers)
        .build()
        .expect("a pool");
    let hour = Duration::from_secs(3600);
    let base = rss_kib();
    println!(
        "memory_waves: {} keys a wave, {} waves, {}, {} allocator, {} workers; empty pool {:.1} MiB",
        a.keys,
        a.waves,
        if a.handles { "a handle per task, dropped at once" } else { "detached" },
        allocator,
        a.workers,
        mib(base)
    );
    println!("wave  before MiB  peak MiB  after MiB (+0.3 s)  after MiB (+settle)  after/peak  kept of growth   schedule: wall s, CPU s, slowest call ms; cancel: the same");
    for wave in 1..=a.waves {
        let before = rss_kib();
        let mut peak = before;
        let (t0, cpu0) = (Instant::now(), ProcessTime::now());
        let mut slowest_schedule = Duration::ZERO;
        for k in 0..a.keys {
            let call = Instant::now();
            if a.handles {
                let h = pool.schedule(k, hour, move || k).expect("scheduled");
                drop(h);
            } else {
                pool.schedule_detached(k, hour, move || {
                    std::hint::black_box(k);
                })
                .expect("scheduled");
            }
            slowest_schedule = slowest_schedule.max(call.elapsed());
            if k % 65_536 == 0 {
                peak = peak.max(rss_kib());
            }
        }
        peak = peak.max(rss_kib());
        let (scheduled, scheduled_cpu) = (t0.elapsed(), cpu0.elapsed());
        let (t1, cpu1) = (Instant::now(), ProcessTime::now());
        let mut slowest_cancel = Duration::ZERO;
        for k in 0..a.keys {
            let call = Instant::now();
            assert!(pool.cancel(&k), "key {k} was pending");
            slowest_cancel = slowest_cancel.max(call.elapsed());
        }
        let (cancelled, cancelled_cpu) = (t1.elapsed(), cpu1.elapsed());
        assert!(pool.is_empty());
        let t2 = Instant::now();
        let mut early = None;
        let mut after = rss_kib();
        while t2.elapsed() < a.settle {
            std::thread::sleep(Duration::from_millis(50));
            after = rss_kib();
            if early.is_none() && t2.elapsed() >= Duration::from_millis(300) {
                early = Some(after);
            }
        }
        let early = early.unwrap_or(after);
        let grown = peak.saturating_sub(base).max(1);
        println!(
            "{wave:>4}  {:>10.1}  {:>8.1}  {:>18.1}  {:>19.1}  {:>9.1}%  {:>13.1}%   {:.2} {:.2} {:.1}; {:.2} {:.2} {:.1}",
            mib(before),
            mib(peak),
            mib(early),
            mib(after),
            100.0 * after as f64 / peak as f64,
            100.0 * after.saturating_sub(base) as f64 / grown as f64,
            scheduled.as_secs_f64(),
            scheduled_cpu.as_secs_f64(),
            slowest_schedule.as_secs_f64() * 1e3,
            cancelled.as_secs_f64(),
            cancelled_cpu.as_secs_f64(),
            slowest_cancel.as_secs_f64() * 1e3,
        );
    }
}
