//! Loom models live in `tests/`; this library is empty.
