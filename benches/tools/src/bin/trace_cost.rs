//! The cost of the `tracing` feature on the burst workload: build this
//! twice, without and with the feature, and compare (`docs/benchmarks.md`,
//! "Tracing"):
//!
//! ```sh
//! cargo build --release -p timerpool-bench-tools --bin trace_cost
//! cp target/release/trace_cost /tmp/trace_off
//! cargo build --release -p timerpool-bench-tools --bin trace_cost --features tracing
//! cp target/release/trace_cost /tmp/trace_on
//! /tmp/trace_off 100000 3; /tmp/trace_on 100000 3   # interleave several times
//! valgrind --tool=callgrind /tmp/trace_on 100000 1
//! ```
//!
//! With the feature, a global subscriber that enables everything and
//! discards it is installed, so every span and event is built and handed to
//! it (keys are not formatted: it records no field). With a third argument
//! `info`, the subscriber enables INFO and above only (a common production
//! filter), so the pool's DEBUG spans are filtered out at their call sites.
//! Arguments: tasks per burst (default 1,000,000), bursts (default 3), and
//! the level (`all` or `info`). Each burst prints its rate.

#[path = "../../../common/mod.rs"]
mod common;

use common::pools::{Pool, Timerpool};
use common::workloads::burst;

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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let info = args.get(3).is_some_and(|a| a == "info");
    #[cfg(feature = "tracing")]
    {
        let level = if info {
            tracing::Level::INFO
        } else {
            tracing::Level::TRACE
        };
        tracing::subscriber::set_global_default(Discard(level)).expect("the only subscriber");
    }
    let label = match (cfg!(feature = "tracing"), info) {
        (false, _) => "tracing off",
        (true, false) => "tracing on, discarding subscriber (all levels)",
        (true, true) => "tracing on, discarding subscriber (INFO and above)",
    };
    for _ in 0..rounds {
        let p = Timerpool::start();
        let took = burst(&p, n);
        p.finish();
        println!(
            "{label}: {:.3} M tasks/s",
            n as f64 / took.as_secs_f64() / 1e6
        );
    }
}
