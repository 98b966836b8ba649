//! The PostgreSQL benchmark report: timerpool's nodes against a polling
//! claimer (poll every 1 s, SKIP LOCKED claim) on the same server in the
//! same run, medians of `--runs` runs (default 3), printed as the tables of
//! `docs/durable.md`. Takes about four minutes; check `uptime` first, the
//! figures move with other load on the machine.
//!
//! ```text
//! cargo run --release -p timerpool-pg --example pg_report [-- --runs N]
//! ```

#[path = "../benches/pg_work/mod.rs"]
mod pg_work;

use pg_work::*;
use std::time::Duration;

const TIMERS: usize = 10_000;
const SPREAD: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_secs(1);

fn median<T: Copy>(mut v: Vec<T>, key: impl Fn(&T) -> f64) -> T {
    v.sort_by(|a, b| key(a).total_cmp(&key(b)));
    v[v.len() / 2]
}

fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1000.0)
}

fn cpu(c: Cpu) -> String {
    format!(
        "{:.2} s / {:.2} s",
        c.client.as_secs_f64(),
        c.server.as_secs_f64()
    )
}

fn late_row(name: &str, runs: Vec<Late>) {
    let early: usize = runs.iter().map(|l| l.early).sum();
    let m = median(runs, |l| l.p99_us as f64);
    println!(
        "| {name} | {} | {} | {} | {early} | {} |",
        ms(m.p50_us),
        ms(m.p99_us),
        ms(m.max_us),
        cpu(m.cpu)
    );
}

fn main() {
    let mut runs = 3;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = it.next().and_then(|v| v.parse().ok()).expect("--runs N"),
            other => panic!("unknown argument {other}"),
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at start: {}", load.trim());
    println!("\n### Lateness: {TIMERS} timers over {SPREAD:?} (median of {runs} runs by p99)\n");
    println!("| implementation | p50 ms | p99 ms | max ms | early | CPU client / server |");
    println!("| --- | --- | --- | --- | --- | --- |");
    late_row(
        "timerpool node",
        (0..runs)
            .map(|_| lateness_timerpool(TIMERS, SPREAD))
            .collect(),
    );
    late_row(
        "polling claimer (1 s)",
        (0..runs)
            .map(|_| lateness_polling(TIMERS, SPREAD, POLL))
            .collect(),
    );

    println!(
        "\n### Preemption: a task due in 1 ms while the node sleeps toward one an hour away\n"
    );
    println!("| implementation | p50 ms | p99 ms | max ms | early | CPU client / server |");
    println!("| --- | --- | --- | --- | --- | --- |");
    late_row(
        "timerpool node (50 trials)",
        (0..runs).map(|_| preemption_timerpool(50)).collect(),
    );
    late_row(
        "polling claimer (1 s, 10 trials)",
        (0..runs).map(|_| preemption_polling(10, POLL)).collect(),
    );

    println!("\n### Schedule throughput, one connection (median of {runs} runs)\n");
    println!("| operation | per s | CPU client / server |");
    println!("| --- | --- | --- |");
    let all: Vec<[(&str, Rate); 5]> = (0..runs).map(|_| schedule_rates(2000)).collect();
    for i in 0..5 {
        let m = median(all.iter().map(|r| r[i].1).collect(), |r| r.per_s);
        println!("| {} | {:.0} | {} |", all[0][i].0, m.per_s, cpu(m.cpu));
    }

    println!("\n### End to end: 20,000 tasks due at once (median of {runs} runs)\n");
    println!("| implementation | tasks/s | CPU client / server |");
    println!("| --- | --- | --- |");
    for n in [1, 3] {
        let m = median((0..runs).map(|_| end_to_end(n, 20_000)).collect(), |r| {
            r.per_s
        });
        println!(
            "| timerpool, {n} node(s) × 2 workers | {:.0} | {} |",
            m.per_s,
            cpu(m.cpu)
        );
    }
    let m = median(
        (0..runs).map(|_| end_to_end_polling(20_000)).collect(),
        |r| r.per_s,
    );
    println!(
        "| polling claimer, 1 thread | {:.0} | {} |",
        m.per_s,
        cpu(m.cpu)
    );

    println!("\n### Idle: 10,000 tasks an hour away, 30 s window, one run\n");
    println!("| implementation | transactions/s | CPU client / server (both together) |");
    println!("| --- | --- | --- |");
    for (name, per_s, c) in idle_rates(10_000, Duration::from_secs(30)) {
        println!("| {name} | {per_s:.2} | {} |", cpu(c));
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("\nload average at end: {}", load.trim());
}
