//! Prints the benchmark comparison table: timerpool against each peer on the
//! burst, churn, lateness, preemption, sparse, mixed, session and idle
//! workloads of `docs/benchmarks.md`, all measured in this one process but
//! the session workload, whose implementations each run in a child process.
//!
//! ```sh
//! cargo run --release -p timerpool-bench-tools --bin bench_report               # one run each, < 1 min
//! cargo run --release -p timerpool-bench-tools --bin bench_report -- --runs 3   # medians of 3 runs
//! ```
//!
//! The criterion benches in `benches/` run the same workloads with more
//! samples; this is the quick view for people who want one table.
//!
//! `--beside N` runs the report beside `N` busy processes (copies of this
//! program spinning on a CPU each, ended with it), as on a host whose CPUs
//! other work keeps busy; the CPU column stays this process's own.
//!
//! ```sh
//! cargo run --release -p timerpool-bench-tools --bin bench_report -- --only preemption --beside 2
//! ```
//!
//! `--only session` is the session-timeout workload (`benches/common/session.rs`):
//! 100,000 keyed sessions with a 1 s timeout, 250 touches and closes every
//! 1 ms for 4 s from one seeded stream, then the drain, on timerpool and on
//! tokio-util's `DelayQueue`. Each implementation runs in a child process
//! of its own (`--session-child NAME SEED` prints one `session-result`
//! line), so that the process CPU read at its end is that implementation's
//! alone. `--runs` rounds (5 unless given) alternate the order; the report
//! gives the medians, each timerpool variant's CPU over DelayQueue's paired
//! by round, and a sign test over the rounds. `--session-variants` names
//! the timerpool variants to run (names of `TIMERPOOL_VARIANTS` in
//! `benches/common/pools.rs`; default `timerpool,timerpool-slack2ms`), `--seed` the first
//! round's seed (default 1), and `--session-log DIR` has every expiry write
//! a log line to a file in `DIR` (off by default).
//!
//! ```sh
//! cargo build --release -p timerpool-bench-tools --bin bench_report
//! target/release/bench_report --only session --runs 5 --session-variants timerpool,timerpool-slack2ms
//! ```
//!
//! The session CPU total is the process CPU clock; the user and system
//! split comes from `/proc/self/stat` in 10 ms ticks and is apportioned by
//! the kernel from sampled ticks, so it wanders more from run to run than
//! the total. The children keep this program's counting allocator (a few
//! atomic additions per allocation; the `allocs` column says how many).

#[path = "../../../common/mod.rs"]
mod common;

use common::pools::{
    timerpool_builder, timerpool_variant_names, Naive, Pool, Stp, Timerpool, TimerpoolDetached,
    TimerpoolSpin, Tokio, TIMERPOOL_VARIANTS, WORKERS,
};
use common::session::{session_delayqueue, session_timerpool, SessionRun, SessionSpec};
use common::workloads::{
    burst, burst_batch, burst_batch_detached, churn, idle, lateness, mixed, preemption, sparse,
    ChurnDelayQueue, ChurnDelayQueueMap, ChurnNaive, ChurnPool, ChurnPoolDetached, ChurnResult,
    ChurnScheduler, ChurnStp, Idle, Lateness, Mixed,
};
use stats_alloc::StatsAlloc;
use std::alloc::System;
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[global_allocator]
static A: &StatsAlloc<System> = common::COUNTING;

const BURST: usize = 1_000_000;
const CHURN: usize = 1_000_000;
const TASKS: usize = 100_000;
const SPREAD: Duration = Duration::from_secs(2);
const TRIALS: usize = 200;
const IDLE_TIMERS: usize = 10_000;
const SPARSE_TIMERS: usize = 40;
const SPARSE_GAP: Duration = Duration::from_millis(50);
const IDLE_SPAN: Duration = Duration::from_secs(3);

/// Tasks per `schedule_batch_at` call (`BATCH_CHUNK` overrides 256).
fn batch_chunk() -> usize {
    std::env::var("BATCH_CHUNK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Median and spread ((max - min) / median) of a metric over runs.
fn stat(v: Vec<f64>) -> (f64, f64) {
    let m = median(v.clone());
    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (m, if m > 0.0 { (hi - lo) / m } else { 0.0 })
}

fn with<P: Pool, R>(f: impl FnOnce(&P) -> R) -> R {
    let p = P::start();
    let r = f(&p);
    p.finish();
    r
}

struct Row {
    name: &'static str,
    cells: Vec<(f64, f64)>,
}

fn print_table(title: &str, unit_cols: &[&str], rows: &[Row], better: &[bool]) {
    println!("\n## {title}");
    print!("{:<24}", "implementation");
    for c in unit_cols {
        print!(" {:>18}", c);
    }
    println!();
    for r in rows {
        print!("{:<24}", r.name);
        for (m, s) in &r.cells {
            // Two decimals below 10 (throughputs, small latencies), one above.
            let prec = if *m < 10.0 { 2 } else { 1 };
            print!(" {:>11.*} ±{:>4.0}%", prec, m, s * 100.0);
        }
        println!();
    }
    // Ratios: how many times better timerpool (first row) is than each peer.
    let base = &rows[0];
    for r in &rows[1..] {
        print!("{:<24}", format!("{} vs {}", base.name, r.name));
        for (i, ((b, _), (p, _))) in base.cells.iter().zip(&r.cells).enumerate() {
            let ratio = if better[i] { b / p } else { p / b };
            print!(" {:>17.2}x", ratio);
        }
        println!();
    }
}

/// The value after `flag` on the command line, if it is there and parses.
fn value_of<T: std::str::FromStr>(args: &[String], flag: &str) -> Option<T> {
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1)?.parse().ok()
}

/// Busy processes beside the report, killed when it ends.
struct Beside(Vec<std::process::Child>);

impl Beside {
    /// Start `n` copies of this program that only spin.
    fn start(n: usize) -> Self {
        let exe = std::env::current_exe().expect("this program's path");
        let spawn = |_| {
            std::process::Command::new(&exe)
                .arg("--spin")
                .spawn()
                .expect("a busy process")
        };
        Beside((0..n).map(spawn).collect())
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--spin") {
        // Busy until the report ends (it kills this), or its parent is gone.
        let parent = std::os::unix::process::parent_id();
        while std::os::unix::process::parent_id() == parent {
            for _ in 0..1_000_000 {
                std::hint::spin_loop();
            }
        }
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--session-child") {
        std::process::exit(session_child(&args, at));
    }
    let beside: usize = value_of(&args, "--beside").unwrap_or(0);
    let _busy = Beside::start(beside);
    let runs: usize = value_of(&args, "--runs").unwrap_or(1);
    let only: Option<String> = value_of(&args, "--only");
    let want = |w: &str| only.as_deref().is_none_or(|o| o.split(',').any(|x| x == w));
    let session_variants = match session_variants(&args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("bench_report: {e}");
            std::process::exit(2);
        }
    };
    let t0 = Instant::now();
    println!(
        "# timerpool bench_report: {} run(s) per figure, median ± spread ((max-min)/median), {} CPUs, {} busy processes beside",
        runs,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        beside
    );
    println!("ratios: how many times better timerpool is (>1: timerpool wins)");

    if want("burst") {
        // Interleave the implementations run by run so drift hits all alike.
        let mut res: Vec<Vec<f64>> = vec![Vec::new(); 7];
        for _ in 0..runs {
            let mops = |d: Duration| BURST as f64 / d.as_secs_f64() / 1e6;
            res[0].push(mops(with::<Timerpool, _>(|p| burst(p, BURST))));
            res[1].push(mops(with::<Timerpool, _>(|p| {
                burst_batch(&p.0, BURST, batch_chunk())
            })));
            res[2].push(mops(with::<Timerpool, _>(|p| {
                burst_batch_detached(&p.0, BURST, batch_chunk())
            })));
            res[3].push(mops(with::<Stp, _>(|p| burst(p, BURST))));
            res[4].push(mops(with::<Tokio, _>(|p| burst(p, BURST))));
            res[5].push(mops(with::<Naive, _>(|p| burst(p, BURST))));
            res[6].push(mops(with::<TimerpoolDetached, _>(|p| burst(p, BURST))));
        }
        let names = [
            "timerpool",
            "timerpool-batch",
            "timerpool-batch-detached",
            "scheduled-thread-pool",
            "tokio",
            "naive",
            "timerpool-detached",
        ];
        let rows: Vec<Row> = names
            .iter()
            .zip(res)
            .map(|(n, v)| Row {
                name: n,
                cells: vec![stat(v)],
            })
            .collect();
        print_table(
            &format!("burst: {BURST} zero-delay tasks, 2 workers (M tasks/s)"),
            &["M tasks/s"],
            &rows,
            &[true],
        );
        for batch in rows[1..3].iter().chain(&rows[6..]) {
            println!(
                "{:<24} {:>17.2}x",
                format!("{} vs scheduled-thread-pool", batch.name),
                batch.cells[0].0 / rows[3].cells[0].0
            );
        }
    }

    if want("churn") {
        type Runner = fn() -> ChurnResult;
        // The two pool variants first, then their peers: the keyed
        // DelayQueue (the target's reference) and the bare one (the floor).
        let impls: [(&str, Runner); 7] = [
            ("timerpool-pool-detached", || {
                churn(CHURN, ChurnPoolDetached::new)
            }),
            ("timerpool-pool", || churn(CHURN, ChurnPool::new)),
            ("delayqueue+map", || churn(CHURN, ChurnDelayQueueMap::new)),
            ("delayqueue", || churn(CHURN, ChurnDelayQueue::new)),
            ("timerpool-scheduler", || churn(CHURN, ChurnScheduler::new)),
            ("scheduled-thread-pool", || churn(CHURN, ChurnStp::new)),
            ("naive", || churn(CHURN, ChurnNaive::new)),
        ];
        let mut res: Vec<Vec<ChurnResult>> = vec![Vec::new(); impls.len()];
        for _ in 0..runs {
            for (i, (_, f)) in impls.iter().enumerate() {
                res[i].push(f());
            }
        }
        let rows: Vec<Row> = impls
            .iter()
            .zip(&res)
            .map(|((n, _), v)| {
                let mut cells: Vec<(f64, f64)> = (0..3)
                    .map(|p| stat(v.iter().map(|r| r.ns[p]).collect()))
                    .collect();
                for p in 0..3 {
                    cells.push(stat(
                        v.iter().map(|r| r.bytes[p] as f64 / CHURN as f64).collect(),
                    ));
                }
                for p in 0..3 {
                    cells.push(stat(v.iter().map(|r| r.cpu_ns[p]).collect()));
                }
                Row { name: n, cells }
            })
            .collect();
        print_table(
            &format!("churn: {CHURN} far timers (ns/op; heap bytes per entry after each phase)"),
            &[
                "insert ns",
                "resched ns",
                "cancel ns",
                "B/entry ins",
                "B/entry resch",
                "B/entry cancel",
                "insert cpu ns",
                "resched cpu ns",
                "cancel cpu ns",
            ],
            &rows,
            &[false; 9],
        );
        churn_targets(&rows);
        for (n, v) in impls.iter().zip(&res) {
            let peak = median(
                v.iter()
                    .map(|r| r.bytes[0].max(r.bytes[1]) as f64)
                    .collect(),
            );
            let after = median(v.iter().map(|r| r.bytes[2] as f64).collect());
            println!(
                "{:<24} after cancel-all: {:>6.2}% of peak",
                n.0,
                100.0 * after / peak
            );
        }
    }

    if want("lateness") || want("preemption") || want("sparse") {
        let names = [
            "timerpool",
            "timerpool-spin250us",
            "scheduled-thread-pool",
            "tokio",
            "naive",
        ];
        for what in ["lateness", "preemption", "sparse"] {
            if !want(what) {
                continue;
            }
            let mut res: Vec<Vec<Lateness>> = vec![Vec::new(); names.len()];
            for _ in 0..runs {
                let run = |i: usize| -> Lateness {
                    macro_rules! go {
                        ($p:ty) => {
                            with::<$p, _>(|p| match what {
                                "lateness" => lateness(p, TASKS, SPREAD),
                                "preemption" => preemption(p, TRIALS),
                                _ => sparse(p, SPARSE_TIMERS, SPARSE_GAP),
                            })
                        };
                    }
                    match i {
                        0 => go!(Timerpool),
                        1 => go!(TimerpoolSpin),
                        2 => go!(Stp),
                        3 => go!(Tokio),
                        _ => go!(Naive),
                    }
                };
                for (i, r) in res.iter_mut().enumerate() {
                    r.push(run(i));
                }
            }
            let rows: Vec<Row> = names
                .iter()
                .zip(&res)
                .map(|(n, v)| Row {
                    name: n,
                    cells: vec![
                        stat(v.iter().map(|l| l.us(0.5)).collect()),
                        stat(v.iter().map(|l| l.us(0.99)).collect()),
                        stat(v.iter().map(|l| l.us(0.999)).collect()),
                        stat(v.iter().map(|l| l.max_us()).collect()),
                        stat(v.iter().map(|l| l.early as f64).collect()),
                        stat(
                            v.iter()
                                .map(|l| 100.0 * l.cpu.as_secs_f64() / l.wall.as_secs_f64())
                                .collect(),
                        ),
                    ],
                })
                .collect();
            let title = match what {
                "lateness" => format!(
                    "lateness: {TASKS} tasks over {SPREAD:?} (µs; early starts; CPU % of one core)"
                ),
                "preemption" => format!(
                    "preemption: {TRIALS} tasks due in 1 ms while one due in 10 s waits (µs)"
                ),
                _ => format!(
                    "sparse: {SPARSE_TIMERS} tasks due {SPARSE_GAP:?} apart, the pool idle between (µs)"
                ),
            };
            print_table(
                &title,
                &["p50", "p99", "p99.9", "max", "early", "CPU %"],
                &rows,
                &[false; 6],
            );
            let spin = &rows[1];
            for r in &rows[2..5] {
                print!("{:<24}", format!("spin250us vs {}", r.name));
                for i in 0..4 {
                    print!(" {:>17.2}x", r.cells[i].0 / spin.cells[i].0);
                }
                println!();
            }
            // Raw percentiles for the plot script.
            for (n, v) in names.iter().zip(&res) {
                let qs = [0.5, 0.9, 0.99, 0.999, 1.0];
                let vals: Vec<String> = qs
                    .iter()
                    .map(|&q| format!("{:.1}", median(v.iter().map(|l| l.us(q)).collect())))
                    .collect();
                println!("csv,{what},{n},{}", vals.join(","));
            }
        }
    }

    if want("mixed") {
        mixed_report(runs);
    }

    if want("session") {
        session_report(
            value_of(&args, "--runs").unwrap_or(5),
            &session_variants,
            value_of(&args, "--seed").unwrap_or(1),
            value_of(&args, "--session-log"),
        );
    }

    if want("idle") {
        let names = [
            "timerpool",
            "timerpool-spin250us",
            "scheduled-thread-pool",
            "tokio",
            "naive",
        ];
        println!("\n## idle: {IDLE_TIMERS} timers due in an hour, {IDLE_SPAN:?} of idling");
        println!(
            "{:<24} {:>12} {:>10}",
            "implementation", "CPU ms", "wakeups"
        );
        for (i, n) in names.iter().enumerate() {
            let mut v: Vec<Idle> = Vec::new();
            for _ in 0..runs {
                v.push(match i {
                    0 => with::<Timerpool, _>(|p| idle(p, IDLE_TIMERS, IDLE_SPAN)),
                    1 => with::<TimerpoolSpin, _>(|p| idle(p, IDLE_TIMERS, IDLE_SPAN)),
                    2 => with::<Stp, _>(|p| idle(p, IDLE_TIMERS, IDLE_SPAN)),
                    3 => with::<Tokio, _>(|p| idle(p, IDLE_TIMERS, IDLE_SPAN)),
                    _ => with::<Naive, _>(|p| idle(p, IDLE_TIMERS, IDLE_SPAN)),
                });
            }
            println!(
                "{:<24} {:>12.3} {:>10}",
                n,
                median(v.iter().map(|x| x.cpu.as_secs_f64() * 1e3).collect()),
                median(v.iter().map(|x| x.wakeups as f64).collect())
            );
        }
    }
    println!("\ntotal {:.1} s", t0.elapsed().as_secs_f64());
}

/// The churn targets: each pool variant's phases against the keyed
/// DelayQueue (rows 0, 1 and 2 of `rows`), and its bytes per pending timer
/// against the bare DelayQueue (row 3) handle-less and the keyed one with
/// handles. Below 1 means timerpool costs less.
fn churn_targets(rows: &[Row]) {
    let (keyed, bare) = (&rows[2], &rows[3]);
    println!("\nchurn targets (timerpool / peer; < 1: timerpool costs less)");
    println!(
        "{:<24} {:>9} {:>9} {:>9} {:>12} {:>12}",
        "variant", "insert", "resched", "cancel", "B/timer", "B/timer peer"
    );
    for (r, ns_max, mem_peer) in [(&rows[0], 0.6, bare), (&rows[1], 1.0, keyed)] {
        // Wall-clock ratios, then the same in thread CPU time (cells 6-8).
        for (what, at) in [("wall", 0), ("cpu", 6)] {
            let ns: Vec<f64> = (at..at + 3)
                .map(|p| r.cells[p].0 / keyed.cells[p].0)
                .collect();
            println!(
                "{:<24} {:>8.2}x {:>8.2}x {:>8.2}x {:>11.1}B {:>11.1}B   ({what}; targets: <= {ns_max}x per phase vs {}, B/timer <= {})",
                r.name,
                ns[0],
                ns[1],
                ns[2],
                r.cells[3].0,
                mem_peer.cells[3].0,
                keyed.name,
                mem_peer.name
            );
        }
    }
}

/// Mixed task lengths (the fair hand-off): 20,000 tasks due over 2 s, every
/// 250th sleeps 20 ms; the short tasks' lateness, the stalls over 1 ms with
/// a worker free of long tasks, and CPU, on 2 and 4 workers.
fn mixed_report(runs: usize) {
    const N: usize = 20_000;
    const EVERY: usize = 250;
    const LONG: Duration = Duration::from_millis(20);
    for workers in [2, 4] {
        let names = ["timerpool", "scheduled-thread-pool"];
        let mut res: Vec<Vec<Mixed>> = vec![Vec::new(); names.len()];
        for run in 0..runs {
            let go = |i: usize| -> Mixed {
                match i {
                    0 => with_workers(workers, |p: &Timerpool| {
                        mixed(p, N, SPREAD, EVERY, LONG, workers)
                    }),
                    _ => with_workers(workers, |p: &Stp| mixed(p, N, SPREAD, EVERY, LONG, workers)),
                }
            };
            // Each pool takes each place in the order in turn: the host's
            // disturbances can recur with a period near two runs, and a
            // fixed order then hands them to the same pool run after run.
            for place in 0..names.len() {
                let i = (run + place) % names.len();
                res[i].push(go(i));
            }
        }
        let rows: Vec<Row> = names
            .iter()
            .zip(&res)
            .map(|(n, v)| Row {
                name: n,
                cells: vec![
                    stat(v.iter().map(|m| m.short.us(0.5)).collect()),
                    stat(v.iter().map(|m| m.short.us(0.99)).collect()),
                    stat(v.iter().map(|m| m.short.us(0.999)).collect()),
                    stat(v.iter().map(|m| m.short.max_us()).collect()),
                    stat(v.iter().map(|m| m.stalled as f64).collect()),
                    stat(v.iter().map(|m| m.short.early as f64).collect()),
                    stat(
                        v.iter()
                            .map(|m| 100.0 * m.short.cpu.as_secs_f64() / m.short.wall.as_secs_f64())
                            .collect(),
                    ),
                ],
            })
            .collect();
        print_table(
            &format!(
                "mixed lengths: {N} tasks over {SPREAD:?}, every {EVERY}th sleeps {LONG:?}, {workers} workers (short tasks' lateness, µs; stalls > 1 ms with a worker free; CPU % of one core)"
            ),
            &["p50", "p99", "p99.9", "max", "stalls", "early", "CPU %"],
            &rows,
            &[false; 7],
        );
        print_pairs(&res[0], &res[1]);
    }
}

/// The runs side by side: in how many of them timerpool's figure was at
/// or below scheduled-thread-pool's (the two ran in the same round, so
/// each pair shares the host's minute), a sign test that medians of
/// heavy-tailed figures do not give, with its two-sided p-value over the
/// pairs that differ (a small p: one pool is ahead more often than chance
/// explains).
fn print_pairs(tp: &[Mixed], stp: &[Mixed]) {
    type Figure = (&'static str, fn(&Mixed) -> f64);
    let figures: [Figure; 3] = [
        ("p99.9", |m| m.short.us(0.999)),
        ("max", |m| m.short.max_us()),
        ("stalls", |m| m.stalled as f64),
    ];
    let counts: Vec<String> = figures
        .iter()
        .map(|(name, f)| {
            let at_or_below = tp.iter().zip(stp).filter(|(a, b)| f(a) <= f(b)).count();
            let below = tp.iter().zip(stp).filter(|(a, b)| f(a) < f(b)).count();
            let above = tp.iter().zip(stp).filter(|(a, b)| f(a) > f(b)).count();
            format!(
                "{name} {at_or_below} of {} (sign test p = {:.2})",
                tp.len(),
                sign_test(below, below + above)
            )
        })
        .collect();
    println!(
        "runs where timerpool's figure was at or below scheduled-thread-pool's: {}",
        counts.join(", ")
    );
}

/// The two-sided p-value of `k` successes in `n` fair coin tosses: the
/// chance of a split at least this uneven.
fn sign_test(k: usize, n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    let ln_choose = |i: usize| -> f64 {
        (1..=i)
            .map(|j| ((n - i + j) as f64).ln() - (j as f64).ln())
            .sum()
    };
    let pmf = |i: usize| (ln_choose(i) - n as f64 * std::f64::consts::LN_2).exp();
    let low = k.min(n - k);
    let tail: f64 = (0..=low).map(pmf).sum();
    (2.0 * tail).min(1.0)
}

fn with_workers<P: Pool, R>(workers: usize, f: impl FnOnce(&P) -> R) -> R {
    let p = P::start_with(workers);
    let r = f(&p);
    p.finish();
    r
}

// ---------------------------------------------------------------- session

/// The timerpool variants of the session report (`--session-variants`,
/// comma-separated names of `TIMERPOOL_VARIANTS`; default the default
/// settings and relaxed mode, `timerpool,timerpool-slack2ms`).
fn session_variants(args: &[String]) -> Result<Vec<&'static str>, String> {
    let list: String = value_of(args, "--session-variants")
        .unwrap_or_else(|| "timerpool,timerpool-slack2ms".into());
    list.split(',')
        .map(|name| {
            TIMERPOOL_VARIANTS
                .iter()
                .map(|(n, _)| *n)
                .find(|n| *n == name)
                .ok_or_else(|| {
                    format!(
                        "unknown timerpool variant {name:?} in --session-variants (known: {})",
                        timerpool_variant_names()
                    )
                })
        })
        .collect()
}

/// One child's figures, as its result line gives them.
#[derive(Debug, Clone)]
struct SessionFigures {
    expired: f64,
    early: f64,
    unmatched: f64,
    touches: f64,
    reopens: f64,
    closes: f64,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    wall_s: f64,
    user_s: f64,
    sys_s: f64,
    cpu_s: f64,
    allocs: f64,
    max_rss_mib: f64,
}

impl SessionFigures {
    /// The child's `session-result key=value ...` line.
    fn line(implementation: &str, run: &SessionRun, cpu: Duration, user_sys: (f64, f64)) -> String {
        let us = |q: f64| run.hist.value_at_quantile(q) as f64 / 1e3;
        format!(
            "session-result impl={implementation} expired={} early={} unmatched={} touches={} reopens={} closes={} p50_us={:.1} p99_us={:.1} max_us={:.1} wall_s={:.4} user_s={:.3} sys_s={:.3} cpu_s={:.4} allocs={} max_rss_mib={:.1}",
            run.expired(),
            run.early,
            run.unmatched,
            run.touches,
            run.reopens,
            run.closes,
            us(0.5),
            us(0.99),
            run.hist.max() as f64 / 1e3,
            run.wall.as_secs_f64(),
            user_sys.0,
            user_sys.1,
            cpu.as_secs_f64(),
            common::COUNTING.stats().allocations,
            proc_status_kib("VmHWM").unwrap_or(0) as f64 / 1024.0,
        )
    }

    /// Parse a result line.
    fn parse(line: &str) -> Result<Self, String> {
        let fields: HashMap<&str, f64> = line
            .strip_prefix("session-result ")
            .ok_or_else(|| format!("not a result line: {line:?}"))?
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
            .collect();
        let get = |k: &str| {
            fields
                .get(k)
                .copied()
                .ok_or_else(|| format!("no {k} in {line:?}"))
        };
        Ok(SessionFigures {
            expired: get("expired")?,
            early: get("early")?,
            unmatched: get("unmatched")?,
            touches: get("touches")?,
            reopens: get("reopens")?,
            closes: get("closes")?,
            p50_us: get("p50_us")?,
            p99_us: get("p99_us")?,
            max_us: get("max_us")?,
            wall_s: get("wall_s")?,
            user_s: get("user_s")?,
            sys_s: get("sys_s")?,
            cpu_s: get("cpu_s")?,
            allocs: get("allocs")?,
            max_rss_mib: get("max_rss_mib")?,
        })
    }
}

/// This process's user and system CPU seconds from `/proc/self/stat` (in
/// clock ticks of 10 ms, Linux's fixed `USER_HZ` of 100); zeros where it
/// cannot be read.
fn proc_user_sys() -> (f64, f64) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (0.0, 0.0);
    };
    // The fields after the command name, which may hold spaces, start with
    // the state (field 3); utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) / 100.0, ticks(12) / 100.0)
}

/// A `kB` figure of `/proc/self/status` (`VmHWM`: peak resident memory).
fn proc_status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The child's side: `--session-child <implementation> <seed>
/// [--session-log FILE]` runs one session workload and prints its result
/// line; the process CPU is read last, so it covers the whole process's
/// life. Returns the exit code.
fn session_child(args: &[String], at: usize) -> i32 {
    let (Some(name), Some(seed)) = (
        args.get(at + 1),
        args.get(at + 2).and_then(|s| s.parse::<u64>().ok()),
    ) else {
        eprintln!("bench_report: --session-child needs an implementation and a seed");
        return 2;
    };
    let log = match value_of::<String>(args, "--session-log") {
        None => None,
        Some(path) => match std::fs::File::create(&path) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("bench_report: cannot create the expiry log {path}: {e}");
                return 2;
            }
        },
    };
    let spec = SessionSpec::FULL;
    let run = if name == "delayqueue" {
        session_delayqueue(spec, seed, WORKERS, log)
    } else if let Some(builder) = timerpool_builder(name, WORKERS) {
        session_timerpool(spec, seed, builder, log)
    } else {
        eprintln!(
            "bench_report: unknown session implementation {name:?} (delayqueue, or one of {})",
            timerpool_variant_names()
        );
        return 2;
    };
    let cpu = cpu_time::ProcessTime::now().as_duration();
    println!("{}", SessionFigures::line(name, &run, cpu, proc_user_sys()));
    0
}

/// Run one child and read its figures.
fn session_run(name: &str, seed: u64, log: Option<String>) -> Result<SessionFigures, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["--session-child", name, &seed.to_string()]);
    if let Some(path) = log {
        cmd.args(["--session-log", &path]);
    }
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("starting the child for {name}: {e}"))?;
    if !out.status.success() {
        return Err(format!("the child for {name} ended with {}", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("session-result "))
        .ok_or_else(|| format!("the child for {name} printed no result line"))?;
    SessionFigures::parse(line)
}

/// Session timeouts (`common::session`, `SessionSpec::FULL`): each
/// implementation in a child process of its own, the same seed for all in
/// a round, the order rotated from round to round; the figures' medians,
/// the process CPU of each timerpool variant over DelayQueue's, and a sign
/// test over the rounds.
fn session_report(runs: usize, variants: &[&'static str], seed: u64, log_dir: Option<String>) {
    let spec = SessionSpec::FULL;
    let names: Vec<&'static str> = variants.iter().copied().chain(["delayqueue"]).collect();
    println!(
        "\n## session: {} sessions, timeout {:?}, {} events every {:?} for {:?} ({}% closes, {}% to the hot half), then the drain; {} workers, each implementation in its own process, {runs} rounds from seed {seed}, order rotated; expiry log {}",
        spec.sessions,
        spec.timeout,
        spec.per_tick,
        spec.tick,
        spec.tick * spec.ticks as u32,
        spec.close_per_mille as f64 / 10.0,
        spec.hot_percent,
        WORKERS,
        log_dir.as_deref().map_or("off (--session-log DIR)".to_string(), |d| format!("in {d}")),
    );
    let mut res: Vec<Vec<SessionFigures>> = vec![Vec::new(); names.len()];
    for run in 0..runs {
        let round_seed = seed + run as u64;
        let mut line = format!("round {} (seed {round_seed}):", run + 1);
        // As in the mixed report: a fixed order can hand the host's
        // recurring disturbances to the same implementation every round.
        for place in 0..names.len() {
            let i = (run + place) % names.len();
            let log = log_dir
                .as_ref()
                .map(|d| format!("{d}/session-{}-{}.log", names[i], run + 1));
            match session_run(names[i], round_seed, log) {
                Ok(f) => {
                    line += &format!(
                        "  {} CPU {:.2} s (user {:.2} sys {:.2}) p99 {:.0} µs, {} expired;",
                        names[i], f.cpu_s, f.user_s, f.sys_s, f.p99_us, f.expired
                    );
                    res[i].push(f);
                }
                Err(e) => {
                    eprintln!("bench_report: session: {e}");
                    return;
                }
            }
        }
        println!("{line}");
    }
    type Figure = fn(&SessionFigures) -> f64;
    let figures: [(&str, Figure); 12] = [
        ("expired", |f| f.expired),
        ("p50 µs", |f| f.p50_us),
        ("p99 µs", |f| f.p99_us),
        ("max µs", |f| f.max_us),
        ("user s", |f| f.user_s),
        ("sys s", |f| f.sys_s),
        ("CPU s", |f| f.cpu_s),
        ("wall s", |f| f.wall_s),
        ("touches", |f| f.touches),
        ("reopens", |f| f.reopens),
        ("closes", |f| f.closes),
        ("allocs", |f| f.allocs),
    ];
    let rows: Vec<Row> = names
        .iter()
        .zip(&res)
        .map(|(n, v)| Row {
            name: n,
            cells: figures
                .iter()
                .map(|(_, f)| stat(v.iter().map(f).collect()))
                .collect(),
        })
        .collect();
    let cols: Vec<&str> = figures.iter().map(|(c, _)| *c).collect();
    // Fewer expired sessions is no better: the count is a sanity check
    // (the same events, the same sessions expire but for the few touched
    // at the instant their timer came up).
    print_table(
        "session timeouts (lateness of each expiry, µs; process CPU of the child, s)",
        &cols,
        &rows,
        &[false; 12],
    );
    for (n, v) in names.iter().zip(&res) {
        let bad: f64 = v.iter().map(|f| f.early + f.unmatched).sum();
        println!(
            "{n:<24} early or unmatched expiries: {bad}, peak RSS {:.0} MiB",
            median(v.iter().map(|f| f.max_rss_mib).collect())
        );
    }
    let dq = &res[names.len() - 1];
    println!("\nprocess CPU over DelayQueue's, paired by round (< 1: timerpool spends less)");
    for (n, tp) in names.iter().zip(&res).take(variants.len()) {
        let ratio = |f: Figure| median(tp.iter().zip(dq).map(|(a, b)| f(a) / f(b)).collect());
        let below = tp.iter().zip(dq).filter(|(a, b)| a.cpu_s < b.cpu_s).count();
        let above = tp.iter().zip(dq).filter(|(a, b)| a.cpu_s > b.cpu_s).count();
        println!(
            "{:<30} total {:.2}x (user {:.2}x, sys {:.2}x; ratio of medians {:.2}x); rounds with less CPU than delayqueue: {below} of {} (sign test p = {:.2})",
            format!("{n} / delayqueue"),
            ratio(|f| f.cpu_s),
            ratio(|f| f.user_s),
            ratio(|f| f.sys_s),
            median(tp.iter().map(|f| f.cpu_s).collect()) / median(dq.iter().map(|f| f.cpu_s).collect()),
            tp.len(),
            sign_test(below, below + above)
        );
    }
}
