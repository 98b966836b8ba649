//! Containing user code: drops and panic payloads that must not unwind into
//! the pool's threads or its callers.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Set on the threads of pools built with `quiet_panics(true)`.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Installs the filtering panic hook, once per process.
static HOOK: Once = Once::new();

/// Keep the panics of this thread (a worker of a pool built with
/// `quiet_panics(true)`) away from the process's panic hook: the pool
/// reports them as outcomes. The first call chains a hook in front of the
/// one installed then, which it calls for every other thread.
pub(crate) fn quiet_panics_on_this_thread() {
    if cfg!(loom) {
        return;
    }
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
    QUIET.with(|q| q.set(true));
}

/// Run `f`, catching its panic: the pool's way to contain user code it runs
/// on its threads. Under loom a panic is a model's verdict (a failed
/// assertion, or loom's report of a deadlock), so nothing is caught there.
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> Result<R, Box<dyn Any + Send>> {
    if cfg!(loom) {
        return Ok(f());
    }
    catch_unwind(AssertUnwindSafe(f))
}

/// Drop `value`, containing a panic from its `Drop` so that the pool's
/// callers and workers never see it.
pub(crate) fn drop_quietly<V>(value: V) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
        forget_payload(payload);
    }
}

/// The message of a panic payload (`"<non-string panic payload>"` for
/// payloads that are neither `&str` nor `String`); the payload is disposed of
/// safely.
pub(crate) fn panic_message(payload: Box<dyn Any + Send>) -> String {
    let msg = if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_string()
    };
    forget_payload(payload);
    msg
}

/// Drop a panic payload; if its own `Drop` panics, leak that second payload
/// rather than unwind out of a worker.
pub(crate) fn forget_payload(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}
