//! The report model and its renderers.
//!
//! # JSON contract (`schema_version` 1)
//! Fields may be added; none is ever renamed or removed. See [`Report`],
//! [`CaptureReport`] and [`pcapsleuth_core::Finding`] for each field.

pub mod model;

pub use model::*;
