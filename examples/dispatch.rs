//! Ride dispatch: offer each trip to a driver with an accept window, keyed by
//! trip id. Accepts cancel the timeout, reassignments move it, and a fired
//! timeout re-dispatches the trip to another driver.
//!
//! The 15 s window is scaled 1:100 (150 ms) so the run takes a few seconds.
//!
//! ```text
//! cargo run --release --example dispatch [-- --trips N --workers N]
//! ```

use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use timerpool::{Outcome, TaskHandle, TimerPool};

/// The accept window, 15 s scaled 1:100.
const WINDOW: Duration = Duration::from_millis(150);
/// Offers per trip before it is given up as unserved.
const MAX_OFFERS: u32 = 3;
/// Trips arrive over this long.
const ARRIVALS: Duration = Duration::from_secs(2);

/// Where one trip stands; every transition happens under its lock.
#[derive(Default)]
struct Trip {
    /// Offers made so far.
    offers: u32,
    /// Bumped by every offer, accept and reassignment: a timeout or driver
    /// response for an older generation is stale and does nothing.
    generation: u32,
    /// Accepted or given up.
    closed: bool,
}

/// What a driver does with an offer.
#[derive(Clone, Copy)]
enum Response {
    /// Accepts after the delay: the timeout is cancelled.
    Accept(Duration),
    /// The dispatcher moves the offer to another driver after the delay: the
    /// same key is rescheduled with a new deadline.
    Reassign(Duration),
    /// Never answers: the timeout fires.
    Silent,
}

#[derive(Default)]
struct Counters {
    offers: AtomicU64,
    accepts: AtomicU64,
    reassignments: AtomicU64,
    timeouts_fired: AtomicU64,
    stale: AtomicU64,
    unserved: AtomicU64,
    early: AtomicU64,
}

type Handles = Mutex<Vec<TaskHandle<(), u64>>>;

struct Dispatch {
    pool: TimerPool<u64>,
    trips: Vec<Mutex<Trip>>,
    counters: Counters,
    lateness: Mutex<Histogram<u64>>,
    handles: Handles,
    resolved: Mutex<mpsc::Sender<u64>>,
}

/// A deterministic pseudo-random number from a trip and generation.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn respond(trip: u64, generation: u32) -> Response {
    let r = mix(trip << 32 | generation as u64);
    let delay = WINDOW.mul_f64((r >> 16) as f64 / (1u64 << 48) as f64 * 0.9);
    match r % 100 {
        0..=44 => Response::Accept(delay),
        45..=64 => Response::Reassign(delay),
        _ => Response::Silent,
    }
}

impl Dispatch {
    /// Offer `trip` to the next driver. Called with the trip's lock held.
    fn offer(self: &Arc<Self>, id: u64, trip: &mut Trip) {
        trip.offers += 1;
        trip.generation += 1;
        self.counters.offers.fetch_add(1, Relaxed);
        self.arm_timeout(id, trip.generation);
        if let Response::Accept(after) | Response::Reassign(after) = respond(id, trip.generation) {
            let (me, generation) = (self.clone(), trip.generation);
            let h = self
                .pool
                .submit(after, move || me.driver_answers(id, generation))
                .expect("pool runs until every trip is resolved");
            self.handles.lock().unwrap().push(h);
        }
    }

    /// Schedule (or move) the trip's timeout for this generation.
    fn arm_timeout(self: &Arc<Self>, id: u64, generation: u32) {
        let due = Instant::now() + WINDOW;
        let me = self.clone();
        let h = self
            .pool
            .schedule(id, due, move || me.timeout(id, generation, due))
            .expect("pool runs until every trip is resolved");
        self.handles.lock().unwrap().push(h);
    }

    fn driver_answers(self: &Arc<Self>, id: u64, generation: u32) {
        let mut trip = self.trips[id as usize].lock().unwrap();
        if trip.closed || trip.generation != generation {
            self.counters.stale.fetch_add(1, Relaxed);
            return;
        }
        match respond(id, generation) {
            Response::Accept(_) => {
                trip.closed = true;
                trip.generation += 1;
                // False only if the timeout was already claimed; it will see
                // the new generation and do nothing.
                self.pool.cancel(&id);
                self.counters.accepts.fetch_add(1, Relaxed);
                self.resolve(id);
            }
            Response::Reassign(_) => {
                self.counters.reassignments.fetch_add(1, Relaxed);
                trip.generation += 1;
                // Same key: the pending timeout is replaced, not duplicated.
                self.arm_timeout(id, trip.generation);
                let (me, generation) = (self.clone(), trip.generation);
                if let Response::Accept(after) = respond(id, generation) {
                    let h = self
                        .pool
                        .submit(after, move || me.driver_answers(id, generation))
                        .expect("pool runs until every trip is resolved");
                    self.handles.lock().unwrap().push(h);
                }
            }
            Response::Silent => unreachable!("silent drivers schedule no answer"),
        }
    }

    fn timeout(self: &Arc<Self>, id: u64, generation: u32, due: Instant) {
        let started = Instant::now();
        match started.checked_duration_since(due) {
            Some(late) => {
                let ns = late.as_nanos().min(u64::MAX as u128) as u64;
                self.lateness.lock().unwrap().saturating_record(ns);
            }
            None => {
                self.counters.early.fetch_add(1, Relaxed);
            }
        }
        let mut trip = self.trips[id as usize].lock().unwrap();
        if trip.closed || trip.generation != generation {
            self.counters.stale.fetch_add(1, Relaxed);
            return;
        }
        self.counters.timeouts_fired.fetch_add(1, Relaxed);
        if trip.offers >= MAX_OFFERS {
            trip.closed = true;
            self.counters.unserved.fetch_add(1, Relaxed);
            self.resolve(id);
        } else {
            self.offer(id, &mut trip); // re-dispatch to another driver
        }
    }

    fn resolve(&self, id: u64) {
        let _ = self.resolved.lock().unwrap().send(id);
    }
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number"))
        })
        .unwrap_or(default)
}

fn main() {
    let trips = arg("--trips", 40_000);
    let workers = arg("--workers", 4) as usize;
    let pool = TimerPool::builder()
        .workers(workers)
        .thread_name("dispatch")
        .build()
        .expect("start the pool");
    let (tx, rx) = mpsc::channel();
    let d = Arc::new(Dispatch {
        pool,
        trips: (0..trips).map(|_| Mutex::default()).collect(),
        counters: Counters::default(),
        lateness: Mutex::new(
            Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("histogram bounds"),
        ),
        handles: Mutex::new(Vec::new()),
        resolved: Mutex::new(tx),
    });

    println!(
        "dispatch: {trips} trips arriving over {:?}, {workers} workers, accept window {:?} (15 s scaled 1:100)",
        ARRIVALS, WINDOW
    );
    let start = Instant::now();
    let cpu = cpu_time::ProcessTime::now();
    let gap = ARRIVALS / trips.max(1) as u32;
    for id in 0..trips {
        // Pace arrivals: trips come in over ARRIVALS, not all at once.
        let arrive = start + gap * id as u32;
        if let Some(wait) = arrive.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let mut trip = d.trips[id as usize].lock().unwrap();
        d.offer(id, &mut trip);
    }
    for _ in 0..trips {
        rx.recv_timeout(Duration::from_secs(30))
            .expect("every trip is accepted or given up");
    }
    let elapsed = start.elapsed();
    // The simulation's own threads use little: this is mostly the pool.
    let cpu = cpu.elapsed();
    d.pool.shutdown();

    let handles = std::mem::take(&mut *d.handles.lock().unwrap());
    let (mut completed, mut panicked, mut cancelled, mut replaced, mut shutdown, mut expired) =
        (0, 0, 0, 0, 0, 0);
    let total = handles.len();
    for h in handles {
        match h.try_outcome() {
            Ok(Outcome::Completed(())) => completed += 1,
            Ok(Outcome::Panicked(_)) => panicked += 1,
            Ok(Outcome::Cancelled) => cancelled += 1,
            Ok(Outcome::Replaced) => replaced += 1,
            Ok(Outcome::Shutdown) => shutdown += 1,
            Ok(Outcome::Expired) => expired += 1,
            Err(_) => panic!("a task has no outcome after shutdown"),
        }
    }
    let c = &d.counters;
    let h = d.lateness.lock().unwrap();
    println!(
        "finished in {:.2} s (set by the arrivals and the accept window, not a speed figure)",
        elapsed.as_secs_f64()
    );
    println!("offers           {:>8}", c.offers.load(Relaxed));
    println!("accepts          {:>8}", c.accepts.load(Relaxed));
    println!("reassignments    {:>8}", c.reassignments.load(Relaxed));
    println!("timeouts fired   {:>8}", c.timeouts_fired.load(Relaxed));
    println!("unserved trips   {:>8}", c.unserved.load(Relaxed));
    println!(
        "stale callbacks  {:>8}  (timeout or answer that lost a race; did nothing)",
        c.stale.load(Relaxed)
    );
    println!(
        "outcomes         {total:>8} tasks: completed {completed}, panicked {panicked}, cancelled {cancelled}, replaced {replaced}, shutdown {shutdown}, expired {expired}"
    );
    println!(
        "timeout lateness (start - due, {} samples): p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs; early starts {}",
        h.len(),
        h.value_at_quantile(0.50) as f64 / 1e3,
        h.value_at_quantile(0.99) as f64 / 1e3,
        h.max() as f64 / 1e3,
        c.early.load(Relaxed)
    );
    println!(
        "CPU              {:.2} s for {:.2} s of wall time: {:.0}% of one core",
        cpu.as_secs_f64(),
        elapsed.as_secs_f64(),
        100.0 * cpu.as_secs_f64() / elapsed.as_secs_f64()
    );
    assert_eq!(
        completed + panicked + cancelled + replaced + shutdown + expired,
        total
    );
    assert_eq!(
        c.early.load(Relaxed),
        0,
        "a task started before its due time"
    );
}
