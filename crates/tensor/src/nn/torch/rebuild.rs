//! From the unpickled object to tensors: the walk that flattens containers into dotted names,
//! and each tensor's view built from its storage with movement ops.

use super::zip::zip_entries;
use super::*;

pub(super) fn load(
    bytes: &[u8],
    name: &str,
    device: &str,
) -> Result<BTreeMap<String, Tensor>, TorchError> {
    let device = tinygrad_runtime::get_device(device)
        .map_err(|e| err(name, None, e.to_string()))?
        .name()
        .to_string();
    let entries = zip_entries(bytes).map_err(|m| err(name, None, m))?;
    // the archive's folder: `<base>/data.pkl`
    let base = entries
        .keys()
        .find_map(|k| {
            k.strip_suffix("/data.pkl")
                .filter(|b| !b.contains('/'))
                .map(str::to_string)
        })
        .ok_or_else(|| {
            err(
                name,
                None,
                "no `<archive>/data.pkl` entry: not a torch.save checkpoint",
            )
        })?;
    if let Some(order) = entries.get(&format!("{base}/byteorder"))
        && *order != b"little"
    {
        return Err(err(
            name,
            None,
            format!(
                "byte order {:?} is not supported (only little-endian)",
                String::from_utf8_lossy(order)
            ),
        ));
    }
    let pkl = entries[&format!("{base}/data.pkl")];
    let root = unpickle(pkl).map_err(|m| err(name, None, format!("data.pkl: {m}")))?;
    let mut ctx = Build {
        entries: &entries,
        base: &base,
        device: &device,
        storages: HashMap::new(),
        out: BTreeMap::new(),
        visits: 0,
        max_visits: pkl.len().saturating_mul(4).saturating_add(1024),
        path: Vec::new(),
    };
    ctx.flatten(&root, String::new(), 0)
        .map_err(|(t, m)| err(name, t.as_deref(), m))?;
    Ok(ctx.out)
}

/// Nesting deeper than this is refused (a hostile pickle could exhaust the stack).
const MAX_DEPTH: usize = 64;

struct Build<'a> {
    entries: &'a HashMap<String, &'a [u8]>,
    base: &'a str,
    device: &'a str,
    /// Each storage's tensor (of unsigned ints of its item size), uploaded once.
    storages: HashMap<String, Tensor>,
    out: BTreeMap<String, Tensor>,
    visits: usize,
    max_visits: usize,
    /// The containers being walked (a cycle is skipped).
    path: Vec<usize>,
}

type BuildErr = (Option<String>, String);

impl Build<'_> {
    fn flatten(&mut self, v: &V, prefix: String, depth: usize) -> Result<(), BuildErr> {
        self.visits += 1;
        if self.visits > self.max_visits {
            return Err((
                None,
                format!(
                    "the pickle's shared containers expand to more than {} entries",
                    self.max_visits
                ),
            ));
        }
        if depth > MAX_DEPTH {
            return Err((
                Some(prefix),
                format!("nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        let join = |k: &str| {
            if prefix.is_empty() {
                k.to_string()
            } else {
                format!("{prefix}.{k}")
            }
        };
        let (id, children): (usize, Vec<(String, V)>) = match v {
            V::Tensor(spec) => {
                let t = self.tensor(spec).map_err(|m| (Some(prefix.clone()), m))?;
                if self.out.insert(prefix.clone(), t).is_some() {
                    return Err((Some(prefix), "two tensors flatten to this name".to_string()));
                }
                return Ok(());
            }
            V::Dict(d) => (
                Rc::as_ptr(d) as *const () as usize,
                d.borrow()
                    .iter()
                    .filter_map(|(k, v)| match k {
                        Key::Str(s) => Some((join(s), v.clone())),
                        Key::Int(i) => Some((join(&i.to_string()), v.clone())),
                        Key::Other(_) => None,
                    })
                    .collect(),
            ),
            V::List(l) => (
                Rc::as_ptr(l) as *const () as usize,
                l.borrow()
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (join(&i.to_string()), v.clone()))
                    .collect(),
            ),
            V::Tuple(t) => (
                Rc::as_ptr(t) as *const () as usize,
                t.iter()
                    .enumerate()
                    .map(|(i, v)| (join(&i.to_string()), v.clone()))
                    .collect(),
            ),
            _ => return Ok(()), // not a tensor
        };
        if self.path.contains(&id) {
            return Ok(()); // a container holding itself
        }
        self.path.push(id);
        for (k, c) in children {
            self.flatten(&c, k, depth + 1)?;
        }
        self.path.pop();
        Ok(())
    }

    /// The tensor of a `_rebuild_tensor_v2` call, its strides applied to its storage.
    fn tensor(&mut self, spec: &Spec) -> Result<Tensor, String> {
        let st = &spec.storage;
        let dtype = st.dtype;
        let item = dtype.itemsize();
        let entry = format!("{}/data/{}", self.base, st.key);
        let data = *self
            .entries
            .get(&entry)
            .ok_or_else(|| format!("storage `{}` is missing (no entry `{entry}`)", st.key))?;
        let n = usize::try_from(st.numel)
            .ok()
            .filter(|&n| n.checked_mul(item).is_some_and(|b| b <= data.len()))
            .ok_or_else(|| {
                format!(
                    "storage `{}` of {} {dtype} elements needs more than its {} bytes",
                    st.key,
                    st.numel,
                    data.len()
                )
            })?;
        let size: Vec<usize> = spec
            .size
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("size {:?} too large", spec.size)))
            .collect::<Result<_, _>>()?;
        let numel = tinygrad_uop::shape::checked_numel(&size, item)
            .ok_or_else(|| format!("size {size:?} of {dtype} is too large for a tensor"))?;
        if numel == 0 {
            return Ok(Tensor::from_bytes(&[], dtype, &size, self.device));
        }
        // the last element the view reads: offset + sum((size - 1) * stride)
        let last = spec
            .size
            .iter()
            .zip(&spec.stride)
            .try_fold(spec.offset, |a, (&s, &st)| {
                (s - 1).checked_mul(st).and_then(|x| a.checked_add(x))
            });
        if last.is_none_or(|l| l >= st.numel) {
            return Err(format!(
                "the view (offset {}, size {:?}, stride {:?}) reads past its storage `{}` of {} \
                 elements",
                spec.offset, spec.size, spec.stride, st.key, st.numel
            ));
        }
        let bits = match item {
            1 => DType::UINT8,
            2 => DType::UINT16,
            4 => DType::UINT32,
            _ => DType::UINT64,
        };
        let device = self.device;
        let base = self
            .storages
            .entry(st.key.clone())
            .or_insert_with(|| Tensor::from_bytes(&data[..n * item], bits, &[n], device))
            .clone();
        // every value fits in usize now: the view lies inside a storage of n elements
        let stride: Vec<usize> = spec.stride.iter().map(|&s| s as usize).collect();
        let view = strided(&base, spec.offset as usize, &size, &stride)?;
        Ok(if dtype == DType::BOOL {
            view.ne(0u8)
        } else {
            view.bitcast(dtype)
        })
    }
}

/// `base[offset + sum(i_k * stride_k)]` for each index of `size` (no zero sizes), with movement
/// ops only: the axes of size > 1 and stride > 0, outermost stride first, are cut from a window
/// of the storage one at a time — reshaping `[.., n * s]` to `[.., n, s]` when rows don't
/// overlap, else repeating the window `n` times and reading it with a row pitch of
/// `window + s` — then permuted back to their order; stride-0 axes are expanded.
///
/// # Errors
/// When overlapping rows would make the repeated window larger than a tensor can be.
fn strided(
    base: &Tensor,
    offset: usize,
    size: &[usize],
    stride: &[usize],
) -> Result<Tensor, String> {
    let mut real: Vec<usize> = (0..size.len())
        .filter(|&k| size[k] > 1 && stride[k] > 0)
        .collect();
    real.sort_by_key(|&k| std::cmp::Reverse(stride[k]));
    // extent[j]: the elements axes j.. of `real` span
    let mut extent = vec![1usize; real.len() + 1];
    for j in (0..real.len()).rev() {
        extent[j] = extent[j + 1] + (size[real[j]] - 1) * stride[real[j]];
    }
    let mut t = base.shrink(&[(offset, offset + extent[0])]);
    let mut lead: Vec<isize> = Vec::new();
    // the elements of the axes cut so far: every intermediate view's size is checked
    let mut lead_numel = 1usize;
    let too_large = |what: usize| {
        format!(
            "strides {stride:?} for size {size:?} need an intermediate view of more than {what} \
             elements: too large"
        )
    };
    let limit = tinygrad_uop::shape::MAX_BYTES / 8;
    for (j, &k) in real.iter().enumerate() {
        let (n, s, w, next) = (size[k], stride[k], extent[j], extent[j + 1]);
        let mut shape = lead.clone();
        let axis = lead.len();
        // the elements of the view before the cut to `next`: lead * n * (s or w + s)
        let row = if s >= next { Some(s) } else { w.checked_add(s) };
        if row
            .and_then(|r| r.checked_mul(n))
            .and_then(|x| x.checked_mul(lead_numel))
            .is_none_or(|x| x > limit)
        {
            return Err(too_large(limit));
        }
        lead_numel *= n;
        if s >= next {
            // rows of s elements, of which the first `next` are this axis' window
            let need = n * s;
            t = resize_last(&t, axis, w, need);
            shape.extend([n as isize, s as isize]);
            t = t.reshape(&shape);
        } else {
            // overlapping rows: n copies of the window, read with a pitch of w + s
            let mut rep = lead.clone();
            rep.extend([n as isize, w as isize]);
            t = t.unsqueeze(axis as isize).expand(&rep);
            let mut flat = lead.clone();
            flat.push((n * w) as isize);
            t = t.reshape(&flat);
            t = resize_last(&t, axis, n * w, n * (w + s));
            shape.extend([n as isize, (w + s) as isize]);
            t = t.reshape(&shape);
        }
        let mut bounds: Vec<(usize, usize)> = t.shape().iter().map(|&d| (0, d)).collect();
        bounds[axis + 1] = (0, next);
        t = t.shrink(&bounds);
        lead.push(n as isize);
    }
    // [sizes in stride order..., 1] -> the real axes in their own order
    t = t.reshape(&lead);
    let mut order: Vec<usize> = (0..real.len()).collect();
    order.sort_by_key(|&j| real[j]);
    if order.iter().enumerate().any(|(a, &b)| a != b) {
        let perm: Vec<isize> = order.iter().map(|&j| j as isize).collect();
        t = t.permute(&perm);
    }
    let with_ones: Vec<isize> = (0..size.len())
        .map(|k| {
            if real.contains(&k) {
                size[k] as isize
            } else {
                1
            }
        })
        .collect();
    let full: Vec<isize> = size.iter().map(|&d| d as isize).collect();
    t = t.reshape(&with_ones);
    if with_ones != full {
        t = t.expand(&full);
    }
    Ok(t)
}

/// `t` with its last axis (index `axis`, now of `have` elements) cut or zero-padded to `want`.
fn resize_last(t: &Tensor, axis: usize, have: usize, want: usize) -> Tensor {
    let mut bounds: Vec<(usize, usize)> = t.shape().iter().map(|&d| (0, d)).collect();
    if want < have {
        bounds[axis] = (0, want);
        t.shrink(&bounds)
    } else if want > have {
        let mut pad = vec![(0, 0); bounds.len()];
        pad[axis] = (0, want - have);
        t.pad(&pad, 0)
    } else {
        t.clone()
    }
}
