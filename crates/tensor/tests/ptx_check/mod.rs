//! PTX checks shared by the test binaries: render scheduled kernels with the PTX renderer and
//! assemble them with `ptxas` for `sm_80` and `sm_90`.
//!
//! `ptxas` is found through, in order: the `PTXAS` environment variable (CI sets it; a path that
//! does not exist is an error), `ptxas` on `PATH`, the Python package `nvidia-cuda-nvcc-cu12`
//! (`python3 -c "import nvidia.cuda_nvcc"`), and the repository's `.venv-ptx` (what `.ci/run`
//! installs). Without it the rendering is still checked, and the skipped assembly is printed.

#![allow(dead_code)] // each test binary uses part of this module

pub mod emu;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use tinygrad_codegen::ptx::{PtxRenderer, launch_dims};
use tinygrad_codegen::{Renderer, to_program};
use tinygrad_runtime::Buffer;
use tinygrad_tensor::{ConstValue, DType, Tensor};
use tinygrad_uop::UOp;

/// Runs the kernels of `t`'s schedule through the PTX renderer and the PTX emulator ([`emu`]),
/// in order, on their host buffers. Returns the last kernel's output (`t`'s data) as `f64`s with
/// its dtype, or `None` when `t` needs no kernel.
pub fn emulate(t: &Tensor) -> Result<Option<(Vec<f64>, DType)>, String> {
    let caps = PtxRenderer::default().caps();
    let mut out = None;
    for item in Tensor::schedule(&[t]) {
        let prog = to_program(&item.ast, caps);
        let ptx = PtxRenderer::default()
            .render(&prog)
            .map_err(|e| e.to_string())?;
        let kernel = emu::Kernel::parse(&ptx).map_err(|e| format!("{}: {e}", prog.name))?;
        let bufs: Vec<Arc<Buffer>> = item
            .bufs
            .iter()
            .map(|b| Buffer::of(b).ok_or("a schedule item bound to a non-buffer"))
            .collect::<Result<_, _>>()?;
        let (mut ids, mut mem, mut alias) = (Vec::new(), Vec::new(), Vec::new());
        for b in &bufs {
            match ids.iter().position(|&id| id == b.id()) {
                Some(i) => alias.push(i),
                None => {
                    ids.push(b.id());
                    alias.push(mem.len());
                    mem.push(b.to_bytes());
                }
            }
        }
        let dims = launch_dims(&prog);
        kernel
            .run(dims.grid, dims.block, &mut mem, &alias)
            .map_err(|e| format!("{}: {e}\n{ptx}", prog.name))?;
        let bytes = &mem[alias[0]];
        bufs[0].copy_in(bytes);
        let dt = bufs[0].dtype;
        let vals = bytes
            .chunks_exact(dt.itemsize())
            .map(|c| ConstValue::from_le_bytes(dt, c).as_f64())
            .collect();
        out = Some((vals, dt));
    }
    Ok(out)
}

/// The architectures every kernel is assembled for.
pub const ARCHS: [u32; 2] = [80, 90];

/// Kernels collected for checking: unique by kernel AST (the kernel cache's identity).
#[derive(Default)]
pub struct Kernels {
    seen: HashMap<UOp, usize>,
    /// `(label, kernel name, PTX per architecture in ARCHS order)`.
    pub ptx: Vec<(String, String, Vec<String>)>,
    /// Kernels that failed to render: `(label, message)`.
    pub render_failures: Vec<(String, String)>,
    /// Schedule items seen (kernels before de-duplication).
    pub items: usize,
}

impl Kernels {
    /// Schedules `t` and renders each of its kernels (once per distinct kernel AST).
    pub fn add(&mut self, label: &str, t: &Tensor) {
        for item in Tensor::schedule(&[t]) {
            self.add_ast(label, &item.ast);
        }
    }

    /// Renders one kernel AST for every architecture.
    pub fn add_ast(&mut self, label: &str, ast: &UOp) {
        self.items += 1;
        if self.seen.contains_key(ast) {
            return;
        }
        self.seen.insert(ast.clone(), self.ptx.len());
        let caps = PtxRenderer::default().caps();
        let prog = to_program(ast, caps);
        let mut texts = Vec::new();
        for sm in ARCHS {
            match PtxRenderer::new(sm).render(&prog) {
                Ok(s) => texts.push(s),
                Err(e) => {
                    self.render_failures
                        .push((label.to_string(), e.to_string()));
                    return;
                }
            }
        }
        self.ptx.push((label.to_string(), prog.name.clone(), texts));
    }

    /// Asserts every kernel rendered, then assembles them all with `ptxas` (when found) for
    /// every architecture and asserts zero failures. Prints the counts (or why assembly was
    /// skipped).
    pub fn check(&self, suite: &str) {
        assert!(
            self.render_failures.is_empty(),
            "{suite}: {} kernels failed to render to PTX:\n{}",
            self.render_failures.len(),
            self.render_failures
                .iter()
                .map(|(l, e)| format!("  {l}: {e}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        eprintln!(
            "ptx [{suite}]: {} kernels rendered ({} schedule items) for {}",
            self.ptx.len(),
            self.items,
            ARCHS.map(|a| format!("sm_{a}")).join(", ")
        );
        let ptxas = match find_ptxas() {
            Ok(p) => p,
            Err(reason) => {
                eprintln!("ptx [{suite}]: SKIPPED assembling with ptxas: {reason}");
                return;
            }
        };
        let dir = temp_dir(suite);
        let mut failures = Vec::new();
        for (ai, sm) in ARCHS.iter().enumerate() {
            let texts: Vec<(&str, &str, &str)> = self
                .ptx
                .iter()
                .map(|(l, n, t)| (l.as_str(), n.as_str(), t[ai].as_str()))
                .collect();
            let n = assemble_all(&ptxas, &dir, *sm, &texts, &mut failures);
            eprintln!(
                "ptx [{suite}]: ptxas -arch=sm_{sm}: {n} kernels assembled, {} failed",
                failures.iter().filter(|(a, _)| a == sm).count()
            );
        }
        assert!(
            failures.is_empty(),
            "{suite}: ptxas rejected {} kernels (PTX kept in {}):\n{}",
            failures.len(),
            dir.display(),
            failures
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn temp_dir(suite: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinygrad-ptx-{suite}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// Kernels per `ptxas` invocation (one module with many entries: process start-up dominates).
const BATCH: usize = 64;

/// Assembles `texts` for `sm_<sm>`, in batches merged into one module each; a failing batch is
/// re-assembled kernel by kernel to name the culprits. Returns the number of kernels that
/// assembled; appends `(sm, message)` per failure.
fn assemble_all(
    ptxas: &Path,
    dir: &Path,
    sm: u32,
    texts: &[(&str, &str, &str)],
    failures: &mut Vec<(u32, String)>,
) -> usize {
    let mut ok = 0;
    for (bi, batch) in texts.chunks(BATCH).enumerate() {
        let merged = merge(batch.iter().map(|(_, _, t)| *t));
        let path = dir.join(format!("batch{bi}_sm{sm}.ptx"));
        std::fs::write(&path, &merged).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if assemble(ptxas, &path, sm).is_ok() {
            ok += batch.len();
            let _ = std::fs::remove_file(&path);
            continue;
        }
        for (ki, (label, name, text)) in batch.iter().enumerate() {
            let path = dir.join(format!("b{bi}k{ki}_{name}_sm{sm}.ptx"));
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            match assemble(ptxas, &path, sm) {
                Ok(()) => {
                    ok += 1;
                    let _ = std::fs::remove_file(&path);
                }
                Err(e) => failures.push((
                    sm,
                    format!("  [{label}] {name} sm_{sm} ({}): {e}", path.display()),
                )),
            }
        }
    }
    ok
}

/// One module from several rendered modules: the first header, every entry renamed uniquely.
fn merge<'a>(texts: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for (i, t) in texts.enumerate() {
        let start = t.find(".visible .entry").expect("an entry");
        if i == 0 {
            out.push_str(&t[..start]);
        }
        let body = &t[start..];
        let name_start = ".visible .entry ".len();
        let name_end = body.find('(').expect("entry parameters");
        let name = &body[name_start..name_end];
        out.push_str(&body.replace(name, &format!("{name}__{i}")));
        out.push('\n');
    }
    out
}

/// Assembles one PTX file for `sm_<sm>`; `Err` holds ptxas's message.
pub fn assemble(ptxas: &Path, ptx: &Path, sm: u32) -> Result<(), String> {
    let out = ptx.with_extension(format!("sm{sm}.cubin"));
    let res = Command::new(ptxas)
        .arg(format!("-arch=sm_{sm}"))
        .arg(ptx)
        .arg("-o")
        .arg(&out)
        .output()
        .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    let _ = std::fs::remove_file(&out);
    if res.status.success() {
        Ok(())
    } else {
        Err(format!(
            "exit {}: {}",
            res.status,
            String::from_utf8_lossy(&res.stderr).trim()
        ))
    }
}

/// Where `ptxas` is, or why it was not found.
pub fn find_ptxas() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("PTXAS").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        // A configured path that does not work is an error, not a reason to skip.
        assert!(
            runs(&p),
            "PTXAS={} is set but does not run (`ptxas --version` failed)",
            p.display()
        );
        return Ok(p);
    }
    if runs(Path::new("ptxas")) {
        return Ok(PathBuf::from("ptxas"));
    }
    let py = Command::new("python3")
        .args([
            "-c",
            "import nvidia.cuda_nvcc as m, os; print(os.path.join(list(m.__path__)[0], 'bin', 'ptxas'))",
        ])
        .output();
    if let Ok(out) = py
        && out.status.success()
    {
        let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if runs(&p) {
            return Ok(p);
        }
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv-ptx/lib");
    if let Ok(entries) = std::fs::read_dir(&venv) {
        for e in entries.flatten() {
            let p = e.path().join("site-packages/nvidia/cuda_nvcc/bin/ptxas");
            if runs(&p) {
                return Ok(p);
            }
        }
    }
    Err(
        "ptxas not found (set PTXAS, put ptxas on PATH, or `python3 -m venv .venv-ptx && \
         .venv-ptx/bin/pip install nvidia-cuda-nvcc-cu12`)"
            .into(),
    )
}

fn runs(p: &Path) -> bool {
    Command::new(p)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}
