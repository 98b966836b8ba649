//! The one place where locks, condition variables, channels, atomics and
//! threads come from.
//!
//! Normal builds re-export `parking_lot`, `crossbeam-channel` and `std`.
//! Under `--cfg loom` the same names map to loom's model-checked types (see
//! `docs/protocol.md` and `loom-tests/`), so every interleaving of the pool's
//! protocol can be explored. No other module may name those crates directly.

#[cfg(not(loom))]
mod imp {
    pub(crate) use self::spin::Mutex;
    pub(crate) use crossbeam_channel::{bounded, unbounded, Receiver, Sender, TrySendError};
    pub(crate) use parking_lot::{Condvar, MutexGuard};
    pub(crate) use std::hint::spin_loop;
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
    pub(crate) use std::thread;

    mod spin {
        //! parking_lot's mutex, taken after a short spin while it is held.

        use parking_lot::MutexGuard;

        /// How many times [`Mutex::lock`] looks at a held lock, a pause
        /// apart, before it falls back to parking_lot's own acquisition:
        /// as many as std's futex mutex spins, a few microseconds.
        const SPINS: u32 = 100;

        /// A `parking_lot::Mutex` whose `lock` first spins while the lock
        /// is held. parking_lot spins only a few rounds before it yields
        /// the thread (`sched_yield`), then parks: with a producer and two
        /// workers meeting on the pool's state lock, a burst made a yield
        /// every few tasks, each a system call and most a context switch,
        /// while the critical sections they waited for last a fraction of
        /// a microsecond. A holder that is
        /// running releases the lock well within the spin; one that is
        /// not costs the spin, then parking_lot's wait. An uncontended
        /// lock is taken at once, as before.
        #[derive(Debug)]
        pub(crate) struct Mutex<T>(parking_lot::Mutex<T>);

        impl<T> Mutex<T> {
            /// A new unlocked mutex.
            pub(crate) fn new(value: T) -> Self {
                Mutex(parking_lot::Mutex::new(value))
            }

            /// Acquire the lock: at once if it is free; spinning while it
            /// is held, up to [`SPINS`] looks; else parking_lot's `lock`.
            #[inline]
            pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
                if let Some(guard) = self.0.try_lock() {
                    return guard;
                }
                self.lock_contended()
            }

            /// The held case of [`Mutex::lock`], out of line.
            #[cold]
            fn lock_contended(&self) -> MutexGuard<'_, T> {
                for _ in 0..SPINS {
                    std::hint::spin_loop();
                    if !self.0.is_locked() {
                        if let Some(guard) = self.0.try_lock() {
                            return guard;
                        }
                    }
                }
                self.0.lock()
            }
        }
    }
}

#[cfg(loom)]
mod imp {
    pub(crate) use self::channel::{bounded, unbounded, Receiver, Sender, TrySendError};
    pub(crate) use self::lock::{Condvar, Mutex, MutexGuard};
    pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
    pub(crate) use loom::thread;

    /// One pause of a spin loop: under loom, a turn of the model's
    /// scheduler, so that a spinning thread lets the others move.
    pub(crate) fn spin_loop() {
        loom::thread::yield_now();
    }

    mod lock {
        //! loom's `Mutex`/`Condvar` in the parking_lot shape the crate uses.
        use std::ops::{Deref, DerefMut};
        use std::time::{Duration, Instant};

        /// A loom mutex with parking_lot's `lock()` (no poisoning).
        #[derive(Debug)]
        pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

        /// Guard of [`Mutex`]; `guard` is `None` only while a condvar wait
        /// or [`MutexGuard::unlocked`] holds it.
        pub(crate) struct MutexGuard<'a, T> {
            /// The mutex, to lock again after `unlocked`.
            mutex: &'a loom::sync::Mutex<T>,
            /// loom's guard.
            guard: Option<loom::sync::MutexGuard<'a, T>>,
        }

        impl<T> Mutex<T> {
            #[track_caller]
            pub(crate) fn new(value: T) -> Self {
                Mutex(loom::sync::Mutex::new(value))
            }

            #[track_caller]
            pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
                MutexGuard {
                    mutex: &self.0,
                    guard: Some(self.0.lock().unwrap_or_else(|e| e.into_inner())),
                }
            }
        }

        impl<T> MutexGuard<'_, T> {
            /// Release the lock while `f` runs, as parking_lot's does.
            #[track_caller]
            pub(crate) fn unlocked<U>(s: &mut Self, f: impl FnOnce() -> U) -> U {
                drop(s.guard.take());
                let out = f();
                s.guard = Some(s.mutex.lock().unwrap_or_else(|e| e.into_inner()));
                out
            }
        }

        impl<T> Deref for MutexGuard<'_, T> {
            type Target = T;
            fn deref(&self) -> &T {
                self.guard.as_ref().expect("guard held")
            }
        }

        impl<T> DerefMut for MutexGuard<'_, T> {
            fn deref_mut(&mut self) -> &mut T {
                self.guard.as_mut().expect("guard held")
            }
        }

        /// What a timed wait reports; loom never times out.
        #[derive(Debug, Clone, Copy)]
        pub(crate) struct WaitTimeoutResult;

        impl WaitTimeoutResult {
            /// Always false under loom.
            pub(crate) fn timed_out(&self) -> bool {
                false
            }
        }

        /// A loom condvar with parking_lot's `wait(&mut guard)` shape.
        #[derive(Debug)]
        pub(crate) struct Condvar(loom::sync::Condvar);

        impl Condvar {
            #[track_caller]
            pub(crate) fn new() -> Self {
                Condvar(loom::sync::Condvar::new())
            }

            #[track_caller]
            pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
                let g = guard.guard.take().expect("guard held");
                let g = self.0.wait(g).unwrap_or_else(|e| e.into_inner());
                guard.guard = Some(g);
            }

            /// Untimed under loom: the deadline is ignored.
            #[track_caller]
            pub(crate) fn wait_until<T>(
                &self,
                guard: &mut MutexGuard<'_, T>,
                _deadline: Instant,
            ) -> WaitTimeoutResult {
                self.wait(guard);
                WaitTimeoutResult
            }

            /// Untimed under loom: the timeout is ignored.
            #[track_caller]
            pub(crate) fn wait_for<T>(
                &self,
                guard: &mut MutexGuard<'_, T>,
                _timeout: Duration,
            ) -> WaitTimeoutResult {
                self.wait(guard);
                WaitTimeoutResult
            }

            #[track_caller]
            pub(crate) fn notify_one(&self) {
                self.0.notify_one();
            }

            #[track_caller]
            pub(crate) fn notify_all(&self) {
                self.0.notify_all();
            }
        }
    }

    mod channel {
        //! A multi-consumer queue for loom, which cannot see crossbeam-channel
        //! and whose own mpsc has a single receiver. `recv` fails once every
        //! sender is gone and the queue is empty, as crossbeam's does.
        use super::lock::{Condvar, Mutex};
        use std::collections::VecDeque;
        use std::sync::Arc;

        #[derive(Debug)]
        struct Queue<T> {
            items: VecDeque<T>,
            senders: usize,
            /// Most items held, for a bounded queue.
            capacity: Option<usize>,
        }

        #[derive(Debug)]
        struct Chan<T> {
            queue: Mutex<Queue<T>>,
            ready: Condvar,
        }

        /// Sending half.
        #[derive(Debug)]
        pub(crate) struct Sender<T>(Arc<Chan<T>>);

        /// Receiving half (cloneable: many consumers). Public (in a private
        /// module) because the pool's completion stream hands it out.
        #[derive(Debug)]
        pub struct Receiver<T>(Arc<Chan<T>>);

        /// Why `try_send` gave the value back.
        #[derive(Debug)]
        pub(crate) enum TrySendError<T> {
            /// A bounded queue is full.
            Full(T),
            /// Never happens: receivers are not counted.
            #[allow(dead_code)] // crossbeam's shape; matched, never built
            Disconnected(T),
        }

        /// The value could not be sent (never happens: receivers are not counted).
        #[derive(Debug)]
        pub(crate) struct SendError<T>(#[allow(dead_code)] pub(crate) T);

        /// Every sender is gone and the queue is empty.
        #[derive(Debug)]
        pub(crate) struct RecvError;

        /// A new unbounded queue.
        #[track_caller]
        pub(crate) fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
            queue(None)
        }

        /// A new queue holding `capacity` items at most.
        #[track_caller]
        pub(crate) fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
            queue(Some(capacity))
        }

        #[track_caller]
        fn queue<T>(capacity: Option<usize>) -> (Sender<T>, Receiver<T>) {
            let chan = Arc::new(Chan {
                queue: Mutex::new(Queue {
                    items: VecDeque::new(),
                    senders: 1,
                    capacity,
                }),
                ready: Condvar::new(),
            });
            (Sender(chan.clone()), Receiver(chan))
        }

        impl<T> Sender<T> {
            #[track_caller]
            pub(crate) fn send(&self, value: T) -> Result<(), SendError<T>> {
                let mut q = self.0.queue.lock();
                q.items.push_back(value);
                self.0.ready.notify_one();
                Ok(())
            }

            /// Send unless a bounded queue is full.
            #[track_caller]
            pub(crate) fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
                let mut q = self.0.queue.lock();
                if q.capacity.is_some_and(|c| q.items.len() >= c) {
                    return Err(TrySendError::Full(value));
                }
                q.items.push_back(value);
                self.0.ready.notify_one();
                Ok(())
            }
        }

        impl<T> Clone for Sender<T> {
            #[track_caller]
            fn clone(&self) -> Self {
                self.0.queue.lock().senders += 1;
                Sender(self.0.clone())
            }
        }

        impl<T> Drop for Sender<T> {
            fn drop(&mut self) {
                // A failed model unwinds through here: a loom operation
                // during the unwind would abort the process instead of
                // reporting the failure (LOOM.md).
                if std::thread::panicking() {
                    return;
                }
                let mut q = self.0.queue.lock();
                q.senders -= 1;
                if q.senders == 0 {
                    self.0.ready.notify_all();
                }
            }
        }

        impl<T> Receiver<T> {
            #[track_caller]
            pub(crate) fn recv(&self) -> Result<T, RecvError> {
                let mut q = self.0.queue.lock();
                loop {
                    if let Some(v) = q.items.pop_front() {
                        return Ok(v);
                    }
                    if q.senders == 0 {
                        return Err(RecvError);
                    }
                    self.0.ready.wait(&mut q);
                }
            }
        }

        impl<T> Clone for Receiver<T> {
            fn clone(&self) -> Self {
                Receiver(self.0.clone())
            }
        }
    }
}

pub(crate) use imp::*;
pub(crate) use std::sync::{Arc, Weak};
