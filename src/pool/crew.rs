//! The worker threads: start-up, joining, and the stop when the pool is
//! dropped.

use super::builder::Config;
use super::handoff::{Lead, Msg};
use super::shared::{Key, Mode, Shared};
use super::worker;
use crate::clock::{PoolWaker, Wake};
use crate::contain::quiet_panics_on_this_thread;
use crate::sync::{thread, Arc, Mutex, Weak};
use crate::Error;

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
        let mut threads = Vec::with_capacity(config.workers);
        for i in 0..config.workers {
            let worker_shared = shared.clone();
            let quiet = config.quiet_panics;
            let spawned = thread::Builder::new()
                .name(format!("{}-{i}", config.thread_name))
                .spawn(move || {
                    if quiet {
                        quiet_panics_on_this_thread();
                    }
                    worker::work(&worker_shared, i)
                });
            match spawned {
                Ok(h) => threads.push(h),
                Err(e) => {
                    shared.state.lock().mode = Mode::Stopped;
                    let _ = shared.tx.send(Msg::Exit);
                    threads.into_iter().for_each(|h| drop(h.join()));
                    return Err(Error::Spawn(e.to_string()));
                }
            }
        }
        let _ = shared.tx.send(Msg::Lead(Lead::first()));
        Ok(Crew {
            ids: threads.iter().map(|h| h.thread().id()).collect(),
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
