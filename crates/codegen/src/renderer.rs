//! The [`Renderer`] trait: one implementation per target (Cranelift now; PTX and WGSL next).

use std::fmt;

use crate::{Program, TargetCaps};

/// A renderer failed to produce code for a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderError {
    /// The kernel's name.
    pub kernel: String,
    /// The renderer's explanation.
    pub message: String,
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "can't render kernel {}: {}", self.kernel, self.message)
    }
}

impl std::error::Error for RenderError {}

/// Turns a target-neutral [`Program`] into target code: text for GPU targets (PTX, WGSL), an IR
/// function for Cranelift.
pub trait Renderer {
    /// What rendering produces.
    type Output;
    /// The target's name (`cranelift`, `ptx`, `wgsl`).
    fn name(&self) -> &'static str;
    /// What the target executes natively.
    fn caps(&self) -> TargetCaps;
    /// Renders `prog`.
    fn render(&self, prog: &Program) -> Result<Self::Output, RenderError>;
}
