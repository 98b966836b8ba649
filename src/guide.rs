//! The user guides: the rules, the settings, migration from other
//! schedulers, the guarantees, the benchmarks and the
//! dependencies.
//!
//! Each module below renders one Markdown file of the package's `docs/`
//! directory, so the guides read the same here as in the repository. The
//! guides name the repository's tests, benches and lab notes by path; those
//! files are not part of the published crate.

// Each guide links the others by file name (`semantics.md#...`) in
// reference-style links defined at its end. The definitions put before the
// file's text here come first, and the first definition of a label wins,
// so in the rendered docs the same links lead to these modules.

#[doc = include_str!("../docs/semantics.md")]
pub mod semantics {}

#[doc = "[bench-lateness]: crate::guide::benchmarks#lateness"]
#[doc = "[bench-preemption]: crate::guide::benchmarks#preemption"]
#[doc = "[bench-sparse]: crate::guide::benchmarks#sparse-timers"]
#[doc = "[bench-mixed]: crate::guide::benchmarks#mixed-task-lengths"]
#[doc = "[bench-tracing]: crate::guide::benchmarks#tracing-and-the-completion-stream"]
#[doc = "[sem-completion]: crate::guide::semantics#completion-stream"]
#[doc = "[sem-design]: crate::guide::semantics#design-decisions"]
#[doc = ""]
#[doc = include_str!("../docs/settings.md")]
pub mod settings {}

#[doc = "[semantics]: crate::guide::semantics"]
#[doc = ""]
#[doc = include_str!("../docs/migration.md")]
pub mod migration {}

#[doc = include_str!("../docs/reliability.md")]
pub mod reliability {}

#[doc = include_str!("../docs/benchmarks.md")]
pub mod benchmarks {}

#[doc = include_str!("../docs/dependencies.md")]
pub mod dependencies {}
