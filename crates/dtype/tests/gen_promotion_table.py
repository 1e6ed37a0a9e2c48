#!/usr/bin/env python3
"""Generates the reference promotion table that tests/promotion.rs checks the Rust crate against.

This is tinygrad's promotion lattice (tinygrad/dtype.py: `promo_lattice`, `least_upper_dtype`,
`least_upper_float`, `sum_acc_dtype`, `can_lossless_cast`) written out literally in Python, with two
deliberate differences from tinygrad:
  - `weakint` is called `index` (tinygrad-rs's `DType::INDEX`);
  - the fnuz fp8 formats are left out (tinygrad-rs only supports the OCP e4m3/e5m2 formats).

It needs nothing but the Python standard library. Regenerate with:

    python3 crates/dtype/tests/gen_promotion_table.py > crates/dtype/tests/data/promotion_table.rs

or check that the committed table is current with `--check`.
"""
from __future__ import annotations
import functools, os, sys
from dataclasses import dataclass


@dataclass(frozen=True, eq=True)
class DType:
  priority: int  # this determines when things get upcasted
  bitsize: int
  name: str  # the C-like name tinygrad's DType carries (it takes part in ordering)
  # tinygrad's DType.__lt__ compares (priority, bitsize, name, fmt, count); fmt/count never break a
  # tie among these scalar dtypes, so (priority, bitsize, name) is the same order.
  def __lt__(self, o: DType) -> bool: return (self.priority, self.bitsize, self.name) < (o.priority, o.bitsize, o.name)


class dtypes:
  index = DType(0, 800, "weakint")  # tinygrad's weakint
  bool = DType(0, 1, "bool")
  int8 = DType(1, 8, "signed char")
  uint8 = DType(2, 8, "unsigned char")
  int16 = DType(3, 16, "short")
  uint16 = DType(4, 16, "unsigned short")
  int32 = DType(5, 32, "int")
  uint32 = DType(6, 32, "unsigned int")
  int64 = DType(7, 64, "long")
  uint64 = DType(8, 64, "unsigned long")
  fp8e4m3 = DType(9, 8, "float8_e4m3")
  fp8e5m2 = DType(10, 8, "float8_e5m2")
  float16 = DType(11, 16, "half")
  bfloat16 = DType(12, 16, "__bf16")
  float32 = DType(13, 32, "float")
  float64 = DType(14, 64, "double")

  # dtype aliases
  half = float16; float = float32; double = float64  # noqa: E702
  uchar = uint8; ushort = uint16; uint = uint32; ulong = uint64  # noqa: E702
  char = int8; short = int16; int = int32; long = int64  # noqa: E702

  default_float = float32
  default_int = int32

  fp8s = (fp8e4m3, fp8e5m2)
  floats = fp8s + (float16, bfloat16, float32, float64)
  uints = (uint8, uint16, uint32, uint64)
  sints = (int8, int16, int32, int64)
  ints = uints + sints

  @staticmethod
  def is_float(x: DType) -> bool: return x in dtypes.floats
  @staticmethod
  def is_int(x: DType) -> bool: return x in (dtypes.ints + (dtypes.index,))
  @staticmethod
  def is_unsigned(x: DType) -> bool: return x in dtypes.uints


# https://jax.readthedocs.io/en/latest/jep/9407-type-promotion.html
promo_lattice = { dtypes.bool: [dtypes.index], dtypes.index: [dtypes.int8, dtypes.uint8],
  dtypes.int8: [dtypes.int16], dtypes.int16: [dtypes.int32], dtypes.int32: [dtypes.int64],
  dtypes.int64: [dtypes.uint64], dtypes.uint8: [dtypes.int16, dtypes.uint16], dtypes.uint16: [dtypes.int32, dtypes.uint32],
  dtypes.uint32: [dtypes.int64, dtypes.uint64], dtypes.uint64: [dtypes.fp8e4m3, dtypes.fp8e5m2],
  dtypes.fp8e4m3: [dtypes.float16, dtypes.bfloat16], dtypes.fp8e5m2: [dtypes.float16, dtypes.bfloat16],
  dtypes.float16: [dtypes.float32], dtypes.bfloat16: [dtypes.float32], dtypes.float32: [dtypes.float64], }

@functools.cache
def _get_recursive_parents(dtype: DType) -> set[DType]:
  return set.union(*[_get_recursive_parents(d) for d in promo_lattice[dtype]], {dtype}) if dtype != dtypes.float64 else {dtypes.float64}
@functools.cache
def least_upper_dtype(*ds: DType) -> DType:
  return min(set.intersection(*[_get_recursive_parents(d) for d in ds]))
def least_upper_float(dt: DType) -> DType: return dt if dtypes.is_float(dt) else least_upper_dtype(dt, dtypes.default_float)

def can_lossless_cast(dt0: DType, dt1: DType) -> bool:
  # return if dt1 preserves value of dt0
  if dt0 == dt1 or dt0 == dtypes.bool: return True
  match dt1:
    case dtypes.index: return dt0 in dtypes.ints
    case dtypes.double: return dt0 in (dtypes.float, dtypes.half, dtypes.bfloat16, *dtypes.fp8s,
      dtypes.uint32, dtypes.uint16, dtypes.uint8, dtypes.int32, dtypes.int16, dtypes.int8)
    case dtypes.float: return dt0 in (dtypes.half, dtypes.bfloat16, *dtypes.fp8s, dtypes.uint16, dtypes.uint8, dtypes.int16, dtypes.int8)
    case dtypes.half: return dt0 in (*dtypes.fp8s, dtypes.uint8, dtypes.int8)
    case dtypes.uint64: return dt0 in (dtypes.uint32, dtypes.uint16, dtypes.uint8)
    case dtypes.uint32: return dt0 in (dtypes.uint16, dtypes.uint8)
    case dtypes.uint16: return dt0 in (dtypes.uint8,)
    case dtypes.int64: return dt0 in (dtypes.uint32, dtypes.uint16, dtypes.uint8, dtypes.int32, dtypes.int16, dtypes.int8)
    case dtypes.int32: return dt0 in (dtypes.uint16, dtypes.uint8, dtypes.int16, dtypes.int8)
    case dtypes.int16: return dt0 in (dtypes.uint8, dtypes.int8)
    case _: return False

def sum_acc_dtype(dt: DType) -> DType:
  # default acc dtype for sum (tinygrad's SUM_DTYPE environment variable left at its default, float32)
  if dtypes.is_unsigned(dt): return least_upper_dtype(dt, dtypes.uint)
  if dtypes.is_int(dt) or dt == dtypes.bool: return least_upper_dtype(dt, dtypes.int)
  return least_upper_dtype(dt, dtypes.float32)


# DType::ALL's order, then index. Names are tinygrad-rs's canonical names (tinygrad's `dtypes.<name>`).
NAMES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "fp8e4m3", "fp8e5m2",
         "float16", "bfloat16", "float32", "float64", "index"]
DTS = [getattr(dtypes, n) for n in NAMES]
NAME_OF = {dt: n for n, dt in zip(NAMES, DTS)}


def _pack(items: list[str], indent: int = 4, width: int = 100) -> list[str]:
  # rustfmt's layout for an array of short literals: as many per line as fit in `width`.
  lines, cur = [], ""
  for it in items:
    if cur and indent + len(cur) + 1 + len(it) > width: lines.append(" " * indent + cur); cur = it
    else: cur = f"{cur} {it}" if cur else it
  return lines + ([" " * indent + cur] if cur else [])


def _triple_exceptions():
  # The lattice is not a true lattice: fp8e4m3 and fp8e5m2 have two minimal common parents (float16,
  # bfloat16) and least_upper_dtype picks float16 by priority, so a few triples do not associate.
  for a in DTS:
    for b in DTS:
      for c in DTS:
        l, r = least_upper_dtype(least_upper_dtype(a, b), c), least_upper_dtype(a, least_upper_dtype(b, c))
        t = least_upper_dtype(a, b, c)
        if not l == r == t: yield a, b, c, l, r, t


def render() -> str:
  out = [
    "// @generated by crates/dtype/tests/gen_promotion_table.py from tinygrad's promotion lattice",
    "// (tinygrad/dtype.py, weakint renamed index, fnuz fp8 formats left out). Do not edit by hand:",
    "// python3 crates/dtype/tests/gen_promotion_table.py > crates/dtype/tests/data/promotion_table.rs",
    "",
    "/// Every dtype of the table: `DType::ALL` in order, then `index`.",
    "const NAMES: &[&str] = &[",
    *_pack([f'"{n}",' for n in NAMES]),
    "];",
    "",
    "/// `(a, b, least_upper_dtype(a, b))` for every ordered pair of [`NAMES`].",
    "const LEAST_UPPER: &[(&str, &str, &str)] = &[",
    *[f'    ("{NAME_OF[a]}", "{NAME_OF[b]}", "{NAME_OF[least_upper_dtype(a, b)]}"),' for a in DTS for b in DTS],
    "];",
    "",
    "/// The triples `(a, b, c)` of [`NAMES`] where tinygrad's promotion is not associative, or where",
    "/// `least_upper_dtype(a, b, c)` differs from `least_upper_dtype(least_upper_dtype(a, b), c)`, as",
    "/// `(a, b, c, (a + b) + c, a + (b + c), least_upper_dtype(a, b, c))`. Every other triple has all",
    "/// three equal.",
    "const TRIPLE_EXCEPTIONS: &[(&str, &str, &str, &str, &str, &str)] = &[",
    # (one tuple over three lines: rustfmt's layout for a tuple this long)
    *[line for row in _triple_exceptions()
      for line in ("    (", "        " + " ".join(f'"{NAME_OF[d]}",' for d in row), "    ),")],
    "];",
    "",
    "/// `(dt, sum_acc_dtype(dt), least_upper_float(dt))` for every dtype of [`NAMES`].",
    "const PER_DTYPE: &[(&str, &str, &str)] = &[",
    *[f'    ("{NAME_OF[d]}", "{NAME_OF[sum_acc_dtype(d)]}", "{NAME_OF[least_upper_float(d)]}"),' for d in DTS],
    "];",
    "",
    "/// `(from, to, can_lossless_cast(from, to))` for every ordered pair of [`NAMES`].",
    "const LOSSLESS: &[(&str, &str, bool)] = &[",
    *[f'    ("{NAME_OF[a]}", "{NAME_OF[b]}", {str(can_lossless_cast(a, b)).lower()}),' for a in DTS for b in DTS],
    "];",
  ]
  return "\n".join(out) + "\n"


if __name__ == "__main__":
  text = render()
  if sys.argv[1:] == ["--check"]:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "promotion_table.rs")
    with open(path) as f: current = f.read()
    if current != text:
      sys.exit(f"{path} is out of date: regenerate it with {sys.argv[0]}")
    print(f"{path} is up to date")
  elif sys.argv[1:]:
    sys.exit(f"usage: {sys.argv[0]} [--check]")
  else:
    sys.stdout.write(text)
