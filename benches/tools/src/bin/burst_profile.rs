//! Burst runs of one implementation, for profiling (`perf record -g`):
//!
//! ```sh
//! cargo build --release -p timerpool-bench-tools --bin burst_profile
//! perf record -g target/release/burst_profile timerpool 5
//! ```
//!
//! Implementations: `timerpool` (`schedule`, a handle per task),
//! `one-detached` (`schedule_detached`, one task per call), `batch`
//! (`schedule_batch_at`), `detached` (`schedule_batch_detached_at`), `stp`
//! (scheduled-thread-pool). The second argument is the number of bursts
//! (default 5), the third the tasks per burst (default 1,000,000; fewer
//! for `valgrind --tool=callgrind`).

#[path = "../../../common/mod.rs"]
mod common;

use common::pools::{Pool, Stp, Timerpool, TimerpoolDetached};
use common::workloads::{burst, burst_batch, burst_batch_detached};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map(String::as_str).unwrap_or("timerpool");
    let rounds: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5);
    let n: usize = args
        .get(3)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    for _ in 0..rounds {
        let took = match which {
            "timerpool" => {
                let p = Timerpool::start();
                let t = burst(&p, n);
                eprintln!("leader wakeups: {}", p.0.stats().leader_wakeups);
                p.finish();
                t
            }
            "one-detached" => {
                let p = TimerpoolDetached::start();
                let t = burst(&p, n);
                p.finish();
                t
            }
            "batch" => {
                let p = Timerpool::start();
                let t = burst_batch(&p.0, n, 256);
                p.finish();
                t
            }
            "detached" => {
                let p = Timerpool::start();
                let t = burst_batch_detached(&p.0, n, 256);
                p.finish();
                t
            }
            "stp" => {
                let p = Stp::start();
                let t = burst(&p, n);
                p.finish();
                t
            }
            other => panic!("unknown implementation {other}"),
        };
        println!(
            "{which}: {:.2} M tasks/s",
            n as f64 / took.as_secs_f64() / 1e6
        );
    }
}
