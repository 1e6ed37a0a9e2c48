//! [`Tensor::einsum`]: sums of products by an Einstein-summation formula, tinygrad's algorithm —
//! expand `...`, take diagonals for letters repeated within one operand, align every operand to
//! the sorted alphabet of letters (permute, reshape, expand), multiply, sum the letters not in
//! the output and permute to the output's order. The product is one lazy graph, so the
//! scheduler fuses it into one reduce kernel (a matmul-shaped one takes the CPU's GEMM path).

use std::collections::BTreeMap;

use crate::Tensor;

/// Letters for `...`, in tinygrad's order (`string.ascii_letters` minus those in the formula).
fn free_letters(formula: &str) -> Vec<char> {
    ('a'..='z')
        .chain('A'..='Z')
        .filter(|c| !formula.contains(*c))
        .collect()
}

/// The formula with `...` replaced by letters and an explicit `->` part.
fn expand_ellipsis(formula: &str, xs: &[&Tensor]) -> String {
    if !formula.contains("...") {
        return formula.to_string();
    }
    let ell = free_letters(formula);
    let lhs = formula.split("->").next().unwrap_or("");
    let inputs: Vec<&str> = lhs.split(',').collect();
    let ell_n: Vec<usize> = inputs
        .iter()
        .zip(xs)
        .map(|(s, x)| {
            if s.contains("...") {
                (x.ndim() + 3).saturating_sub(s.len())
            } else {
                0
            }
        })
        .collect();
    let max_n = ell_n.iter().copied().max().unwrap_or(0);
    assert!(
        max_n <= ell.len(),
        "einsum: {formula:?} needs {max_n} letters for '...', only {} are free",
        ell.len()
    );
    let new_inputs: Vec<String> = inputs
        .iter()
        .zip(&ell_n)
        .map(|(s, &n)| s.replace("...", &ell[max_n - n..max_n].iter().collect::<String>()))
        .collect();
    let new_lhs = new_inputs.join(",");
    let ell_out: String = ell[..max_n].iter().collect();
    let rhs = match formula.split_once("->") {
        Some((_, r)) => r.replace("...", &ell_out),
        None => {
            let mut auto: Vec<char> = lhs
                .chars()
                .filter(|&c| c.is_alphabetic() && lhs.matches(c).count() == 1 && !ell.contains(&c))
                .collect();
            auto.sort_unstable();
            format!("{ell_out}{}", auto.into_iter().collect::<String>())
        }
    };
    format!("{new_lhs}->{rhs}")
}

/// `x` (labelled `s`) with every letter repeated in `s` reduced to its diagonal.
fn take_diagonals(mut s: Vec<char>, mut x: Tensor, formula: &str) -> (Vec<char>, Tensor) {
    loop {
        let Some((j, k)) =
            (0..s.len()).find_map(|j| (j + 1..s.len()).find(|&k| s[k] == s[j]).map(|k| (j, k)))
        else {
            return (s, x);
        };
        let shape = x.shape();
        let n = shape[j];
        assert!(
            shape[k] == n,
            "einsum: {formula:?}: letter {:?} labels axes of sizes {n} and {} in one operand",
            s[j],
            shape[k]
        );
        let nd = shape.len();
        if nd == 2 {
            x = x.diagonal();
        } else {
            let perm: Vec<isize> = (0..nd)
                .filter(|&d| d != j && d != k)
                .chain([j, k])
                .map(|d| d as isize)
                .collect();
            let mut pads = vec![(0, 0); nd - 2];
            pads.push((0, n));
            let y = x.permute(&perm).flatten(-2, -1).pad(&pads, 0);
            let y = y.unflatten(-1, &[n as isize, n as isize + 1]);
            let mut bounds: Vec<(usize, usize)> = y.shape().iter().map(|&d| (0, d)).collect();
            let last = bounds.len() - 1;
            bounds[last] = (0, 1);
            x = y.shrink(&bounds).squeeze(Some(-1));
            // the diagonal's axis is now last
            let c = s[j];
            s = s
                .iter()
                .enumerate()
                .filter(|&(d, _)| d != j && d != k)
                .map(|(_, &c)| c)
                .collect();
            s.push(c);
            continue;
        }
        s.remove(k);
    }
}

impl Tensor {
    /// Sums the product of `operands` by the Einstein-summation `formula` (PyTorch's and
    /// tinygrad's `einsum`): letters label axes, `,` separates operands, `->` names the output
    /// axes (without it: the letters used once, sorted), `...` stands for the remaining leading
    /// axes (broadcast across operands), a letter repeated within one operand takes its
    /// diagonal. Spaces are ignored.
    ///
    /// # Panics
    /// If the number of operands doesn't match the formula, a letter labels axes of different
    /// sizes, an operand has another number of axes than its letters, or an output letter labels
    /// no input axis.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let x = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]);
    /// let y = Tensor::from_slice(&[5i32, 6, 7, 8], &[2, 2]);
    /// assert_eq!(Tensor::einsum("ij,ij->", &[&x, &y]).item::<i32>(), 70);
    /// assert_eq!(Tensor::einsum("ij,jk->ik", &[&x, &y]).to_vec::<i32>(), vec![19, 22, 43, 50]);
    /// assert_eq!(Tensor::einsum("ii", &[&x]).item::<i32>(), 5);
    /// assert_eq!(Tensor::einsum("ij->ji", &[&x]).to_vec::<i32>(), vec![1, 3, 2, 4]);
    /// ```
    pub fn einsum(formula: &str, operands: &[&Tensor]) -> Tensor {
        let compact: String = formula.chars().filter(|c| !c.is_whitespace()).collect();
        let f = expand_ellipsis(&compact, operands);
        let (lhs, rhs) = match f.split_once("->") {
            Some((l, r)) => (l.to_string(), r.to_string()),
            None => {
                let mut auto: Vec<char> = f
                    .chars()
                    .filter(|&c| c.is_alphabetic() && f.matches(c).count() == 1)
                    .collect();
                auto.sort_unstable();
                (f.clone(), auto.into_iter().collect())
            }
        };
        let inputs: Vec<&str> = lhs.split(',').collect();
        assert!(
            inputs.len() == operands.len(),
            "einsum: {formula:?} has {} operands, got {}",
            inputs.len(),
            operands.len()
        );
        let mut labelled: Vec<(Vec<char>, Tensor)> = Vec::with_capacity(operands.len());
        for (s, x) in inputs.iter().zip(operands) {
            let letters: Vec<char> = s.chars().collect();
            assert!(
                letters.iter().all(|c| c.is_ascii_alphabetic()),
                "einsum: {formula:?}: operand labels {s:?} must be letters"
            );
            assert!(
                letters.len() == x.ndim(),
                "einsum: {formula:?}: operand {s:?} has {} letters but shape {:?}",
                letters.len(),
                x.shape()
            );
            labelled.push(take_diagonals(letters, (*x).clone(), formula));
        }
        // sizes per letter, and the sorted alphabet
        let mut sz: BTreeMap<char, usize> = BTreeMap::new();
        for (s, x) in &labelled {
            for (c, d) in s.iter().zip(x.shape()) {
                let prev = *sz.entry(*c).or_insert(d);
                assert!(
                    prev == d,
                    "einsum: {formula:?}: letter {c:?} labels axes of sizes {prev} and {d}"
                );
            }
        }
        let out: Vec<char> = rhs.chars().collect();
        for c in &out {
            assert!(
                sz.contains_key(c),
                "einsum: {formula:?}: output letter {c:?} labels no input axis"
            );
        }
        let alpha: Vec<char> = sz.keys().copied().collect();
        let full: Vec<isize> = alpha.iter().map(|c| sz[c] as isize).collect();
        let aligned: Vec<Tensor> = labelled
            .into_iter()
            .map(|(s, x)| {
                if s.is_empty() {
                    return x;
                }
                let mut sorted = s.clone();
                sorted.sort_unstable();
                let perm: Vec<isize> = sorted
                    .iter()
                    .map(|c| s.iter().position(|d| d == c).expect("letter") as isize)
                    .collect();
                let shape: Vec<isize> = alpha
                    .iter()
                    .map(|c| if s.contains(c) { sz[c] as isize } else { 1 })
                    .collect();
                x.permute(&perm).reshape(&shape).expand(&full)
            })
            .collect();
        let prod = aligned
            .iter()
            .skip(1)
            .fold(aligned[0].clone(), |acc, x| acc * x);
        let sum_axes: Vec<isize> = alpha
            .iter()
            .enumerate()
            .filter(|(_, c)| !out.contains(c))
            .map(|(i, _)| i as isize)
            .collect();
        let summed = if sum_axes.is_empty() {
            prod
        } else {
            prod.sum(crate::Axis::Some(sum_axes))
        };
        // the remaining letters are in alphabetical order: permute them into the output's
        let mut remaining: Vec<char> = out.clone();
        remaining.sort_unstable();
        let perm: Vec<isize> = out
            .iter()
            .map(|c| remaining.iter().position(|d| d == c).expect("letter") as isize)
            .collect();
        if perm.is_empty() {
            summed
        } else {
            summed.permute(&perm)
        }
    }
}
