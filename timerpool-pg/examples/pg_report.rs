//! The PostgreSQL benchmark report: timerpool's blocking `Node` and its
//! `AsyncNode` against a polling claimer (poll every 1 s, SKIP LOCKED
//! claim) on the same server in the same run, medians of `--runs` runs
//! (default 3), each workload's implementations in an order that turns
//! round from one run to the next, printed as the tables of
//! `docs/benchmarks.md`. Needs feature `tokio` for the `AsyncNode`. Takes
//! about seven minutes; check `uptime` first, the figures move with other
//! load on the machine.
//!
//! ```text
//! cargo run --release -p timerpool-pg --features tokio --example pg_report [-- --runs N]
//! ```

#[path = "../benches/pg_work/mod.rs"]
mod pg_work;
#[path = "../benches/pg_work/tokio_kind.rs"]
mod tokio_kind;

use pg_work::*;
use std::time::Duration;
use tokio_kind::ASYNC;

const TIMERS: usize = 10_000;
const SPREAD: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_secs(1);
const KINDS: [Kind; 2] = [BLOCKING, ASYNC];

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

/// One row of a workload: its name and how to run it once.
type Entry<'a, T> = (String, Box<dyn Fn() -> T + 'a>);

/// Runs every entry once per run, first to last in even runs and last to
/// first in odd ones, so that no implementation always runs on the
/// machine as the one before it left it; each entry's results in run
/// order.
fn alternating<T>(runs: usize, entries: &[Entry<'_, T>]) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = entries.iter().map(|_| Vec::with_capacity(runs)).collect();
    for run in 0..runs {
        let mut order: Vec<usize> = (0..entries.len()).collect();
        if run % 2 == 1 {
            order.reverse();
        }
        for i in order {
            out[i].push((entries[i].1)());
        }
    }
    out
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

fn late_table(runs: usize, entries: &[Entry<'_, Late>]) {
    println!("| implementation | p50 ms | p99 ms | max ms | early | CPU client / server |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for ((name, _), results) in entries.iter().zip(alternating(runs, entries)) {
        late_row(name, results);
    }
}

fn main() {
    let mut runs = 3;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => match it.next().and_then(|v| v.parse().ok()) {
                Some(n) if n > 0 => runs = n,
                _ => {
                    eprintln!("--runs takes a number of runs, at least 1");
                    std::process::exit(2);
                }
            },
            other => {
                eprintln!("unknown argument {other} (usage: pg_report [--runs N])");
                std::process::exit(2);
            }
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at start: {}", load.trim());
    let order = "order turned round run by run";

    println!(
        "\n### Lateness: {TIMERS} timers over {SPREAD:?}, 4 handlers at once ({order}; median of {runs} runs by p99)\n"
    );
    let mut entries: Vec<Entry<'_, Late>> = KINDS
        .iter()
        .map(|k| -> Entry<'_, Late> {
            (
                k.name.to_string(),
                Box::new(move || lateness(k, TIMERS, SPREAD)),
            )
        })
        .collect();
    entries.push((
        "polling claimer (1 s)".into(),
        Box::new(|| lateness_polling(TIMERS, SPREAD, POLL)),
    ));
    late_table(runs, &entries);

    println!(
        "\n### Preemption: a task due in 1 ms while the node sleeps toward one an hour away ({order}; median of {runs} runs by p99)\n"
    );
    let mut entries: Vec<Entry<'_, Late>> = KINDS
        .iter()
        .map(|k| -> Entry<'_, Late> {
            (
                format!("{} (50 trials)", k.name),
                Box::new(move || preemption(k, 50)),
            )
        })
        .collect();
    entries.push((
        "polling claimer (1 s, 10 trials)".into(),
        Box::new(|| preemption_polling(10, POLL)),
    ));
    late_table(runs, &entries);

    println!("\n### Schedule throughput, one connection (median of {runs} runs)\n");
    println!("| operation | per s | CPU client / server |");
    println!("| --- | --- | --- |");
    let all: Vec<[(&str, Rate); 5]> = (0..runs).map(|_| schedule_rates(2000)).collect();
    for i in 0..5 {
        let m = median(all.iter().map(|r| r[i].1).collect(), |r| r.per_s);
        println!("| {} | {:.0} | {} |", all[0][i].0, m.per_s, cpu(m.cpu));
    }

    println!("\n### End to end: 20,000 tasks due at once ({order}; median of {runs} runs)\n");
    println!("| implementation | tasks/s | CPU client / server |");
    println!("| --- | --- | --- |");
    let mut entries: Vec<Entry<'_, Rate>> = Vec::new();
    for n in [1, 3] {
        for k in &KINDS {
            entries.push((
                format!("{}, {n} node(s) × 2 {}", k.name, k.unit),
                Box::new(move || end_to_end_of(k, n, 20_000)),
            ));
        }
    }
    entries.push((
        "polling claimer, 1 thread".into(),
        Box::new(|| end_to_end_polling(20_000)),
    ));
    for ((name, _), results) in entries.iter().zip(alternating(runs, &entries)) {
        let m = median(results, |r| r.per_s);
        println!("| {name} | {:.0} | {} |", m.per_s, cpu(m.cpu));
    }

    let window = Duration::from_secs(30);
    println!(
        "\n### Idle: 10,000 tasks an hour away, {window:?} window, all side by side, one run\n"
    );
    println!("| implementation | transactions/s |");
    println!("| --- | --- |");
    let (rates, c) = idle_rates(&KINDS, 10_000, window);
    let names = KINDS
        .iter()
        .map(|k| k.name)
        .chain(["polling claimer (1 s)"]);
    for (name, per_s) in names.zip(rates) {
        println!("| {name} | {per_s:.2} |");
    }
    println!("\nCPU client / server of all of them together: {}", cpu(c));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("\nload average at end: {}", load.trim());
}
