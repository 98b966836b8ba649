//! The `AsyncNode` (feature `tokio`) as a [`Kind`] for the workloads of
//! `pg_work`, which a user declares beside it at the crate root. Started
//! outside any runtime, the node runs its handlers on a runtime of its own,
//! as a synchronous program using it would.

use crate::pg_work::{lateness_us, Kind, Running, Spec};
use timerpool_pg::AsyncNode;

impl Running for AsyncNode {
    fn id(&self) -> String {
        AsyncNode::id(self).to_string()
    }
    fn recorded(&self) -> u64 {
        self.stats().recorded
    }
    fn stop(self: Box<Self>) {
        // Outside a runtime, dropping it shuts it down and waits.
        drop(self)
    }
}

/// The `AsyncNode`, handlers as tasks on its own runtime.
pub const ASYNC: Kind = Kind {
    name: "timerpool `AsyncNode`",
    unit: "slots",
    tag: "async",
    start: |spec| Box::new(start(spec)),
};

fn start(spec: Spec<'_>) -> AsyncNode {
    let sink = spec.sink.clone();
    let mut b = AsyncNode::builder(spec.config, "bench")
        .schema(spec.schema)
        .slots(spec.workers)
        .handler("h", move |job| {
            let sink = sink.clone();
            // Recorded when the handler's future first runs: its start.
            async move {
                sink.lock().unwrap().push(lateness_us(job.due()));
                Ok(())
            }
        });
    if let Some(p) = spec.prefetch {
        b = b.prefetch(p);
    }
    b.start().expect("start async node")
}
