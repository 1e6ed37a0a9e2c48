//! All-reduce across CUDA GPUs through NVIDIA's NCCL (`libnccl.so`, loaded at run time through
//! `cudarc`'s `nccl` bindings, like the driver: nothing NCCL is needed to build).
//!
//! [`all_reduce`] takes one buffer per GPU (every buffer on a different `CUDA:n` device, all of
//! one dtype and size) and returns new buffers, one per GPU, each holding the elementwise
//! combination of all of them. The collective is queued on each device's own stream, inside one
//! NCCL group, so it is ordered after the kernels that wrote the inputs and before the ones that
//! read the outputs, without the host waiting. Communicators are made once per set of GPUs
//! (`ncclCommInitAll`) and kept.
//!
//! Without the cargo feature `cuda`, without the NCCL library, or for buffers that are not on
//! distinct CUDA devices, [`all_reduce`] is an `Err` saying which; it never panics.

use std::sync::Arc;

use tinygrad_dtype::DType;

use crate::buffer::Buffer;
use crate::device::DeviceError;

/// How [`all_reduce`] combines the buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectiveOp {
    /// Elementwise sum.
    Sum,
    /// Elementwise product.
    Prod,
    /// Elementwise maximum.
    Max,
}

/// Whether NCCL reduces elements of `dtype` (it has no bool, int16 or uint16 elements, nor
/// fp8 ones).
pub fn supports(dtype: DType) -> bool {
    nccl_type(dtype).is_some()
}

/// NCCL's element types (`ncclDataType_t`), the ones a tensor's dtype can map to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NcclType {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Float16,
    Bfloat16,
    Float32,
    Float64,
}

/// NCCL's element type for `dtype`, for the types it has (the same size as `dtype`'s).
fn nccl_type(dtype: DType) -> Option<NcclType> {
    [
        (DType::INT8, NcclType::Int8),
        (DType::UINT8, NcclType::Uint8),
        (DType::INT32, NcclType::Int32),
        (DType::UINT32, NcclType::Uint32),
        (DType::INT64, NcclType::Int64),
        (DType::UINT64, NcclType::Uint64),
        (DType::FLOAT16, NcclType::Float16),
        (DType::BFLOAT16, NcclType::Bfloat16),
        (DType::FLOAT32, NcclType::Float32),
        (DType::FLOAT64, NcclType::Float64),
    ]
    .into_iter()
    .find_map(|(d, t)| (d == dtype).then_some(t))
}

fn unavailable(device: &str, reason: String) -> DeviceError {
    DeviceError::Unavailable {
        name: device.to_string(),
        reason,
    }
}

/// Checks what NCCL needs of the inputs: at least one, each on a different `CUDA` device, one
/// dtype NCCL has and one size.
fn check_inputs(inputs: &[Arc<Buffer>]) -> Result<(), DeviceError> {
    let Some(first) = inputs.first() else {
        return Err(unavailable(
            "CUDA",
            "NCCL all-reduce of no buffers".to_string(),
        ));
    };
    for (i, b) in inputs.iter().enumerate() {
        if b.device.split(':').next() != Some("CUDA") {
            return Err(unavailable(
                &b.device,
                format!("NCCL all-reduce needs CUDA buffers; buffer {i} is {b:?}"),
            ));
        }
        if inputs[..i].iter().any(|o| o.device == b.device) {
            return Err(unavailable(
                &b.device,
                format!(
                    "NCCL all-reduce needs one buffer per GPU; {} has two",
                    b.device
                ),
            ));
        }
        if b.dtype != first.dtype || b.size != first.size {
            return Err(unavailable(
                &b.device,
                format!(
                    "NCCL all-reduce of buffers that differ: {first:?} and {b:?} (one dtype and \
                     size expected)"
                ),
            ));
        }
    }
    if !supports(first.dtype) {
        return Err(unavailable(
            &first.device,
            format!("NCCL has no {} elements", first.dtype),
        ));
    }
    Ok(())
}

/// The elementwise `op` of `inputs` (one buffer per GPU), in a new buffer on each input's GPU.
///
/// # Errors
/// [`DeviceError::Unavailable`] when this build has no CUDA support, the NCCL library is
/// missing, or the inputs are not one buffer of one dtype and size on each of several CUDA
/// devices; the error NCCL or the driver gives otherwise.
pub fn all_reduce(
    op: CollectiveOp,
    inputs: &[Arc<Buffer>],
) -> Result<Vec<Arc<Buffer>>, DeviceError> {
    check_inputs(inputs)?;
    #[cfg(feature = "cuda")]
    {
        imp::all_reduce(op, inputs)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = op;
        Err(unavailable(
            &inputs[0].device,
            "this build has no CUDA support (build with `--features cuda`), so no NCCL".into(),
        ))
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use std::collections::HashMap;
    use std::ffi::c_void;
    use std::sync::{Arc, Mutex};

    use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
    use cudarc::nccl::{result, sys};

    use super::{CollectiveOp, NcclType, nccl_type, unavailable};
    use crate::buffer::Buffer;
    use crate::device::DeviceError;

    /// NCCL communicators of one set of GPUs (rank `i` on the `i`-th), destroyed on drop.
    struct Comms(Vec<sys::ncclComm_t>);

    // SAFETY: an `ncclComm_t` is a handle NCCL lets any thread use, one call at a time; every
    // use goes through the `COMMS` mutex, which serializes them.
    unsafe impl Send for Comms {}

    impl Drop for Comms {
        fn drop(&mut self) {
            for &c in &self.0 {
                // SAFETY: `c` was made by `ncclCommInitAll` and is destroyed once, here.
                let _ = unsafe { result::comm_destroy(c) };
            }
        }
    }

    /// The communicators made so far, by the GPUs' ordinals.
    static COMMS: Mutex<Option<HashMap<Vec<i32>, Comms>>> = Mutex::new(None);

    fn failed(device: &str, what: &str, e: result::NcclError) -> DeviceError {
        DeviceError::Transfer {
            device: device.to_string(),
            // (the code: cudarc's `NcclError` prints no more than its name)
            message: format!("NCCL {what}: {:?}", e.0),
        }
    }

    fn data_type(t: NcclType) -> sys::ncclDataType_t {
        use sys::ncclDataType_t as T;
        match t {
            NcclType::Int8 => T::ncclInt8,
            NcclType::Uint8 => T::ncclUint8,
            NcclType::Int32 => T::ncclInt32,
            NcclType::Uint32 => T::ncclUint32,
            NcclType::Int64 => T::ncclInt64,
            NcclType::Uint64 => T::ncclUint64,
            NcclType::Float16 => T::ncclFloat16,
            NcclType::Bfloat16 => T::ncclBfloat16,
            NcclType::Float32 => T::ncclFloat32,
            NcclType::Float64 => T::ncclFloat64,
        }
    }

    /// The device pointer of a buffer's CUDA allocation.
    fn device_ptr(b: &Buffer, stream: &CudaStream) -> Result<u64, DeviceError> {
        b.with_device_mem(|m| {
            m.raw()
                .downcast_ref::<CudaSlice<u8>>()
                .map(|s| s.device_ptr(stream).0)
        })?
        .ok_or_else(|| unavailable(&b.device, format!("{b:?} is not a CUDA allocation")))
    }

    /// The stream a buffer's CUDA allocation belongs to (its device's one stream).
    fn stream_of(b: &Buffer) -> Result<Arc<CudaStream>, DeviceError> {
        b.with_device_mem(|m| {
            m.raw()
                .downcast_ref::<CudaSlice<u8>>()
                .map(|s| s.stream().clone())
        })?
        .ok_or_else(|| unavailable(&b.device, format!("{b:?} is not a CUDA allocation")))
    }

    pub(super) fn all_reduce(
        op: CollectiveOp,
        inputs: &[Arc<Buffer>],
    ) -> Result<Vec<Arc<Buffer>>, DeviceError> {
        let device = inputs[0].device.to_string();
        // SAFETY: `is_culib_present` only tries to load the NCCL library (dlopen) and reports
        // whether that worked; it has no preconditions.
        if !unsafe { sys::is_culib_present() } {
            return Err(unavailable(
                &device,
                "the NCCL library was not found: it is loaded as `libnccl.so` (Debian's \
                 libnccl-dev, or a `libnccl.so -> libnccl.so.2` link in a folder on \
                 LD_LIBRARY_PATH, e.g. next to the PyPI wheel nvidia-nccl-cu12's lib), or run \
                 with NCCL=0 to all-reduce through copies between the GPUs"
                    .into(),
            ));
        }
        let streams: Vec<Arc<CudaStream>> = inputs
            .iter()
            .map(|b| stream_of(b))
            .collect::<Result<_, _>>()?;
        let outputs: Vec<Arc<Buffer>> = inputs
            .iter()
            .map(|b| Buffer::new(&b.device, b.dtype, b.size))
            .collect();
        for o in &outputs {
            o.try_allocate(true)?;
        }
        // Every pointer is found before the NCCL group opens: a failure inside the group after
        // some ranks were queued would launch a collective missing a rank, which never ends.
        let mut ptrs = Vec::with_capacity(inputs.len());
        for ((input, output), stream) in inputs.iter().zip(&outputs).zip(&streams) {
            ptrs.push((device_ptr(input, stream)?, device_ptr(output, stream)?));
        }
        let ordinals: Vec<i32> = streams
            .iter()
            .map(|s| s.context().ordinal() as i32)
            .collect();
        let dtype = data_type(nccl_type(inputs[0].dtype).expect("checked by check_inputs"));
        let red = match op {
            CollectiveOp::Sum => sys::ncclRedOp_t::ncclSum,
            CollectiveOp::Prod => sys::ncclRedOp_t::ncclProd,
            CollectiveOp::Max => sys::ncclRedOp_t::ncclMax,
        };
        let mut guard = COMMS.lock().unwrap_or_else(|e| e.into_inner());
        let comms = guard.get_or_insert_with(HashMap::new);
        if !comms.contains_key(&ordinals) {
            let mut made = vec![std::ptr::null_mut(); ordinals.len()];
            // SAFETY: `made` has room for one communicator per ordinal and `ordinals` holds
            // `ordinals.len()` GPU ordinals (distinct: check_inputs refused two buffers of one
            // device, and `CUDA:n` is GPU n); NCCL writes the communicators into `made`.
            unsafe {
                result::comm_init_all(made.as_mut_ptr(), ordinals.len() as i32, ordinals.as_ptr())
            }
            .map_err(|e| failed(&device, "communicator set-up (ncclCommInitAll)", e))?;
            comms.insert(ordinals.clone(), Comms(made));
        }
        let comm = &comms[&ordinals];
        result::group_start().map_err(|e| failed(&device, "group start", e))?;
        let mut queued = Ok(());
        for (i, ((input, stream), &(src, dst))) in
            inputs.iter().zip(&streams).zip(&ptrs).enumerate()
        {
            // SAFETY: `src` and `dst` are device pointers of allocations of rank i's GPU (the
            // device `stream` belongs to): the input's, and the output's allocated above with
            // the same dtype and size, each of at least `size` elements of a type NCCL's
            // `dtype` matches in size (`nccl_type`; CUDA allocations are never smaller than the
            // buffer). `comm.0[i]` is rank i's communicator for exactly these GPUs in this
            // order. The call queues work on `stream`, the one stream of that device, so it
            // runs after the kernels that wrote the input and before any later work on either
            // buffer; both allocations outlive it (the caller owns the inputs, `outputs` the
            // outputs, and freed memory is reused only by work queued later on that stream).
            let issued = unsafe {
                result::all_reduce(
                    src as *const c_void,
                    dst as *mut c_void,
                    input.size,
                    dtype,
                    red,
                    comm.0[i],
                    stream.cu_stream() as _,
                )
            };
            if let Err(e) = issued {
                // (NCCL then launches nothing of the group: its error is sticky to it)
                queued = Err(failed(&input.device, "all-reduce", e));
                break;
            }
        }
        let ended = result::group_end().map_err(|e| failed(&device, "group end", e));
        queued?;
        ended?;
        Ok(outputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_nccl_cannot_reduce() {
        // the error message of an all-reduce that must be refused
        let refusal =
            |op: CollectiveOp, bufs: &[Arc<Buffer>]| all_reduce(op, bufs).unwrap_err().to_string();
        let err = refusal(CollectiveOp::Sum, &[Buffer::new("CPU", DType::FLOAT32, 4)]);
        assert!(err.contains("needs CUDA buffers"), "{err}");
        let err = refusal(CollectiveOp::Sum, &[]);
        assert!(err.contains("no buffers"), "{err}");
        // (buffers named for GPUs are never allocated by these checks: no GPU needed)
        let pair = |(d0, t0, n0): (&str, DType, usize), (d1, t1, n1): (&str, DType, usize)| {
            [Buffer::new(d0, t0, n0), Buffer::new(d1, t1, n1)]
        };
        let f32x4 = |d| (d, DType::FLOAT32, 4);
        let err = refusal(CollectiveOp::Sum, &pair(f32x4("CUDA"), f32x4("CUDA")));
        assert!(err.contains("one buffer per GPU; CUDA has two"), "{err}");
        let err = refusal(
            CollectiveOp::Max,
            &pair(f32x4("CUDA"), ("CUDA:1", DType::FLOAT64, 4)),
        );
        assert!(
            err.contains("buffers that differ") && err.contains("float64"),
            "{err}"
        );
        let err = refusal(
            CollectiveOp::Sum,
            &pair(f32x4("CUDA"), ("CUDA:1", DType::FLOAT32, 5)),
        );
        assert!(err.contains("buffers that differ"), "{err}");
        let err = refusal(
            CollectiveOp::Sum,
            &pair(("CUDA", DType::INT16, 4), ("CUDA:1", DType::INT16, 4)),
        );
        assert!(err.contains("NCCL has no int16 elements"), "{err}");
        assert!(supports(DType::FLOAT32) && supports(DType::BFLOAT16));
        assert!(!supports(DType::INT16) && !supports(DType::BOOL));
    }
}
