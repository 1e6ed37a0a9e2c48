//! [`Tensor::assign`]: replacing a tensor's value, lazily (what optimizers and running statistics
//! use).
//!
//! A `Tensor` is a shared handle (clones see the same value), so assigning through one handle
//! changes what every clone reads. The assignment itself is lazy: the tensor now stands for the new
//! value's graph, and nothing runs until it is realized — usually together with everything else of
//! the training step, in one schedule. Realizing it replaces the graph by a view of the buffer
//! that holds the result, so a parameter updated and realized step after step keeps a graph of
//! constant size.
//!
//! Differences from tinygrad, where `assign` writes into the tensor's existing buffer:
//! - the result is written to a fresh buffer when realized (the old one goes back to the
//!   runtime's buffer pool once nothing uses it);
//! - tensors derived lazily from the old value before the assignment keep computing from the
//!   old value (the graph stays functional: no write-after-read hazards to order).
//!
//! Assigning to a view — a `reshape`, `permute`/`t`, `shrink`/slice or `flip` of a tensor,
//! directly or through several — writes through to the tensor it views, as in torch and
//! tinygrad: the base's new value is its old one with the view's elements replaced, and
//! realizing the view realizes the base with it. An expanded view cannot be assigned (its
//! elements alias each other). A zero `pad` and every other op make a new tensor.
//!
//! As in tinygrad, no gradient flows through an assignment: the new value is detached. A value
//! made of constants only (`Tensor::zeros(..)`) is computed at once into a buffer of its own:
//! equal constant graphs are one shared node, and the tensor must not share its identity.

use std::collections::HashSet;

use tinygrad_dtype::DType;
use tinygrad_schedule::is_buffer_view;
use tinygrad_uop::{Arg, Ops, SInt, UOp};

use crate::Tensor;
use crate::elementwise::broadcast_shape;

impl Tensor {
    /// Replaces this tensor's value with `value`, lazily (see the [module docs](crate::assign)):
    /// `param.assign(&(&param - &(grad * lr)))`. `value` may broadcast to this tensor's shape but
    /// must have its dtype and device. Returns `self`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let param = Tensor::from_vec(vec![1.0f32, 2.0, 3.0]);
    /// let alias = param.clone();
    /// param.assign(&(&param - 0.5));
    /// assert_eq!(alias.to_vec::<f32>(), vec![0.5, 1.5, 2.5]);
    /// param.assign(&Tensor::from_vec(vec![7.0f32])); // broadcasts
    /// assert_eq!(param.to_vec::<f32>(), vec![7.0, 7.0, 7.0]);
    /// ```
    ///
    /// # Panics
    /// If the shapes don't broadcast to this tensor's shape, or the dtypes or devices differ.
    pub fn assign(&self, value: &Tensor) -> &Tensor {
        let (shape, vshape) = (self.shape(), value.shape());
        assert_eq!(
            value.dtype(),
            self.dtype(),
            "assign: dtype mismatch: tensor of shape {shape:?} has dtype {}, value has {} (cast \
             the value first)",
            self.dtype(),
            value.dtype()
        );
        assert_eq!(
            value.device(),
            self.device(),
            "assign: device mismatch: tensor is on {}, value on {} (move it with .to(..))",
            self.device(),
            value.device()
        );
        let fits = broadcast_shape(&vshape, &shape).is_some_and(|s| s == shape);
        assert!(
            fits,
            "assign: shape mismatch: tensor has shape {shape:?}, value has shape {vshape:?} \
             (which does not broadcast to it)"
        );
        let mut u = value.uop();
        if u == self.uop() {
            return self; // a self assignment is a no-op
        }
        if vshape != shape {
            u = value.broadcast_to(&shape).uop();
        }
        if let Some(view) = &self.inner.view
            && let Some(base) = view.base()
        {
            self.assign_through_view(&base, &view.ops, &Tensor::from_uop(u, self.device()));
            return self;
        }
        if !has_buffer(&u) {
            // A graph of constants only is shared by every equal graph (hash-consing): give the
            // value a buffer of its own, so gradients and later assignments stay this tensor's.
            let contiguous = UOp::new(Ops::Contiguous, u.dtype(), vec![u], Arg::None);
            let fresh = if crate::multi::is_multi(self.device()) {
                if contiguous.toposort().iter().any(|n| n.op() == Ops::Multi) {
                    // already on the devices (constants sharded, or copied to each)
                    Tensor::from_uop(contiguous, self.device())
                } else {
                    // split as this tensor is (a graph of constants would give every device
                    // all of it)
                    Tensor::from_uop(contiguous, &self.devices()[0]).shard_like(self)
                }
            } else {
                Tensor::from_uop(contiguous, self.device())
            };
            fresh.realize();
            u = fresh.uop();
        } else if !is_buffer_view(&u) && u.op() != Ops::Detach {
            u = UOp::new(Ops::Detach, u.dtype(), vec![u], Arg::None);
        }
        self.set_uop(u);
        self
    }

    /// Replaces this tensor's value with `value`'s, which must have the same shape and may have
    /// another dtype (tinygrad's `replace`): the tensor takes over `value`'s graph. Returns
    /// `self`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0]);
    /// t.replace(&Tensor::from_vec(vec![5i32, 6]));
    /// assert_eq!((t.shape(), t.dtype()), (vec![2], DType::INT32));
    /// assert_eq!(t.to_vec::<i32>(), vec![5, 6]);
    /// ```
    ///
    /// # Panics
    /// If the shapes differ (as tinygrad), or the devices do (a handle's device is fixed).
    pub fn replace(&self, value: &Tensor) -> &Tensor {
        assert_eq!(
            value.shape(),
            self.shape(),
            "replace: shape mismatch: tensor has shape {:?}, value has shape {:?}",
            self.shape(),
            value.shape()
        );
        assert_eq!(
            value.device(),
            self.device(),
            "replace: device mismatch: tensor is on {}, value on {} (move it with .to(..))",
            self.device(),
            value.device()
        );
        self.set_uop(value.uop());
        self
    }
}

impl Tensor {
    /// Writes `value` into this tensor's elements **in place**, at once: the tensor must be a
    /// realized buffer or a view of one through `reshape`, `shrink` (symbolic bounds included),
    /// `permute` or `flip`, and only the elements it shows are written — one kernel over the
    /// view's elements, whatever the size of the buffer under it. This is tinygrad's
    /// `cache[:, :, pos:pos+1].assign(v).realize()` and torch's `copy_` into a slice: what a KV
    /// cache needs to store one position per decoded token. `value` may broadcast to this
    /// tensor's shape but must have its dtype and device. Returns `self`.
    ///
    /// Unlike [`Tensor::assign`], which gives the tensor a new buffer and leaves every lazy
    /// tensor built from the old value computing from it, this writes into the buffer that
    /// other tensors may share: every tensor that views it (the base, other slices) and every
    /// lazy tensor reading it that is realized afterwards sees the new elements (as in torch
    /// and tinygrad). Realize those first where they must see the old ones. Tensors realized
    /// *together* from equal graphs share one buffer (the scheduler computes an equal graph
    /// once: two `Tensor::zeros(..).contiguous()` in one `realize_all`), so write in place into
    /// a buffer of its own: [`Tensor::empty_like`] filled by `assign_in_place`, a tensor made
    /// from data, or one realized alone. A value that reads
    /// the written buffer itself is computed into a buffer of its own first, so the write never
    /// reads an element it already overwrote. Under a [`Jit`](crate::Jit), a replay writes into
    /// the buffer the tensor holds then.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let cache = Tensor::zeros(&[2, 4], tinygrad_tensor::DType::FLOAT32).contiguous();
    /// cache.realize();
    /// let row = cache.shrink(&[(0, 2), (1, 2)]);
    /// row.assign_in_place(&Tensor::from_slice(&[5.0f32, 6.0], &[2, 1])).unwrap();
    /// assert_eq!(cache.to_vec::<f32>(), vec![0.0, 5.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0]);
    /// ```
    ///
    /// # Errors
    /// If the device fails running the write (or computing `value`).
    ///
    /// # Panics
    /// If the shapes don't broadcast to this tensor's shape, the dtypes or devices differ, the
    /// tensor is on several devices, or it is not a view of a realized buffer through the
    /// movement ops above (a lazy tensor, a `pad` or an `expand`: realize it, or take the view
    /// of a realized tensor).
    pub fn assign_in_place(
        &self,
        value: &Tensor,
    ) -> Result<&Tensor, tinygrad_runtime::DeviceError> {
        let (buf, v) = self.in_place_write(value, "assign_in_place");
        let v = if v.toposort().contains(&buf) {
            UOp::new(Ops::Contiguous, v.dtype(), vec![v], Arg::None)
        } else {
            v
        };
        let node = self.in_place_node(&buf, v)?;
        Tensor::from_uop(node, self.device()).try_realize()?;
        Ok(self)
    }

    /// Several [`Tensor::assign_in_place`] writes `(target, value)` run together, in one
    /// schedule (one kernel each, and the host's scheduling work once): what a step that
    /// stores a position into many KV caches needs. Each target must be in a buffer of its own
    /// (two writes into one buffer are refused: their order would not be defined). Values that
    /// read any of the written buffers are computed first, so every write reads the buffers as
    /// they were before the call.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let a = Tensor::zeros(&[4], DType::FLOAT32).contiguous();
    /// a.realize();
    /// let b = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    /// b.realize();
    /// let (x, y) = (Tensor::from_slice(&[7.0f32], &[1]), Tensor::from_slice(&[8.0f32, 9.0], &[2]));
    /// Tensor::assign_in_place_all(&[(&a.shrink(&[(1, 2)]), &x), (&b.shrink(&[(0, 2)]), &y)])
    ///     .unwrap();
    /// assert_eq!(a.to_vec::<f32>(), vec![0.0, 7.0, 0.0, 0.0]);
    /// assert_eq!(b.to_vec::<f32>(), vec![8.0, 9.0, 3.0]);
    /// ```
    ///
    /// # Errors
    /// If the device fails running the writes (or computing the values).
    ///
    /// # Panics
    /// As [`Tensor::assign_in_place`] for each write; also if two targets are in the same
    /// buffer, or the targets are on different devices.
    pub fn assign_in_place_all(
        writes: &[(&Tensor, &Tensor)],
    ) -> Result<(), tinygrad_runtime::DeviceError> {
        let Some((first, _)) = writes.first() else {
            return Ok(());
        };
        let mut bufs = HashSet::new();
        let mut prepared = Vec::with_capacity(writes.len());
        for (i, (target, value)) in writes.iter().enumerate() {
            assert!(
                target.device() == first.device(),
                "assign_in_place_all: write {i} is on {}, write 0 on {}",
                target.device(),
                first.device()
            );
            let (buf, v) = target.in_place_write(value, "assign_in_place_all");
            assert!(
                bufs.insert(buf.clone()),
                "assign_in_place_all: write {i} (shape {:?}) is into a buffer an earlier write                  also writes (give each write a buffer of its own)",
                target.shape()
            );
            prepared.push((buf, v));
        }
        // values reading a written buffer: computed before any write
        let reading: Vec<Tensor> = prepared
            .iter()
            .filter(|(_, v)| v.toposort().iter().any(|n| bufs.contains(n)))
            .map(|(_, v)| {
                let c = UOp::new(Ops::Contiguous, v.dtype(), vec![v.clone()], Arg::None);
                Tensor::from_uop(c, first.device())
            })
            .collect();
        Tensor::try_realize_all(&reading.iter().collect::<Vec<_>>())?;
        let mut computed = reading.iter();
        let mut nodes = Vec::with_capacity(writes.len());
        for ((target, _), (buf, v)) in writes.iter().zip(prepared) {
            let v = if v.toposort().iter().any(|n| bufs.contains(n)) {
                computed
                    .next()
                    .expect("one value computed per reading write")
                    .uop()
            } else {
                v
            };
            let node = target.in_place_node(&buf, v)?;
            nodes.push(Tensor::from_uop(node, first.device()));
        }
        Tensor::try_realize_all(&nodes.iter().collect::<Vec<_>>())
    }

    /// The checks of an in-place write of `value` into this view (naming `what`), and the
    /// buffer written with the value's graph, broadcast to the view's shape.
    fn in_place_write(&self, value: &Tensor, what: &str) -> (UOp, UOp) {
        let (shape, vshape) = (self.shape(), value.shape());
        assert_eq!(
            value.dtype(),
            self.dtype(),
            "{what}: dtype mismatch: tensor of shape {shape:?} has dtype {}, value has \
             {} (cast the value first)",
            self.dtype(),
            value.dtype()
        );
        assert_eq!(
            value.device(),
            self.device(),
            "{what}: device mismatch: tensor is on {}, value on {} (move it with \
             .to(..))",
            self.device(),
            value.device()
        );
        assert!(
            !crate::multi::is_multi(self.device()),
            "{what}: the tensor (shape {shape:?}) is on several devices ({}); write \
             into each device's part",
            self.device()
        );
        let fits = broadcast_shape(&vshape, &shape).is_some_and(|s| s == shape);
        assert!(
            fits,
            "{what}: shape mismatch: tensor has shape {shape:?}, value has shape \
             {vshape:?} (which does not broadcast to it)"
        );
        let target = self.uop();
        let buf = written_buffer(&target).unwrap_or_else(|op| {
            panic!(
                "{what}: the tensor (shape {shape:?}) must be a realized buffer or a \
                 reshape, shrink, permute or flip of one, not a {op} node (realize it first, \
                 or take the view of a realized tensor)"
            )
        });
        let v = if vshape == shape {
            value.uop()
        } else {
            value.broadcast_to(&shape).uop()
        };
        (buf, v)
    }

    /// The `Assign` of `v` into this view of `buf`, the buffer allocated (zeroed if never
    /// written yet) and noted for the JIT.
    fn in_place_node(&self, buf: &UOp, v: UOp) -> Result<UOp, tinygrad_runtime::DeviceError> {
        if let Some(b) = tinygrad_runtime::Buffer::of(buf) {
            // a buffer never written yet is zeroed now: the write's kernel treats its output as
            // overwritten whole, and would otherwise get a reused allocation whose other
            // elements hold stale data
            b.try_allocate(false)?;
            crate::jit::note_in_place(b.id());
        }
        Ok(UOp::new(
            Ops::Assign,
            self.dtype(),
            vec![self.uop(), v],
            Arg::None,
        ))
    }

    /// Writes `value` (this view's shape) into the view's base: the base's new value is its
    /// old one with the view's elements replaced (each movement op undone in reverse: reshape
    /// back, the inverse permutation, the same flip, a shrink padded back into place and
    /// selected where it lies), and this view then reads the base's new value. As in torch,
    /// an expanded view cannot be assigned (its elements alias one another).
    fn assign_through_view(&self, base: &Tensor, ops: &[(Ops, Arg)], value: &Tensor) {
        if ops.iter().any(|(op, _)| *op == Ops::Expand) {
            panic!(
                "assign: the tensor (shape {:?}) is an expanded view of a tensor of shape {:?}: \
                 its elements alias each other, so it cannot be assigned (as in torch); assign \
                 to the base or to a contiguous copy",
                self.shape(),
                base.shape()
            );
        }
        let device = self.device();
        let plain = |u: UOp| Tensor::from_uop(u, device);
        // the base and each intermediate view, as of now
        let mut levels = vec![base.uop()];
        for (op, arg) in ops {
            let prev = levels.last().expect("the base");
            levels.push(UOp::new(*op, prev.dtype(), vec![prev.clone()], arg.clone()));
        }
        let mut new = value.clone();
        for (i, (op, arg)) in ops.iter().enumerate().rev() {
            let prev = plain(levels[i].clone());
            let prev_shape = prev.shape();
            new = match op {
                Ops::Reshape => new.reshape_exact(&prev_shape),
                Ops::Permute => {
                    let order = arg.as_shape().expect("permute arg");
                    let mut inverse = vec![0isize; order.len()];
                    for (i, &o) in order.iter().enumerate() {
                        inverse[o] = i as isize;
                    }
                    new.permute(&inverse)
                }
                Ops::Flip => {
                    let axes: Vec<isize> = arg
                        .as_shape()
                        .expect("flip arg")
                        .iter()
                        .map(|&a| a as isize)
                        .collect();
                    new.flip(&axes)
                }
                Ops::Shrink if arg.as_pairs().is_none() => {
                    // symbolic bounds (`shrink_sym`): padded back by symbolic amounts
                    let bounds = arg.sym_pairs().expect("shrink arg");
                    let pads: Vec<(SInt, SInt)> = bounds
                        .iter()
                        .zip(&prev.sym_shape())
                        .map(|((b, e), d)| (b.clone(), d - e))
                        .collect();
                    let inside = new.const_like(true, DType::BOOL).pad_sym(&pads);
                    inside.where_(&new.pad_sym(&pads), &prev)
                }
                Ops::Shrink => {
                    let bounds = arg.as_pairs().expect("shrink arg");
                    let pads: Vec<(usize, usize)> = bounds
                        .iter()
                        .zip(&prev_shape)
                        .map(|(&(b, e), &d)| (b, d - e))
                        .collect();
                    let inside =
                        Tensor::full_on(&new.shape(), true, DType::BOOL, device).pad(&pads, false);
                    inside.where_(&new.pad(&pads, 0), &prev)
                }
                op => unreachable!("{op} is not a view op"),
            };
        }
        base.assign(&new);
        base.inner
            .written_through
            .store(true, std::sync::atomic::Ordering::Release);
        // this view reads the base's new value
        let mut u = base.uop();
        for (op, arg) in ops {
            u = UOp::new(*op, u.dtype(), vec![u], arg.clone());
        }
        self.set_uop(u);
    }
}

/// Whether the graph reads any buffer (depth first, stopping at the first one).
fn has_buffer(u: &UOp) -> bool {
    let mut stack = vec![u.clone()];
    let mut seen = HashSet::new();
    while let Some(n) = stack.pop() {
        if n.op() == Ops::Buffer {
            return true;
        }
        if seen.insert(n.clone()) {
            stack.extend(n.src().iter().rev().cloned());
        }
    }
    false
}

/// The buffer under `u`'s reshapes, shrinks, permutes and flips, or the first other op met.
fn written_buffer(u: &UOp) -> Result<UOp, Ops> {
    let mut t = u.clone();
    loop {
        match t.op() {
            Ops::Buffer => return Ok(t),
            Ops::Reshape | Ops::Shrink | Ops::Permute | Ops::Flip => t = t.s(0).clone(),
            op => return Err(op),
        }
    }
}
