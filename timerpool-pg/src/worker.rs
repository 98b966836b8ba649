//! A worker of a node: takes claimed attempts from the leader's channel,
//! runs the named handler outside every lock with panics caught, and sends
//! the result to the recorder.

use crate::recorder::{Done, Msg, Verdict};
use crate::shared::{Job, Shared};
use crossbeam_channel::{Receiver, Sender};
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

/// Runs attempts until the leader is gone and the channel is empty.
pub(crate) fn run(shared: &Shared, jobs: Receiver<Job>, done: Sender<Msg>) {
    while let Ok(job) = jobs.recv() {
        let started = job.claimed + job.received.elapsed();
        shared.counters.started.fetch_add(1, Ordering::Relaxed);
        if job.attempt > 1 {
            shared.counters.reruns.fetch_add(1, Ordering::Relaxed);
        }
        let verdict = attempt(shared, &job);
        let finished = job.claimed + job.received.elapsed();
        // The recorder outlives the workers; an error means it is gone.
        let _ = done.send(Msg::Done(Done::ran(&job, verdict, started, finished)));
        release(shared);
    }
}

/// Runs the handler once and says how it went.
fn attempt(shared: &Shared, job: &Job) -> Verdict {
    let Some(handler) = shared.handlers.get(&job.handler) else {
        return Verdict::Failed(format!(
            "no handler named {:?} is registered on node {}",
            job.handler, shared.cfg.id
        ));
    };
    match catch_unwind(AssertUnwindSafe(|| handler(job))) {
        Ok(Ok(())) => Verdict::Completed,
        Ok(Err(e)) => Verdict::Failed(e.to_string()),
        Err(panic) => Verdict::Failed(format!("panicked: {}", panic_message(&*panic))),
    }
}

/// The text of a panic payload, as std's hook prints it.
pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_string()
    }
}

/// Frees a claim slot, waking the leader once half of them are free.
pub(crate) fn release(shared: &Shared) {
    let mut n = shared.in_flight.lock();
    *n -= 1;
    if *n <= shared.cfg.prefetch / 2 {
        shared.room.notify_one();
    }
}
