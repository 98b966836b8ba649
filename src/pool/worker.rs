//! Worker threads: block on the hand-off channel and serve what arrives.
//!
//! A worker that is not leading never looks at a clock: it blocks in `recv`
//! and runs each task it receives outside every pool lock. Receiving the
//! [`Lead`](super::leader::Lead) token makes it the leader until it passes the
//! token on. See `docs/protocol.md`.

use super::leader::{self, Lead, Led};
use super::task::BoxJob;
use super::Shared;
use std::hash::Hash;

/// What travels through the hand-off channel.
pub(crate) enum Msg {
    /// Claimed tasks, in due order: run each and deliver its outcome.
    Run(Vec<BoxJob>),
    /// The leadership token: exactly one exists while the pool runs.
    Lead(Lead),
    /// Stop: pass it on to the next worker, then exit.
    Exit,
}

/// A worker's whole life.
pub(crate) fn work<K: Hash + Eq + Clone + Send + 'static>(shared: &Shared<K>) {
    loop {
        match shared.rx.recv() {
            Ok(Msg::Run(jobs)) => {
                for job in jobs {
                    job.run();
                }
            }
            Ok(Msg::Lead(token)) => match leader::lead(shared, token) {
                Led::HandedOff => {}
                Led::Exit => return,
            },
            Ok(Msg::Exit) | Err(_) => {
                // Every worker passes the pill on, so one Exit stops them all;
                // the Runs queued before it are served first (FIFO).
                let _ = shared.tx.send(Msg::Exit);
                return;
            }
        }
    }
}
