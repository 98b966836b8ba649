//! The naive baseline: one `Mutex<BinaryHeap>` and one `Condvar`, every worker
//! in a timed wait on the head, cancel by flag (the entry stays in the heap
//! until its due time).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering as AtOrd};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Instant;

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Item {
    due: Instant,
    seq: u64,
    cancelled: Arc<AtomicBool>,
    job: Job,
}

impl PartialEq for Item {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Item {
    /// Reversed: `BinaryHeap` is a max-heap, we want the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

struct Inner {
    heap: BinaryHeap<Item>,
    seq: u64,
    stop: bool,
}

struct Shared {
    state: Mutex<Inner>,
    cv: Condvar,
}

/// A handle that cancels by setting a flag.
pub struct NaiveHandle(Arc<AtomicBool>);

impl NaiveHandle {
    /// Mark the task cancelled; it is skipped when it reaches the head.
    pub fn cancel(&self) {
        self.0.store(true, AtOrd::Relaxed);
    }
}

/// `Mutex<BinaryHeap>` + `Condvar` pool.
pub struct NaivePool {
    shared: Arc<Shared>,
    workers: Vec<thread::JoinHandle<()>>,
}

impl NaivePool {
    /// Start `n` workers.
    pub fn new(n: usize) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(Inner {
                heap: BinaryHeap::new(),
                seq: 0,
                stop: false,
            }),
            cv: Condvar::new(),
        });
        let workers = (0..n)
            .map(|_| {
                let s = shared.clone();
                thread::spawn(move || work(&s))
            })
            .collect();
        NaivePool { shared, workers }
    }

    /// Run `f` at `due`.
    pub fn at<F: FnOnce() + Send + 'static>(&self, due: Instant, f: F) -> NaiveHandle {
        let cancelled = Arc::new(AtomicBool::new(false));
        let mut st = self.shared.state.lock().unwrap();
        st.seq += 1;
        let seq = st.seq;
        st.heap.push(Item {
            due,
            seq,
            cancelled: cancelled.clone(),
            job: Box::new(f),
        });
        drop(st);
        self.shared.cv.notify_one();
        NaiveHandle(cancelled)
    }

    /// Stop the workers, dropping what is pending.
    pub fn shutdown(mut self) {
        self.shared.state.lock().unwrap().stop = true;
        self.shared.cv.notify_all();
        for w in self.workers.drain(..) {
            w.join().unwrap();
        }
    }
}

fn work(s: &Shared) {
    let mut st = s.state.lock().unwrap();
    loop {
        if st.stop {
            return;
        }
        let now = Instant::now();
        match st.heap.peek() {
            None => st = s.cv.wait(st).unwrap(),
            Some(head) if head.due > now => {
                let d = head.due - now;
                st = s.cv.wait_timeout(st, d).unwrap().0;
            }
            Some(_) => {
                let item = st.heap.pop().unwrap();
                if item.cancelled.load(AtOrd::Relaxed) {
                    continue;
                }
                drop(st);
                (item.job)();
                st = s.state.lock().unwrap();
            }
        }
    }
}
