//! loom models of `timerpool` live in `tests/`; this library is empty.
