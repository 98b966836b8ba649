//! The hand-off: the mailbox the free workers wait on, what travels through
//! it, and the lead token.
//!
//! # Ground rules
//!
//! - No task travels through the channel: a due task stays pending in the
//!   heap until the worker that runs it takes it (`worker::start_one`), so
//!   it waits behind nothing and stays cancellable until it starts.
//! - The channel carries the messages of [`Msg`]: the one [`Lead`] token
//!   (which also wakes the follower it reaches: a leader that finds due
//!   work passes it on before running that work), the leader's request
//!   for a deputy, buffers to free, and the exit pill.
//! - Exactly one [`Lead`] exists while the pool runs; it is in the channel or
//!   held by the one leader, who never runs a task while holding it.

use super::wake::WakePlan;
use crate::sync::{Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The hand-off channel: a queue of messages under its own small lock, and
/// the condition variable the free workers wait on.
///
/// A receiver that finds it empty parks at once: the free workers come back
/// here between due times, and a general-purpose channel's spins and yields
/// before parking cost more CPU than they saved (`docs/bench/lab-notes.md`).
///
/// The mailbox also knows the deadlines of the receivers in a timed wait
/// (the deputies), so that a message can be [handed over](Self::hand_over)
/// to one already waking without waking another thread, and it admits
/// them: whether a receiver may wait with a deadline is decided under its
/// lock, against the deadlines there (step 4a).
pub(crate) struct Mailbox<T> {
    /// Messages and timed receivers.
    inbox: Mutex<Inbox<T>>,
    /// Notified once per message sent (and not handed over).
    ready: Condvar,
}

/// What the mailbox's lock guards.
struct Inbox<T> {
    /// Messages not yet received, oldest first.
    queue: VecDeque<T>,
    /// The deadline of each receiver in a timed wait
    /// ([`Mailbox::recv_watching`]), entered and left under the lock.
    timed: Vec<Instant>,
    /// Receivers in an untimed wait, for tests that must know one waits.
    #[cfg(test)]
    untimed: usize,
}

impl<T> Mailbox<T> {
    /// An empty mailbox.
    pub(crate) fn new() -> Self {
        Mailbox {
            inbox: Mutex::new(Inbox {
                queue: VecDeque::new(),
                timed: Vec::new(),
                #[cfg(test)]
                untimed: 0,
            }),
            ready: Condvar::new(),
        }
    }

    /// How many receivers wait with a deadline now.
    #[cfg(test)]
    pub(crate) fn deputies(&self) -> u64 {
        self.inbox.lock().timed.len() as u64
    }

    /// Whether a receiver waits as a deputy with a deadline at or before
    /// `deadline`: one stands over a due time at `deadline`.
    pub(crate) fn watched_by(&self, deadline: Instant) -> bool {
        self.inbox.lock().timed.iter().any(|&d| d <= deadline)
    }

    /// Queue `msg` and wake one waiting receiver, if any. Never blocks
    /// beyond the queue's short lock.
    pub(crate) fn send(&self, msg: T) {
        let mut inbox = self.inbox.lock();
        inbox.queue.push_back(msg);
        self.ready.notify_one();
    }

    /// Queue `msg` without waking anyone if a receiver waits with a
    /// deadline no later than `within` from now: its own timer ends its
    /// wait by then, and every way out of a timed receive looks at the
    /// queue under this lock, so it takes the message unless another
    /// receiver (the sender itself, back from a short run) took it first.
    /// Otherwise as [`send`](Self::send). This is step 5's quiet pass: a
    /// stream of due times costs no wake-up of a follower per due time.
    pub(crate) fn hand_over(&self, msg: T, within: Duration) {
        let mut inbox = self.inbox.lock();
        self.hand_over_locked(&mut inbox, msg, Instant::now() + within);
    }

    /// Wake one receiver if a message waits with nobody woken for it (a
    /// message [handed over](Self::hand_over) quietly); otherwise nothing.
    pub(crate) fn nudge(&self) {
        let inbox = self.inbox.lock();
        if !inbox.queue.is_empty() {
            self.ready.notify_one();
        }
    }

    /// [`hand_over`](Self::hand_over) under the lock, quiet for a receiver
    /// whose deadline is at or before `by`; true if it woke a receiver.
    fn hand_over_locked(&self, inbox: &mut Inbox<T>, msg: T, by: Instant) -> bool {
        inbox.queue.push_back(msg);
        let waking = inbox.timed.iter().any(|&deadline| deadline <= by);
        if !waking {
            self.ready.notify_one();
        }
        !waking
    }

    /// Step 4a's wait: the oldest message, waiting for one; or, for a
    /// receiver with a `deadline` admitted as a deputy, `None` once the
    /// deadline passes with none (never under loom, whose waits are
    /// untimed). A queued message is taken at once. Otherwise the receiver
    /// waits with its deadline if fewer than `limit` receivers do; past the
    /// limit, or with no deadline, it waits untimed. Admission and leaving
    /// both happen under this lock, so the count it admits against is
    /// exact: a deputy that has taken a message (often the lead) or timed
    /// out no longer counts, even before it runs again, and a worker does
    /// not wait untimed beside a free place.
    pub(crate) fn recv_watching(&self, deadline: Option<Instant>, limit: usize) -> Option<T> {
        let mut inbox = self.inbox.lock();
        if let Some(msg) = inbox.queue.pop_front() {
            return Some(msg);
        }
        match deadline {
            Some(deadline) if inbox.timed.len() < limit => self.wait_until(&mut inbox, deadline),
            _ => Some(self.wait(&mut inbox)),
        }
    }

    /// Wait untimed for a message, under the lock.
    fn wait(&self, inbox: &mut MutexGuard<'_, Inbox<T>>) -> T {
        #[cfg(test)]
        {
            inbox.untimed += 1;
        }
        let msg = loop {
            if let Some(msg) = inbox.queue.pop_front() {
                break msg;
            }
            self.ready.wait(inbox);
        };
        #[cfg(test)]
        {
            inbox.untimed -= 1;
        }
        msg
    }

    /// Wait as a deputy until `deadline`, under the lock: counted in on
    /// entry, out on leaving.
    fn wait_until(&self, inbox: &mut MutexGuard<'_, Inbox<T>>, deadline: Instant) -> Option<T> {
        inbox.timed.push(deadline);
        let got = loop {
            if let Some(msg) = inbox.queue.pop_front() {
                break Some(msg);
            }
            if self.ready.wait_until(inbox, deadline).timed_out() {
                break inbox.queue.pop_front();
            }
        };
        if let Some(i) = inbox.timed.iter().position(|&d| d == deadline) {
            inbox.timed.swap_remove(i);
        }
        got
    }

    /// The oldest message, if one is queued; never waits.
    #[cfg(test)]
    pub(crate) fn try_recv(&self) -> Option<T> {
        self.inbox.lock().queue.pop_front()
    }

    /// How many receivers wait untimed now.
    #[cfg(test)]
    pub(crate) fn untimed(&self) -> usize {
        self.inbox.lock().untimed
    }

    /// Pretend a deputy waits until `deadline`, for tests of the leader's
    /// step 3a.
    #[cfg(test)]
    pub(crate) fn pretend_watching(&self, deadline: Instant) {
        self.inbox.lock().timed.push(deadline);
    }
}

/// What travels through the hand-off channel.
pub(crate) enum Msg {
    /// The leadership token.
    Lead(Lead),
    /// Stop: pass it on to the next worker, then exit.
    Exit,
    /// Memory the heap gave up, to free outside every lock.
    Free(Box<dyn std::any::Any + Send>),
    /// The leader went to sleep until a due time with no deputy standing:
    /// look at the heap (step 4) and so stand deputy over it (step 4a).
    Watch,
}

/// The leadership token. Exactly one exists per running pool; holding it is
/// the only way to wait on the heap. It carries the wake policy's state
/// (`wake.rs`), so what the leaders learn about this machine's timed waits
/// travels with the leadership and needs no lock of its own.
#[derive(Debug)]
pub(crate) struct Lead {
    /// When the leader wakes.
    pub(crate) plan: WakePlan,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mailbox_delivers_in_order_and_a_deadline_ends_an_empty_wait() {
        let mailbox = Mailbox::new();
        mailbox.send(1);
        mailbox.send(2);
        assert_eq!(mailbox.recv_watching(None, 1), Some(1));
        let past = Instant::now();
        assert_eq!(
            mailbox.recv_watching(Some(past), 1),
            Some(2),
            "a message first"
        );
        let soon = Instant::now() + Duration::from_millis(5);
        assert_eq!(mailbox.recv_watching(Some(soon), 1), None);
        assert!(Instant::now() >= soon, "not before the deadline");
        assert_eq!(mailbox.deputies(), 0, "it left");
        let mailbox = std::sync::Arc::new(mailbox);
        let sender = mailbox.clone();
        let waiter = std::thread::spawn(move || mailbox.recv_watching(None, 1));
        sender.send(3);
        assert_eq!(waiter.join().expect("the receiver returns"), Some(3));
    }

    /// Wait (yielding, bounded) until `n` receivers stand deputy.
    fn until_deputies(mailbox: &Mailbox<u32>, n: u64) {
        let bound = Instant::now() + Duration::from_secs(30);
        while mailbox.deputies() != n {
            assert!(Instant::now() < bound, "{n} deputies never stood");
            std::thread::yield_now();
        }
    }

    #[test]
    fn past_the_limit_a_receiver_waits_untimed_and_a_place_counts_free_once_left() {
        let mailbox = std::sync::Arc::new(Mailbox::new());
        let far = Instant::now() + Duration::from_secs(3600);
        let first = mailbox.clone();
        let deputy = std::thread::spawn(move || first.recv_watching(Some(far), 1));
        until_deputies(&mailbox, 1);
        // The limit is reached: the next receiver waits untimed, although
        // its deadline has passed.
        let second = mailbox.clone();
        let past = Instant::now();
        let untimed = std::thread::spawn(move || second.recv_watching(Some(past), 1));
        // Sent only once it waits: sent before, the deputy could take one
        // and leave before the second arrives, which would then find a
        // place free and its deadline passed.
        let bound = Instant::now() + Duration::from_secs(30);
        while mailbox.untimed() != 1 {
            assert!(Instant::now() < bound, "the second never waited");
            std::thread::yield_now();
        }
        mailbox.send(1);
        mailbox.send(2);
        let mut got = [
            deputy.join().expect("returns"),
            untimed.join().expect("returns"),
        ];
        got.sort();
        assert_eq!(got, [Some(1), Some(2)], "both took a message");
        assert_eq!(mailbox.deputies(), 0);
        // A deputy that took a message no longer counts: the place is free
        // for the next receiver, whose deadline then ends its wait.
        let first = mailbox.clone();
        let deputy = std::thread::spawn(move || first.recv_watching(Some(far), 1));
        until_deputies(&mailbox, 1);
        mailbox.send(3);
        assert_eq!(deputy.join().expect("returns"), Some(3));
        assert_eq!(mailbox.deputies(), 0, "counted out under the lock");
        let soon = Instant::now() + Duration::from_millis(2);
        assert_eq!(
            mailbox.recv_watching(Some(soon), 1),
            None,
            "stood, timed out"
        );
    }

    #[test]
    fn a_message_handed_over_reaches_the_receiver_whose_deadline_passed() {
        let mailbox = std::sync::Arc::new(Mailbox::new());
        let inbox = mailbox.clone();
        let deadline = Instant::now() + Duration::from_millis(20);
        let deputy = std::thread::spawn(move || inbox.recv_watching(Some(deadline), 1));
        // Hold the lock once the deputy stands: it is then in its wait (or
        // woken and waiting for the lock), and cannot leave before the
        // message is queued.
        let mut locked = loop {
            let inbox = mailbox.inbox.lock();
            if !inbox.timed.is_empty() {
                break inbox;
            }
            drop(inbox);
            std::thread::yield_now();
        };
        let mut now = Instant::now();
        while now < deadline {
            std::thread::yield_now();
            now = Instant::now();
        }
        let woke = mailbox.hand_over_locked(&mut locked, 7, now);
        drop(locked);
        assert!(!woke, "the deputy past its deadline is not woken");
        assert_eq!(deputy.join().expect("the deputy returns"), Some(7));
        assert!(mailbox.inbox.lock().timed.is_empty(), "it left");
        // With no receiver past its deadline it is a plain send.
        let mut inbox = mailbox.inbox.lock();
        assert!(mailbox.hand_over_locked(&mut inbox, 8, Instant::now()));
        drop(inbox);
        assert_eq!(mailbox.try_recv(), Some(8));
    }
}
