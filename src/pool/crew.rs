//! The worker threads: start-up, joining, and the stop when the pool is
//! dropped.

use super::builder::Config;
use super::handoff::{Lead, Msg};
use super::shared::{Key, Mode, Shared};
use super::time;
use super::wake::WakePlan;
use super::worker;
use crate::clock::{PoolWaker, Wake};
use crate::contain::{catch, forget_payload, panic_message, quiet_panics_on_this_thread};
use crate::sync::{thread, unbounded, Arc, Mutex, Sender, Weak};
use crate::Error;

/// Start worker `i`: its start hook (whose result goes to `started`), its
/// life, its stop hook.
fn spawn<K: Key>(
    shared: &Arc<Shared<K>>,
    config: &Config,
    i: usize,
    started: Option<Sender<Result<(), String>>>,
) -> std::io::Result<thread::JoinHandle<()>> {
    let shared = shared.clone();
    // Precision mode asks for wake-ups at the deadline; by default the
    // kernel's timer slack lets it coalesce the leader's wake-ups.
    let precise = config.precision.tight_timers();
    let (quiet, on_start, on_stop) = (
        config.quiet_panics,
        config.on_start.clone(),
        config.on_stop.clone(),
    );
    let mut builder = thread::Builder::new().name(format!("{}-{i}", config.thread_name));
    if let Some(bytes) = config.stack_size {
        builder = builder.stack_size(bytes);
    }
    builder.spawn(move || {
        if precise {
            time::tighten_timer_slack();
        }
        if quiet {
            quiet_panics_on_this_thread();
        }
        if let (Some(hook), Some(started)) = (on_start, started) {
            let ran = catch(|| (hook.0)()).map_err(panic_message);
            let failed = ran.is_err();
            let _ = started.send(ran);
            if failed {
                return;
            }
        }
        worker::work(&shared, i);
        if let Some(hook) = on_stop {
            if let Err(payload) = catch(|| (hook.0)()) {
                forget_payload(payload);
                shared.counters.contained();
            }
        }
    })
}

/// A start-up that failed: stop the workers already started, join them,
/// and give back `error`.
fn stop<K>(shared: &Shared<K>, threads: Vec<thread::JoinHandle<()>>, error: Error) -> Error {
    shared.state.lock().mode = Mode::Stopped;
    shared.handoff.send(Msg::Exit);
    threads.into_iter().for_each(|h| drop(h.join()));
    error
}

/// What dropping the pool stops, without naming the key type.
trait StopAll: Send + Sync {
    /// Step 8 at once, discarding the returned keys.
    fn stop_all(&self);
}

impl<K: Key> StopAll for Shared<K> {
    fn stop_all(&self) {
        drop(self.stop_now());
    }
}

/// The pool's worker threads. Dropping it stops the pool as `shutdown_now`
/// does and joins them.
pub(crate) struct Crew {
    /// Join handles, taken by the first join.
    threads: Mutex<Vec<thread::JoinHandle<()>>>,
    /// Thread ids, to recognise a call from inside a task.
    ids: Vec<thread::ThreadId>,
    /// The engine, to stop on drop.
    engine: Arc<dyn StopAll>,
}

impl Crew {
    /// Start the engine's workers and hand the first of them the token.
    ///
    /// # Errors
    ///
    /// [`Error::Spawn`] if the operating system refused a thread; the ones
    /// already started are stopped and joined.
    pub(crate) fn start<K: Key>(shared: &Arc<Shared<K>>, config: &Config) -> Result<Crew, Error> {
        let weak: Weak<dyn Wake> = Arc::downgrade(shared) as Weak<dyn Wake>;
        shared.time.clock().register(PoolWaker::new(weak));
        // Only a start hook needs the workers to report in.
        let (started_tx, started_rx) = match config.on_start {
            Some(_) => {
                let (tx, rx) = unbounded();
                (Some(tx), Some(rx))
            }
            None => (None, None),
        };
        let mut threads = Vec::with_capacity(config.workers);
        for i in 0..config.workers {
            match spawn(shared, config, i, started_tx.clone()) {
                Ok(h) => threads.push(h),
                Err(e) => return Err(stop(shared, threads, Error::Spawn(e.to_string()))),
            }
        }
        drop(started_tx);
        if let Some(rx) = &started_rx {
            for _ in 0..config.workers {
                if let Ok(Err(why)) = rx.recv() {
                    return Err(stop(shared, threads, Error::ThreadStart(why)));
                }
            }
        }
        let ids: Vec<_> = threads.iter().map(|h| h.thread().id()).collect();
        // Before the token: no task can run before the ids are known.
        let _ = shared.worker_ids.set(ids.clone());
        // The workers' timer slack is the first guess at how late their
        // timed waits end; precision mode sets theirs to a nanosecond.
        let prior = (!config.precision.tight_timers())
            .then(time::timer_slack)
            .flatten();
        let plan = WakePlan::new(config.precision, prior);
        shared.handoff.send(Msg::Lead(Lead { plan }));
        Ok(Crew {
            ids,
            threads: Mutex::new(threads),
            engine: shared.clone(),
        })
    }

    /// Worker threads.
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    /// Wait until every worker has exited, or `deadline` passed (`None`:
    /// without a bound); true when they all have, and then join them. From
    /// one of the workers it does not wait (a worker cannot wait for itself).
    pub(crate) fn await_exit<K>(
        &self,
        shared: &Shared<K>,
        deadline: Option<std::time::Instant>,
    ) -> bool {
        if self.ids.contains(&thread::current().id()) {
            return *shared.live.lock() == 0;
        }
        let mut live = shared.live.lock();
        while *live > 0 {
            match deadline {
                Some(d) if std::time::Instant::now() >= d => return false,
                Some(d) => {
                    shared.exited.wait_until(&mut live, d);
                }
                None => shared.exited.wait(&mut live),
            }
        }
        drop(live);
        self.join();
        true
    }

    /// Join every worker, unless called from one of them (a worker cannot
    /// join itself).
    pub(crate) fn join(&self) {
        if self.ids.contains(&thread::current().id()) {
            return;
        }
        let mut threads = self.threads.lock();
        for h in threads.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        // A loom model that failed unwinds through here; stopping the pool
        // would run loom operations during the unwind, which aborts the test
        // process instead of reporting the model's failure.
        if std::thread::panicking() && cfg!(loom) {
            return;
        }
        self.engine.stop_all();
        self.join();
    }
}
