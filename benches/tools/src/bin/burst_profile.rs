//! Burst runs of one implementation, for profiling (`perf record -g`):
//!
//! ```sh
//! cargo build --release -p timerpool-bench-tools --bin burst_profile
//! perf record -g target/release/burst_profile timerpool 5
//! ```
//!
//! Implementations: `timerpool`, `batch` (`schedule_batch_at`), `detached`
//! (`schedule_batch_detached_at`), `stp` (scheduled-thread-pool).
//! The second argument is the number of 1,000,000-task bursts (default 5).

#[path = "../../../common/mod.rs"]
mod common;

use common::pools::{Pool, Stp, Timerpool};
use common::workloads::{burst, burst_batch, burst_batch_detached};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map(String::as_str).unwrap_or("timerpool");
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5);
    const N: usize = 1_000_000;
    for _ in 0..rounds {
        let took = match which {
            "timerpool" => {
                let p = Timerpool::start();
                let t = burst(&p, N);
                eprintln!("leader wakeups: {}", p.0.stats().leader_wakeups);
                p.finish();
                t
            }
            "batch" => {
                let p = Timerpool::start();
                let t = burst_batch(&p.0, N, 256);
                p.finish();
                t
            }
            "detached" => {
                let p = Timerpool::start();
                let t = burst_batch_detached(&p.0, N, 256);
                p.finish();
                t
            }
            "stp" => {
                let p = Stp::start();
                let t = burst(&p, N);
                p.finish();
                t
            }
            other => panic!("unknown implementation {other}"),
        };
        println!(
            "{which}: {:.2} M tasks/s",
            N as f64 / took.as_secs_f64() / 1e6
        );
    }
}
