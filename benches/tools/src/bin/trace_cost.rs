//! The cost of the `tracing` feature and of the completion stream on the
//! burst workload: build this twice, without and with the feature, and
//! compare (`docs/benchmarks.md`, "Tracing and the completion stream"):
//!
//! ```sh
//! cargo build --release -p timerpool-bench-tools --bin trace_cost
//! cp target/release/trace_cost /tmp/trace_off
//! cargo build --release -p timerpool-bench-tools --bin trace_cost --features tracing
//! cp target/release/trace_cost /tmp/trace_on
//! /tmp/trace_off 1000000 2; /tmp/trace_on 1000000 2; /tmp/trace_on 1000000 2 info  # x5
//! valgrind --tool=callgrind /tmp/trace_on 100000 1 manual   # and off, manual-listener, ...
//! ```
//!
//! With the feature, a global subscriber that enables everything and
//! discards it is installed, so every span and event is built and handed to
//! it (keys are not formatted: it records no field). With a third argument
//! `info`, the subscriber enables INFO and above only (a common production
//! filter), so the pool's DEBUG spans are filtered out at their call sites.
//! Without the feature, the third argument `listener` or `channel` measures
//! the completion stream instead (a no-op listener; a channel with a thread
//! reading it). The mode `manual` is a deterministic burst for instruction
//! counts (one worker, a manual clock, every task scheduled before any runs),
//! measured with the subscriber enabling everything when the feature is on.
//! Arguments: tasks per burst (default 1,000,000), bursts (default 3), and
//! the mode (`all`, `info`, `listener`, `channel`, `manual`,
//! `manual-listener`, `manual-channel`). Each burst prints its rate.

#[path = "../../../common/mod.rs"]
mod common;

use common::pools::{Pool, Timerpool, WORKERS};
use common::workloads::burst;
use timerpool::TimerPool;

/// Enables every span and event up to its level and drops it.
#[cfg(feature = "tracing")]
struct Discard(tracing::Level);

#[cfg(feature = "tracing")]
impl tracing::Subscriber for Discard {
    fn register_callsite(
        &self,
        m: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if *m.level() <= self.0 {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(self.0.into())
    }
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        *m.level() <= self.0
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The pool of one burst: default settings, or with a completion stream
/// (`listener`: a no-op listener; `channel`: a channel of `n` records and
/// a thread reading it, joined after the pool is gone).
fn start(mode: &str, n: usize) -> (Timerpool, Option<std::thread::JoinHandle<()>>) {
    let builder = TimerPool::builder().workers(WORKERS);
    match mode {
        "listener" => {
            let pool = builder
                .on_completion(|c| {
                    std::hint::black_box(c);
                })
                .build()
                .unwrap();
            (Timerpool(pool), None)
        }
        "channel" => {
            let pool = builder.completions(n).build().unwrap();
            let rx = pool.completions().unwrap();
            let reader =
                std::thread::spawn(move || rx.iter().for_each(|c| drop(std::hint::black_box(c))));
            (Timerpool(pool), Some(reader))
        }
        _ => (Timerpool::start(), None),
    }
}

/// A deterministic variant for instruction counts: one worker on a manual
/// clock; all `n` tasks are scheduled first, then the clock moves and the
/// worker runs them, so the heap holds the same tasks in every run.
/// `stream`: `listener` or `channel` adds a completion stream as `start`
/// does.
fn manual(n: usize, stream: &str) -> std::time::Duration {
    let clock = timerpool::ManualClock::new();
    let builder = TimerPool::<u64>::builder().workers(1).clock(clock.clone());
    let builder = match stream {
        "listener" => builder.on_completion(|c| {
            std::hint::black_box(c);
        }),
        "channel" => builder.completions(n),
        _ => builder,
    };
    let pool = builder.build().unwrap();
    let reader = pool.completions().map(|rx| {
        std::thread::spawn(move || rx.iter().for_each(|c| drop(std::hint::black_box(c))))
    });
    let start = std::time::Instant::now();
    for i in 0..n as u64 {
        let key = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        drop(
            pool.schedule(key, std::time::Duration::from_secs(1), || ())
                .unwrap(),
        );
    }
    clock.advance(std::time::Duration::from_secs(1));
    pool.settle(std::time::Duration::from_secs(600)).unwrap();
    let took = start.elapsed();
    pool.shutdown_now();
    drop(pool);
    if let Some(reader) = reader {
        reader.join().expect("the reader");
    }
    took
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let mode = args.get(3).map(String::as_str).unwrap_or("all");
    #[cfg(feature = "tracing")]
    {
        let level = if mode == "info" {
            tracing::Level::INFO
        } else {
            tracing::Level::TRACE
        };
        tracing::subscriber::set_global_default(Discard(level)).expect("the only subscriber");
    }
    let label = match (cfg!(feature = "tracing"), mode) {
        (false, "listener" | "manual-listener") => "tracing off, a no-op completion listener",
        (false, "channel" | "manual-channel") => "tracing off, a completion channel and its reader",
        (false, _) => "tracing off",
        (true, "info") => "tracing on, discarding subscriber (INFO and above)",
        (true, _) => "tracing on, discarding subscriber (all levels)",
    };
    for _ in 0..rounds {
        if let Some(stream) = mode.strip_prefix("manual") {
            let took = manual(n, stream.trim_start_matches('-'));
            println!(
                "{label}, manual clock, 1 worker: {:.3} M tasks/s",
                n as f64 / took.as_secs_f64() / 1e6
            );
            continue;
        }
        let (p, reader) = start(mode, n);
        let took = burst(&p, n);
        p.finish();
        if let Some(reader) = reader {
            reader.join().expect("the reader");
        }
        println!(
            "{label}: {:.3} M tasks/s",
            n as f64 / took.as_secs_f64() / 1e6
        );
    }
}
