//! Deliberate protocol faults for the loom models.
//!
//! Each [`Fault`] replaces one step of the leader-follower protocol with a
//! broken version of itself, the way one model in `loom-tests/` guards
//! against, so that model can be shown to fail (`docs/loom.md`). The
//! production code asks [`Faults::has`] in a one-line guard where a step can
//! be broken; outside `--cfg loom` that is a constant `false`, so the guards
//! compile away and a pool always runs the real protocol. Broken steps that
//! need more than a guard live beside this list, in `broken.rs`.

/// One way to break the protocol.
// Only `Builder::fault` (under loom) builds a fault.
#[cfg_attr(not(loom), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// `schedule` does not notify the leader when the earliest due time
    /// changes, so a leader waiting for a later deadline sleeps through an
    /// earlier task.
    NoNotifyOnNewHead,
    /// The leader decides to wait from one critical section and waits in
    /// another (release and re-lock in between): a task scheduled in the gap
    /// notifies nobody. The mode is re-read after the re-lock, so this breaks
    /// the head check only and leaves shutdown to [`Fault::ShutdownNoNotify`].
    UnlockBeforeWait,
    /// The leader reads the clock once per leadership and compares against
    /// that reading after every wake, instead of re-reading it.
    StaleClock,
    /// `cancel` looks the key up in one critical section and removes it in
    /// another, and reports the lookup: a start in between runs a task whose
    /// cancel returned true.
    CancelCheckThenRemove,
    /// Scheduling a pending key adds the new task beside the old one (as a
    /// heap without a key index would) instead of replacing it: both run.
    ReplaceKeepsOld,
    /// `shutdown` changes the mode without notifying the leader.
    ShutdownNoNotify,
    /// `schedule` checks that the pool is running in one critical section and
    /// inserts in another: a task can go in after the workers exited.
    IntakeOutsideLock,
    /// A moved manual clock notifies the leader without taking the pool
    /// lock: the notify can fall between the leader's clock read and its
    /// wait.
    WakeWithoutLock,
    /// The leader finds work due but drops the lead token instead of
    /// passing it on.
    DropLead,
    /// After a periodic run the worker puts the task back even when its
    /// stand-in was removed meanwhile (by a cancel, a replace or a
    /// shutdown): the task runs again after a cancel that returned true.
    ReinsertWithoutStandInCheck,
    /// Exclusive keys: a worker starts a due task whose key's previous task
    /// still runs instead of holding it.
    ExclusiveNoHold,
    /// Exclusive keys: releasing a key frees it but leaves its held
    /// successor held, out of the heap, for ever.
    ExclusiveReleaseKeepsHeld,
    /// `shutdown_now` decides which keys it returns in one critical section
    /// and removes the tasks in another: a worker can start a task in
    /// between, which then runs although its key was returned.
    ShutdownNowCheckThenDrain,
    /// An awaited handle checks for the outcome in one critical section and
    /// registers its waker in another: an outcome delivered in between finds
    /// no waker to wake, and the awaiting task sleeps for ever.
    WakerCheckThenRegister,
    /// A leader that finds work due starts and runs a task before it passes
    /// the token on: while that task runs, no other worker leads or starts
    /// anything, so a due task waits behind it with a worker free.
    RunBeforePass,
    /// A worker's hold is its own: no other worker takes from it and the
    /// leader does not look into it, so a task held behind a running one
    /// waits for it while another worker is free.
    HoldNotShared,
    /// Looking a key up finds it in the heap and the lane but not in the
    /// workers' holds: a held task, still pending, is reported absent.
    LookupSkipsHolds,
}

#[cfg_attr(not(loom), allow(dead_code))]
impl Fault {
    /// Every fault with the name [`Builder::fault`](super::Builder::fault)
    /// takes.
    const ALL: [(&'static str, Fault); 17] = [
        ("no-notify-on-new-head", Fault::NoNotifyOnNewHead),
        ("unlock-before-wait", Fault::UnlockBeforeWait),
        ("stale-clock", Fault::StaleClock),
        ("cancel-check-then-remove", Fault::CancelCheckThenRemove),
        ("replace-keeps-old", Fault::ReplaceKeepsOld),
        ("shutdown-no-notify", Fault::ShutdownNoNotify),
        ("intake-outside-lock", Fault::IntakeOutsideLock),
        ("wake-without-lock", Fault::WakeWithoutLock),
        ("drop-lead", Fault::DropLead),
        (
            "reinsert-without-stand-in-check",
            Fault::ReinsertWithoutStandInCheck,
        ),
        ("exclusive-no-hold", Fault::ExclusiveNoHold),
        (
            "exclusive-release-keeps-held",
            Fault::ExclusiveReleaseKeepsHeld,
        ),
        ("run-before-pass", Fault::RunBeforePass),
        ("waker-check-then-register", Fault::WakerCheckThenRegister),
        (
            "shutdown-now-check-then-drain",
            Fault::ShutdownNowCheckThenDrain,
        ),
        ("hold-not-shared", Fault::HoldNotShared),
        ("lookup-skips-holds", Fault::LookupSkipsHolds),
    ];

    /// The fault called `name`.
    ///
    /// # Panics
    ///
    /// On an unknown name, listing the known ones, so a typo cannot pass for
    /// a fault the model tolerates.
    pub(crate) fn named(name: &str) -> Fault {
        match Self::ALL.iter().find(|(n, _)| *n == name) {
            Some(&(_, f)) => f,
            None => {
                let known: Vec<&str> = Self::ALL.iter().map(|(n, _)| *n).collect();
                panic!("unknown fault {name:?}; known: {known:?}")
            }
        }
    }
}

/// The fault a pool was built with, if any: always none outside loom.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    /// The broken step.
    #[cfg(loom)]
    fault: Option<Fault>,
}

impl Faults {
    /// A pool with `fault` broken.
    #[cfg(loom)]
    pub(crate) fn with(fault: Fault) -> Self {
        Faults { fault: Some(fault) }
    }

    /// True when this pool was built with `fault`.
    #[inline(always)]
    pub(crate) fn has(&self, fault: Fault) -> bool {
        #[cfg(loom)]
        return self.fault == Some(fault);
        #[cfg(not(loom))]
        {
            let _ = fault;
            false
        }
    }
}
