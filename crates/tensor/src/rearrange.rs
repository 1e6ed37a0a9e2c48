//! `rearrange`: einops-style axis rearrangement (tinygrad's `Tensor.rearrange`), built from
//! `unflatten`, `permute` and `flatten`/`unsqueeze` — a view, no copy.
//!
//! A formula names the input axes and the output order: `"b c h w -> b (h w) c"`. Parentheses
//! group axes (split on the left, merged on the right), `1` is an axis of size 1, `...` stands
//! for the axes not named (at most once, not inside a group on the left). Sizes of split axes
//! come from [`Tensor::rearrange`]'s `sizes` (one may be inferred).

use crate::Tensor;

/// One side of a formula: axis names (the fully split axes) and the `[start, end)` name ranges
/// of each parenthesized group (`1` is an empty group).
fn parse_side(side: &str, formula: &str) -> (Vec<String>, Vec<(usize, usize)>) {
    let spaced = side
        .replace('…', "...")
        .replace('(', " ( ")
        .replace(')', " ) ");
    let mut names = Vec::new();
    let mut groups = Vec::new();
    let mut open: Option<usize> = None;
    for tok in spaced.split_whitespace() {
        match tok {
            "(" => {
                assert!(
                    open.is_none(),
                    "rearrange: nested parentheses in {formula:?}"
                );
                open = Some(names.len());
            }
            ")" => {
                let s = open
                    .take()
                    .unwrap_or_else(|| panic!("rearrange: bracket mismatch in {formula:?}"));
                groups.push((s, names.len()));
            }
            "1" => {
                assert!(
                    open.is_none(),
                    "rearrange: `1` inside parentheses in {formula:?}"
                );
                groups.push((names.len(), names.len()));
            }
            name => names.push(name.to_string()),
        }
    }
    assert!(open.is_none(), "rearrange: bracket mismatch in {formula:?}");
    (names, groups)
}

fn valid_name(n: &str) -> bool {
    n == "..."
        || (n.chars().next().is_some_and(|c| c.is_alphabetic())
            && n.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !n.ends_with('_'))
}

/// `names` with `...` replaced by `...0`, `...1`, ... (`ell` of them), and group ranges moved
/// past it accordingly.
fn expand_ellipsis(
    names: &[String],
    groups: &[(usize, usize)],
    ell: usize,
) -> (Vec<String>, Vec<(usize, usize)>) {
    let Some(at) = names.iter().position(|n| n == "...") else {
        return (names.to_vec(), groups.to_vec());
    };
    let mut out: Vec<String> = names[..at].to_vec();
    out.extend((0..ell).map(|j| format!("...{j}")));
    out.extend(names[at + 1..].iter().cloned());
    let shift = |i: usize| if i > at { i + ell - 1 } else { i };
    let groups = groups.iter().map(|&(s, e)| (shift(s), shift(e))).collect();
    (out, groups)
}

impl Tensor {
    /// Rearranges axes by an einops formula (see the [module docs](crate::rearrange)): the
    /// input axes are split as the left side's groups say (sizes from `sizes`, one per group
    /// may be inferred), permuted to the right side's order, and merged by its groups.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let x = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]);
    /// assert_eq!(x.rearrange("batch channel -> (batch channel)", &[]).to_vec::<i32>(), vec![1, 2, 3, 4]);
    /// assert_eq!(x.rearrange("b c -> c b", &[]).to_vec::<i32>(), vec![1, 3, 2, 4]);
    /// let y = Tensor::arange(0.0, 12.0, 1.0).rearrange("(h w) -> w h 1", &[("h", 3)]);
    /// assert_eq!(y.shape(), vec![4, 3, 1]);
    /// ```
    ///
    /// # Panics
    /// On a malformed formula (no or several `->`, unbalanced parentheses, different or repeated
    /// names on the two sides, an invalid name, several `...` or one inside a left group), a
    /// size for a name the left side lacks, or sizes that don't match the shape.
    pub fn rearrange(&self, formula: &str, sizes: &[(&str, usize)]) -> Tensor {
        let sides: Vec<&str> = formula.split("->").collect();
        assert!(
            sides.len() == 2,
            "rearrange: need exactly one \"->\" in {formula:?}"
        );
        let (lhs, lgroups) = parse_side(sides[0], formula);
        let (rhs, rgroups) = parse_side(sides[1], formula);
        for (name, _) in sizes {
            assert!(
                lhs.iter().any(|n| n == name),
                "rearrange: axis {name} is not used in {formula:?}"
            );
        }
        let (mut ls, mut rs) = (lhs.clone(), rhs.clone());
        ls.sort();
        rs.sort();
        let mut dedup = ls.clone();
        dedup.dedup();
        assert!(
            ls == rs && dedup.len() == ls.len(),
            "rearrange: name mismatch in {formula:?} (each axis named once on each side)"
        );
        for n in lhs.iter().chain(&rhs) {
            assert!(
                valid_name(n),
                "rearrange: invalid axis name {n:?} in {formula:?}"
            );
        }
        assert!(
            lgroups
                .iter()
                .all(|&(s, e)| !lhs[s..e].iter().any(|n| n == "...")),
            "rearrange: cannot have collapsed ellipsis (...) in the left side of {formula:?}"
        );
        assert!(
            lhs.iter().filter(|n| *n == "...").count() <= 1,
            "rearrange: too many ellipses in {formula:?}"
        );
        let shape = self.shape();
        let named = lhs.len() - usize::from(lhs.iter().any(|n| n == "..."));
        // each left group stands for one input axis
        let left_axes = named - lgroups.iter().map(|&(s, e)| e - s).sum::<usize>() + lgroups.len();
        let ell = if lhs.iter().any(|n| n == "...") {
            assert!(
                shape.len() >= left_axes,
                "rearrange: {formula:?} names {left_axes} axes, shape {shape:?} has {}",
                shape.len()
            );
            shape.len() - left_axes
        } else {
            assert!(
                shape.len() == left_axes,
                "rearrange: {formula:?} names {left_axes} axes, shape {shape:?} has {}",
                shape.len()
            );
            0
        };
        let (lhs, lgroups) = expand_ellipsis(&lhs, &lgroups, ell);
        let (rhs, rgroups) = expand_ellipsis(&rhs, &rgroups, ell);
        let size_of = |n: &str| sizes.iter().find(|(k, _)| *k == n).map(|&(_, v)| v);
        // split: each left group's axis becomes its names' axes (in names coordinates)
        let mut t = self.clone();
        for &(s, e) in &lgroups {
            if s == e {
                let sh = t.shape();
                assert!(
                    sh[s] == 1,
                    "rearrange: `1` in {formula:?} stands for axis {s} of shape {sh:?}, which is not 1"
                );
                t = t.squeeze(Some(s as isize));
                continue;
            }
            let sh = t.shape();
            let want: Vec<isize> = lhs[s..e]
                .iter()
                .map(|n| size_of(n).map_or(-1, |v| v as isize))
                .collect();
            let known: usize = want
                .iter()
                .filter(|&&v| v >= 0)
                .map(|&v| v as usize)
                .product();
            let unknown = want.iter().filter(|&&v| v < 0).count();
            assert!(
                unknown <= 1
                    && (if unknown == 0 {
                        known == sh[s]
                    } else {
                        known > 0 && sh[s].is_multiple_of(known)
                    }),
                "rearrange: axis {s} of shape {sh:?} cannot be split into {:?} with sizes {sizes:?} \
                 ({formula:?})",
                &lhs[s..e]
            );
            t = t.unflatten(s as isize, &want);
        }
        let sh = t.shape();
        for (i, n) in lhs.iter().enumerate() {
            if let Some(v) = size_of(n) {
                assert!(
                    sh[i] == v,
                    "rearrange: size {v} given for axis {n}, but it has {} ({formula:?})",
                    sh[i]
                );
            }
        }
        let perm: Vec<isize> = rhs
            .iter()
            .map(|n| lhs.iter().position(|m| m == n).expect("same names") as isize)
            .collect();
        t = t.permute(&perm);
        for &(s, e) in rgroups.iter().rev() {
            t = if s < e {
                t.flatten(s as isize, e as isize - 1)
            } else {
                t.unsqueeze(s as isize)
            };
        }
        t
    }
}
