//! The completion channel: a bounded crossbeam channel whose sender the
//! pool drops once the stream has ended, and the receiver it hands out,
//! blocking (`recv`, an iterator, crossbeam's `select!`) and asynchronous
//! (a `futures_core::Stream`).
//!
//! # Ground rules
//!
//! - The stream ends when the pool has shut down and no record can follow:
//!   the channel's one sender is dropped, so every receiver, blocking or
//!   polled, reads the records left and then sees the end, as crossbeam's
//!   receivers do once every sender is gone. The pool object need not be
//!   dropped (an `Arc<TimerPool>` may still be held).
//! - No record can follow once the workers have exited (they make the
//!   records of runs) and no caller is inside a section that may end a task
//!   from outside them (cancel, a replacing schedule, a shutdown, the
//!   pool's drop): such a section holds the stream open ([`Outlet::hold`])
//!   from before it takes the pool's lock until its records are sent, and
//!   the workers hold it open together until the last of them exits. The
//!   last release closes it. A section entered after the end removes
//!   nothing (nothing is pending once the workers have exited), so no
//!   record is lost to the end.
//! - A record and a waker registration meet under the outlet's lock: a
//!   sender stores the record and takes the wakers in one critical section,
//!   a polled receiver registers its waker in another and then looks again,
//!   so a wake-up cannot be lost. Wakers are woken after the lock is
//!   released.
//! - Sending never blocks (a full channel drops the record, counted by the
//!   caller), and nothing but a `try_send` runs under the outlet's lock.

use super::record::Completion;
use crate::contain::{catch, forget_payload};
use crate::sync::{Arc, AtomicU64, Mutex, Ordering, Receiver, Sender};
use std::fmt;
use std::task::Waker;

/// The sending side of a pool's completion channel: the sender, the wakers
/// of receivers polled as a stream, and who may still send.
pub(crate) struct Outlet<K> {
    /// The sender (`None` once the stream ended) and the waiting wakers.
    inner: Mutex<Inlet<K>>,
    /// Parties that may still send: one for the workers together, plus one
    /// per section in progress that may end a task from outside them.
    holds: AtomicU64,
    /// Numbers of receivers handed out, to tell their wakers apart.
    receivers: AtomicU64,
}

/// What the outlet's lock guards.
struct Inlet<K> {
    /// The channel's one sender; dropping it ends the stream.
    sender: Option<Sender<Completion<K>>>,
    /// Wakers of receivers polled while the channel was empty, by receiver
    /// number, at most one each.
    wakers: Vec<(u64, Waker)>,
}

impl<K> Outlet<K> {
    /// The outlet of a channel of `capacity` records, and its first
    /// receiver; held open by the workers until the last one exits.
    pub(crate) fn new(capacity: usize) -> (Arc<Self>, Receiver<Completion<K>>) {
        let (tx, rx) = crate::sync::bounded(capacity);
        let outlet = Outlet {
            inner: Mutex::new(Inlet {
                sender: Some(tx),
                wakers: Vec::new(),
            }),
            holds: AtomicU64::new(1),
            receivers: AtomicU64::new(0),
        };
        (Arc::new(outlet), rx)
    }

    /// Send `record` unless the channel is full or the stream ended (the
    /// record is then handed back), and wake the receivers polled while it
    /// was empty.
    pub(crate) fn send(&self, record: Completion<K>) -> Result<(), Completion<K>> {
        let wakers = {
            let mut inlet = self.inner.lock();
            let Some(tx) = &inlet.sender else {
                return Err(record);
            };
            if let Err(e) = tx.try_send(record) {
                return Err(match e {
                    crate::sync::TrySendError::Full(r)
                    | crate::sync::TrySendError::Disconnected(r) => r,
                });
            }
            if inlet.wakers.is_empty() {
                // No receiver is polled: the common case of a blocking one.
                return Ok(());
            }
            std::mem::take(&mut inlet.wakers)
        };
        wake(wakers);
        Ok(())
    }

    /// Hold the stream open for a section that may end tasks.
    pub(crate) fn hold(&self) {
        self.holds.fetch_add(1, Ordering::SeqCst);
    }

    /// End a hold (the workers' one, or a section's); the last ends the
    /// stream.
    pub(crate) fn release(&self) {
        if self.holds.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.close();
        }
    }

    /// End the stream: drop the sender, so receivers read what is left and
    /// then see the end, and wake every polled receiver. Idempotent.
    pub(crate) fn close(&self) {
        let (sender, wakers) = {
            let mut inlet = self.inner.lock();
            let wakers = std::mem::take(&mut inlet.wakers);
            (inlet.sender.take(), wakers)
        };
        drop(sender);
        wake(wakers);
    }

    /// True once the stream ended.
    #[cfg_attr(loom, allow(dead_code))] // the loom build has no polled receiver
    fn ended(&self) -> bool {
        self.inner.lock().sender.is_none()
    }

    /// Keep `waker` to be woken by the next record or the end, as receiver
    /// `id`'s only waker.
    #[cfg_attr(loom, allow(dead_code))]
    fn register(&self, id: u64, waker: &Waker) {
        let mut inlet = self.inner.lock();
        if inlet.sender.is_none() {
            // Ended: the receiver's next look sees it.
            return;
        }
        match inlet.wakers.iter_mut().find(|(i, _)| *i == id) {
            Some((_, kept)) => kept.clone_from(waker),
            None => inlet.wakers.push((id, waker.clone())),
        }
    }

    /// Forget receiver `id`'s waker.
    fn unregister(&self, id: u64) {
        let mut inlet = self.inner.lock();
        inlet.wakers.retain(|(i, _)| *i != id);
    }
}

/// Wake `wakers` (the executor's code: a panic is contained).
fn wake(wakers: Vec<(u64, Waker)>) {
    for (_, w) in wakers {
        if let Err(payload) = catch(move || w.wake()) {
            forget_payload(payload);
        }
    }
}

/// The receiving end of a pool's completion stream
/// ([`Builder::completions`](crate::Builder::completions),
/// [`TimerPool::completions`](crate::TimerPool::completions)): read it
/// blocking ([`recv`](Self::recv), [`recv_timeout`](Self::recv_timeout),
/// [`iter`](Self::iter), crossbeam's `select!` through
/// [`as_crossbeam`](Self::as_crossbeam)) or poll it as a
/// [`futures_core::Stream`] from async code, without a blocking thread.
///
/// The stream ends once the pool has shut down (any shutdown, or the drop)
/// and the record of its last task's end was sent: the records left are
/// read first, then `recv` returns an error, the iterator returns `None`
/// and the stream yields `None`. Whoever still holds the pool (an
/// `Arc<TimerPool>`, say) does not keep it open, nor do task handles.
///
/// Every clone (and every receiver [`TimerPool::completions`](crate::TimerPool::completions)
/// hands out) shares one queue: each record goes to one of them.
///
/// # Examples
///
/// Blocking: the iterator ends after the shutdown's last record, while the
/// pool is still held.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use timerpool::{Outcome, TimerPool};
///
/// let pool = Arc::new(TimerPool::<&str>::builder().workers(1).completions(64).build()?);
/// let done = pool.completions().unwrap();
/// let consumer = std::thread::spawn(move || {
///     done.iter().map(|c| (c.key, c.outcome)).collect::<Vec<_>>()
/// });
/// pool.schedule("a", Duration::ZERO, || ())?.wait();
/// pool.schedule_detached("b", Duration::from_secs(60), || ())?;
/// pool.shutdown_now();
/// let mut seen = consumer.join().unwrap(); // it ended, and `pool` is still held
/// // "a"'s record is sent after its run, and may come after "b"'s.
/// seen.sort_by_key(|(key, _)| *key);
/// assert_eq!(seen, [(Some("a"), Outcome::Completed(())), (Some("b"), Outcome::Shutdown)]);
/// # Ok::<(), timerpool::Error>(())
/// ```
///
/// Async: a `Stream`, here through `std::future::poll_fn` (with
/// `StreamExt` from `futures-util` or `tokio-stream`, `done.next().await`),
/// in tokio or any executor.
///
/// ```
/// use futures_core::Stream;
/// use std::pin::Pin;
/// use std::time::Duration;
/// use timerpool::TimerPool;
///
/// async fn next<S: Stream + Unpin>(s: &mut S) -> Option<S::Item> {
///     std::future::poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
/// }
///
/// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// # rt.block_on(async {
/// let pool = TimerPool::<u32>::builder().workers(1).completions(64).build()?;
/// let mut done = pool.completions().unwrap();
/// pool.schedule_detached(7, Duration::from_millis(1), || ())?;
/// assert_eq!(next(&mut done).await.unwrap().key, Some(7));
/// pool.begin_shutdown();
/// assert!(next(&mut done).await.is_none(), "ended at shutdown");
/// # Ok::<(), timerpool::Error>(())
/// # })?;
/// # Ok::<(), timerpool::Error>(())
/// ```
pub struct CompletionReceiver<K> {
    /// The channel's receiving end.
    rx: Receiver<Completion<K>>,
    /// Its sending side, to register wakers with.
    outlet: Arc<Outlet<K>>,
    /// This receiver's number, for its waker.
    id: u64,
    /// Polled to its end (for `FusedStream`).
    #[cfg_attr(loom, allow(dead_code))]
    done: bool,
}

impl<K> CompletionReceiver<K> {
    /// A new receiver of `outlet`'s channel, reading from `rx`.
    pub(crate) fn new(rx: Receiver<Completion<K>>, outlet: Arc<Outlet<K>>) -> Self {
        let id = outlet.receivers.fetch_add(1, Ordering::Relaxed);
        CompletionReceiver {
            rx,
            outlet,
            id,
            done: false,
        }
    }

    /// Wait for the next record; `Err` once the stream has ended and every
    /// record was read.
    ///
    /// # Errors
    ///
    /// [`RecvError`](std::sync::mpsc::RecvError) once the stream has ended.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u32>::builder().workers(1).completions(8).build()?;
    /// let done = pool.completions().unwrap();
    /// pool.schedule_detached(1, Duration::ZERO, || ())?;
    /// assert_eq!(done.recv().unwrap().key, Some(1));
    /// pool.shutdown();
    /// assert!(done.recv().is_err(), "ended");
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn recv(&self) -> Result<Completion<K>, std::sync::mpsc::RecvError> {
        self.rx.recv().map_err(|_| std::sync::mpsc::RecvError)
    }

    /// Read the records as they come; the iterator ends with the stream.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u32>::builder().workers(1).completions(8).build()?;
    /// let done = pool.completions().unwrap();
    /// for k in 0..3 {
    ///     pool.schedule_detached(k, Duration::ZERO, || ())?;
    /// }
    /// pool.shutdown();
    /// assert_eq!(done.iter().count(), 3);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = Completion<K>> + '_ {
        std::iter::from_fn(move || self.recv().ok())
    }
}

#[cfg(not(loom))]
impl<K> CompletionReceiver<K> {
    /// Wait at most `timeout` for the next record.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`](std::sync::mpsc::RecvTimeoutError::Timeout)
    /// when none came in time,
    /// [`RecvTimeoutError::Disconnected`](std::sync::mpsc::RecvTimeoutError::Disconnected)
    /// once the stream has ended and every record was read.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc::RecvTimeoutError;
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u32>::builder().workers(1).completions(8).build()?;
    /// let done = pool.completions().unwrap();
    /// let waited = done.recv_timeout(Duration::from_millis(1));
    /// assert_eq!(waited.unwrap_err(), RecvTimeoutError::Timeout);
    /// pool.shutdown();
    /// let ended = done.recv_timeout(Duration::from_secs(10));
    /// assert_eq!(ended.unwrap_err(), RecvTimeoutError::Disconnected);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn recv_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> Result<Completion<K>, std::sync::mpsc::RecvTimeoutError> {
        use std::sync::mpsc::RecvTimeoutError;
        self.rx
            .recv_timeout(timeout)
            .map_err(|e| match e.is_timeout() {
                true => RecvTimeoutError::Timeout,
                false => RecvTimeoutError::Disconnected,
            })
    }

    /// The next record if one is waiting.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`](std::sync::mpsc::TryRecvError::Empty) when
    /// none is waiting,
    /// [`TryRecvError::Disconnected`](std::sync::mpsc::TryRecvError::Disconnected)
    /// once the stream has ended and every record was read.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc::TryRecvError;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u32>::builder().workers(1).completions(8).build()?;
    /// let done = pool.completions().unwrap();
    /// assert_eq!(done.try_recv().unwrap_err(), TryRecvError::Empty);
    /// pool.shutdown();
    /// assert_eq!(done.try_recv().unwrap_err(), TryRecvError::Disconnected);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn try_recv(&self) -> Result<Completion<K>, std::sync::mpsc::TryRecvError> {
        use std::sync::mpsc::TryRecvError;
        self.rx.try_recv().map_err(|e| match e.is_empty() {
            true => TryRecvError::Empty,
            false => TryRecvError::Disconnected,
        })
    }

    /// The records waiting now, without blocking.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u32>::builder().workers(1).completions(8).build()?;
    /// let done = pool.completions().unwrap();
    /// pool.schedule_detached(1, Duration::ZERO, || ())?;
    /// pool.settle(Duration::from_secs(10))?; // reported once settled
    /// assert_eq!(done.try_iter().count(), 1);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn try_iter(&self) -> impl Iterator<Item = Completion<K>> + '_ {
        self.rx.try_iter()
    }

    /// Records waiting to be read.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u32>::builder().workers(1).completions(8).build()?;
    /// let done = pool.completions().unwrap();
    /// pool.schedule_detached(1, Duration::ZERO, || ())?;
    /// pool.settle(Duration::from_secs(10))?;
    /// assert_eq!((done.len(), done.is_empty()), (1, false));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.rx.len()
    }

    /// True when no record waits to be read.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u32>::builder().workers(1).completions(8).build()?;
    /// assert!(pool.completions().unwrap().is_empty());
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// True once the stream has ended (the pool shut down and sent its
    /// last record); records may still wait to be read.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u32>::builder().workers(1).completions(8).build()?;
    /// let done = pool.completions().unwrap();
    /// assert!(!done.is_ended());
    /// pool.shutdown();
    /// assert!(done.is_ended());
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn is_ended(&self) -> bool {
        self.outlet.ended()
    }

    /// The underlying [`crossbeam_channel::Receiver`](https://docs.rs/crossbeam-channel),
    /// for crossbeam's `select!` beside other channels. It sees the same
    /// records and the same end (a disconnection).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    /// let pool = TimerPool::<u32>::builder().workers(1).completions(8).build()?;
    /// let done = pool.completions().unwrap();
    /// pool.schedule_detached(3, Duration::ZERO, || ())?;
    /// let record = done.as_crossbeam().recv_timeout(Duration::from_secs(10)).unwrap();
    /// assert_eq!(record.key, Some(3));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn as_crossbeam(&self) -> &Receiver<Completion<K>> {
        &self.rx
    }

    /// The next record if one waits, or the end.
    fn poll_ready(&mut self) -> Option<Option<Completion<K>>> {
        match self.rx.try_recv() {
            Ok(record) => Some(Some(record)),
            Err(e) if e.is_disconnected() => {
                self.done = true;
                Some(None)
            }
            Err(_) => None,
        }
    }
}

/// Polled while empty, a receiver keeps the task's waker (one per
/// receiver) with the pool, which wakes it with the next record or the
/// stream's end; the stream yields `None` once ended and read.
#[cfg(not(loom))]
impl<K> futures_core::Stream for CompletionReceiver<K> {
    type Item = Completion<K>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Completion<K>>> {
        use std::task::Poll;
        let this = self.get_mut();
        if let Some(next) = this.poll_ready() {
            return Poll::Ready(next);
        }
        this.outlet.register(this.id, cx.waker());
        // A record sent before the registration is seen now; one sent
        // after it wakes the waker.
        match this.poll_ready() {
            Some(next) => Poll::Ready(next),
            None => Poll::Pending,
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.rx.len(), None)
    }
}

/// The stream is over once it yielded `None`.
#[cfg(not(loom))]
impl<K> futures_core::FusedStream for CompletionReceiver<K> {
    fn is_terminated(&self) -> bool {
        self.done
    }
}

// Nothing of a receiver is pinned: polling takes it by `&mut`, whatever
// the key type.
impl<K> Unpin for CompletionReceiver<K> {}

impl<K> Clone for CompletionReceiver<K> {
    fn clone(&self) -> Self {
        CompletionReceiver::new(self.rx.clone(), self.outlet.clone())
    }
}

impl<K> Drop for CompletionReceiver<K> {
    fn drop(&mut self) {
        // A failed loom model unwinds through here: no loom operation then.
        if cfg!(loom) && std::thread::panicking() {
            return;
        }
        self.outlet.unregister(self.id);
    }
}

impl<K> fmt::Debug for CompletionReceiver<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompletionReceiver")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Iterating a receiver by value reads the records as they come, until the
/// stream ends.
///
/// ```
/// use std::time::Duration;
/// use timerpool::TimerPool;
/// let pool = TimerPool::<u32>::builder().workers(1).completions(8).build()?;
/// let done = pool.completions().unwrap();
/// pool.schedule_detached(1, Duration::ZERO, || ())?;
/// pool.shutdown();
/// let keys: Vec<_> = done.into_iter().map(|c| c.key).collect();
/// assert_eq!(keys, [Some(1)]);
/// # Ok::<(), timerpool::Error>(())
/// ```
impl<K> IntoIterator for CompletionReceiver<K> {
    type Item = Completion<K>;
    type IntoIter = CompletionIter<K>;

    fn into_iter(self) -> CompletionIter<K> {
        CompletionIter(self)
    }
}

/// The iterator of a [`CompletionReceiver`] taken by value: the records as
/// they come, until the stream ends.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{CompletionIter, TimerPool};
/// let pool = TimerPool::<u32>::builder().workers(1).completions(8).build()?;
/// let records: CompletionIter<u32> = pool.completions().unwrap().into_iter();
/// pool.shutdown();
/// assert_eq!(records.count(), 0);
/// # Ok::<(), timerpool::Error>(())
/// ```
#[derive(Debug)]
pub struct CompletionIter<K>(CompletionReceiver<K>);

impl<K> Iterator for CompletionIter<K> {
    type Item = Completion<K>;

    fn next(&mut self) -> Option<Completion<K>> {
        self.0.recv().ok()
    }
}
