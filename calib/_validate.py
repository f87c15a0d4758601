"""Turn user input into checked arrays, or raise a ValueError that says what is wrong and how to fix it.

Every public function of :mod:`calib` passes its array arguments through here, so that bad input fails
early with a message naming the argument, the problem and the fix, rather than as a silent NaN or a
crash deep inside numpy. Torch tensors are accepted wherever arrays are (they are detached and copied
to the CPU); torch itself is never imported by this module.

Checked arrays are float64 unless a caller asks to keep the input's precision (``dtype=None``: float32 stays
float32, so that a float32 (N, K) array is checked and its top label taken without a float64 copy); such callers
accumulate in float64 only per-row or per-bin quantities.
"""

from __future__ import annotations

import numbers
import os
import sys
from typing import cast

import numpy as np

#: Rows of ``probs`` may deviate from summing to 1 by this much (float32 softmax of 1000 classes
#: stays within about 1e-5 of 1).
ROW_SUM_ATOL = 1e-4


def to_numpy(x, name: str) -> np.ndarray:
    """Return ``x`` as a numpy array (a torch tensor is detached and moved to the CPU)."""
    if x is None:
        raise ValueError(f"{name} is None; pass an array or a torch tensor.")
    if type(x).__module__.startswith("scipy.sparse"):  # np.asarray would give a 0-D object array
        raise ValueError(f"{name} is a scipy sparse {type(x).__name__}; calib takes dense arrays: pass "
                         f"{name}.toarray().")
    if is_tensor(x):
        _check_dense_values(x, name)
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":  # numpy has no bfloat16
            x = x.float()
        x = x.numpy()
    try:
        arr = np.asarray(x)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name} could not be read as an array ({exc}); pass a rectangular array.") from exc
    if not arr.dtype.isnative:  # big-endian data on a little-endian machine: the same values, native order
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def _check_dense_values(x, name: str) -> None:
    """Refuse a torch tensor without values (on the meta device) or not dense (sparse), which torch's operations
    would refuse deep inside with their own errors."""
    if x.device.type == "meta":
        raise ValueError(f"{name} is a tensor on the meta device, which holds shapes but no values; pass a tensor "
                         f"with data (on the CPU or a GPU).")
    if str(x.layout) != "torch.strided":
        raise ValueError(f"{name} is a {str(x.layout).replace('torch.', '')} torch tensor; calib takes dense "
                         f"arrays: pass {name}.to_dense().")


def checked_tensor(logits, name: str = "logits"):
    """A floating (N, K) torch tensor of finite logits, K >= 2, dense, on its device (integers become float64): the
    one check of the functions that keep a tensor a tensor (:func:`calib.focal.focal_map` and the post-hoc maps)."""
    import torch

    _check_dense_values(logits, name)
    if logits.ndim != 2 or logits.shape[0] == 0 or logits.shape[1] < 2:
        raise ValueError(f"{name} must have shape (N, K) with N >= 1 and K >= 2; got {tuple(logits.shape)}.")
    if not logits.is_floating_point():
        logits = logits.double()
    if not bool(torch.isfinite(logits).all()):
        raise ValueError(f"{name} contains NaN or infinity; remove or repair those entries before calling.")
    return logits


def is_tensor(x) -> bool:
    """Whether ``x`` is a torch tensor, a subclass included (``torch.nn.Parameter``, another library's tensor
    type), without importing torch: if torch is not imported, nothing is a tensor."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _is_half(x) -> bool:
    """Whether ``x`` holds half-precision floats (numpy float16, torch float16 or bfloat16)."""
    return str(getattr(x, "dtype", "")) in ("float16", "torch.float16", "torch.bfloat16")


def _half_precision_error(name: str, x, problem: str) -> ValueError:
    return ValueError(
        f"{name} is {str(x.dtype).replace('torch.', '')}: half precision keeps about 3 significant digits, so "
        f"{problem}. Compute the probabilities in float32 or float64 and pass those (e.g. "
        f"torch.softmax(logits.float(), dim=1), or probs.astype(np.float32))."
    )


def _check_real(arr: np.ndarray, name: str) -> None:
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name} has dtype {arr.dtype}; pass a numeric array.")
    if np.iscomplexobj(arr):
        raise ValueError(f"{name} is complex; pass a real array.")


def check_finite(arr: np.ndarray, name: str) -> None:
    """Raise if ``arr`` holds NaN or infinity, saying where the first one is.

    The test is ``min`` and ``max`` being finite (both propagate NaN), two reductions without the (N, K) boolean
    temporary of ``isfinite``; the position is searched for only when there is one.
    """
    if arr.size == 0 or np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool:
        return
    if not (np.isfinite(arr.min()) and np.isfinite(arr.max())):
        bad = np.argwhere(~np.isfinite(arr))[0]
        where = tuple(int(i) for i in bad)
        raise ValueError(
            f"{name} contains NaN or infinity (first at index {where[0] if len(where) == 1 else where}); "
            f"remove or repair those entries before calling."
        )


def as_float_array(x, name: str, ndim: int | tuple[int, ...] | None = None, *, finite: bool = True,
                   dtype=np.float64) -> np.ndarray:
    """Return ``x`` as a float array with the given number of dimensions, checked to be finite.

    ``dtype=None`` keeps float32 and float64 input as it is (no copy of a C-contiguous numpy array) and turns
    anything else into float64. The array returned is C-contiguous in native byte order (a Fortran-ordered, strided
    or big-endian input is copied), so that a result is the same, bit for bit, for every layout of the same numbers
    (``tests/test_layouts.py``).
    """
    arr = to_numpy(x, name)
    _check_real(arr, name)
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            want = " or ".join(f"{d}-D" for d in allowed)
            raise ValueError(f"{name} must be {want}; got shape {arr.shape}.")
    if dtype is None:
        dtype = arr.dtype if arr.dtype in (np.float32, np.float64) else np.float64
    # C-contiguous (a copy only when it is not): a result must not depend on the memory layout of the same numbers,
    # and numpy's reductions along rows add in another order for a Fortran-ordered or strided array
    arr = np.asarray(arr, dtype=dtype, order="C")
    if finite:
        check_finite(arr, name)
    return arr


def as_labels(labels, name: str = "labels", n: int | None = None, n_classes: int | None = None) -> np.ndarray:
    """Return integer class labels of shape (n,) with values in [0, n_classes)."""
    arr = to_numpy(labels, name)
    if arr.ndim == 2 and n is not None and arr.shape[0] == n and arr.shape[1] == n_classes:
        raise ValueError(
            f"{name} has shape {arr.shape}, which looks one-hot; pass integer class indices of shape ({n},), "
            f"e.g. {name}.argmax(axis=1)."
        )
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D integer class indices; got shape {arr.shape}.")
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and arr.size and np.all(np.isfinite(arr)) \
                and np.all(arr == np.round(arr)):
            hint = f"convert them with {name}.astype(int)"
        else:
            hint = "pass integer class indices 0, 1, ..., K-1"
        raise ValueError(f"{name} has dtype {arr.dtype}, not integers; {hint}.")
    if n is not None and arr.shape[0] != n:
        raise ValueError(
            f"{name} has {arr.shape[0]} entries but there are {n} predictions; pass one label per row."
        )
    if arr.size == 0:
        raise ValueError(f"{name} is empty; pass at least one sample.")
    arr = np.ascontiguousarray(arr, dtype=np.int64)   # as as_float_array: C order (a copy only when it is not)
    if n_classes is not None:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= n_classes:
            raise ValueError(
                f"{name} must lie in [0, {n_classes}) for {n_classes} classes; found values from {lo} to {hi}. "
                f"Re-index the labels to 0..K-1, or pass one probability column per class."
            )
    return arr


def as_scores(x, name: str, *, kind: str, dtype=np.float64) -> np.ndarray:
    """Return a checked (N, K) float64 array of scores; ``kind`` is "probs" or "logits".

    ``dtype=None`` keeps float32 input in float32 (see :func:`as_float_array`); the checks are the same.
    """
    arr = as_float_array(x, name, finite=False, dtype=dtype)
    if arr.ndim == 1:
        fix = ("stack the two columns, e.g. np.column_stack([1 - p, p])" if kind == "probs"
               else "stack the two columns, e.g. np.column_stack([np.zeros_like(z), z])")
        raise ValueError(f"{name} must be 2-D of shape (N, K); got 1-D shape {arr.shape}. For a binary problem {fix}.")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D of shape (N, K); got shape {arr.shape}.")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}); pass at least one sample.")
    if arr.shape[1] < 2:
        raise ValueError(f"{name} has {arr.shape[1]} column(s); pass one column per class, at least 2.")
    check_finite(arr, name)
    if kind == "probs":
        lo, hi = arr.min(), arr.max()
        if lo < 0 or hi > 1:
            raise ValueError(
                f"{name} has values outside [0, 1] (min {lo:.4g}, max {hi:.4g}); pass probabilities, "
                f"e.g. the softmax of the logits (scipy.special.softmax(logits, axis=1))."
            )
        sums = arr.sum(axis=1, dtype=np.float64)
        worst = int(np.argmax(np.abs(sums - 1)))
        if abs(sums[worst] - 1) > ROW_SUM_ATOL:
            if _is_half(x):
                raise _half_precision_error(name, x, f"its rows sum to 1 only within about 1e-3 (row {worst} sums "
                                                     f"to {sums[worst]:.6g}; calib allows {ROW_SUM_ATOL:g})")
            raise ValueError(
                f"rows of {name} must sum to 1; row {worst} sums to {sums[worst]:.6g}. Pass probabilities, "
                f"e.g. the softmax of the logits (scipy.special.softmax(logits, axis=1))."
            )
    return arr


def as_probs_labels(probs, labels, probs_name: str = "probs", labels_name: str = "labels"):
    """Return ``(probs, labels)`` as checked float64 (N, K) and int64 (N,) arrays."""
    p = as_scores(probs, probs_name, kind="probs")
    y = as_labels(labels, labels_name, n=p.shape[0], n_classes=p.shape[1])
    return p, y


def as_logits_labels(logits, labels, logits_name: str = "logits", labels_name: str = "labels", dtype=np.float64):
    """Return ``(logits, labels)`` as checked float64 (N, K) and int64 (N,) arrays (``dtype=None``: float32 logits
    stay float32, see :func:`as_float_array`)."""
    z = as_scores(logits, logits_name, kind="logits", dtype=dtype)
    y = as_labels(labels, labels_name, n=z.shape[0], n_classes=z.shape[1])
    return z, y


def check_int(value, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an int, raising unless it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value}.")
    return int(value)


def check_positive(value, name: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float, raising unless it is finite and > 0 (or >= 0)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(cast(float, value)):
        raise ValueError(f"{name} must be a finite number; got {value!r}.")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}; got {value}.")
    return float(value)


def check_choice(value, name: str, choices) -> str:
    """Return ``value`` if it is one of ``choices``, else raise naming the allowed values."""
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name}={value!r} is not supported; choose one of {allowed}.")
    return value


def check_length(arr: np.ndarray, n: int, name: str, of: str = "rows in probs") -> None:
    """Raise unless the first dimension of ``arr`` has ``n`` entries (one value per sample)."""
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but there are {n} {of}; pass one value per sample.")


#: Fused probability check (:func:`as_probs_labels_top`): rows per block are chosen so that a block of
#: ``probs`` (1 MiB of float64) is still in the L2 cache when it is read a second time for the row sums.
_BLOCK_ELEMENTS = 1 << 17
#: Inputs with at least this many entries are split over threads (numpy releases the GIL in these loops).
_THREAD_MIN_ELEMENTS = 1 << 22


def n_threads(work: int, min_work: int = _THREAD_MIN_ELEMENTS, cap: int = 8) -> int:
    """How many threads a numpy kernel of ``work`` elements should be split over (numpy releases the GIL).

    One below ``min_work`` (threads cost more than they save there); else the cores this process may use, at
    most ``cap``. The one rule for every threaded kernel of calib (the top-label pass here, focal temperature
    scaling's grid in :mod:`calib.posthoc`).
    """
    if work < min_work:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cap, cores))


def _top_label_pass(p: np.ndarray):
    """One read of a C-contiguous float64 or float32 (N, K) array: per-row argmax, its value and the row sum.

    The argmax is taken over the bit patterns read as unsigned integers of the same width. For non-negative
    floats this order is the order of the values (ties resolved to the first maximum, as ``np.argmax``); a row
    with a negative entry (sign bit set, -0.0 included), NaN or infinity gets a maximum whose bits exceed those
    of 1.0, so one comparison on the N maxima checks finiteness, ``p >= 0`` and ``p <= 1`` together. The row
    maxima and the row sums are returned in the array's dtype: the sums are a matrix-vector product with ones
    (BLAS, on the block while it is in the cache), which :func:`_row_sums_within_tolerance` checks with a bound
    on their rounding error.
    """
    n, k = p.shape
    bits = p.view(np.uint64 if p.dtype == np.float64 else np.uint32)
    flat = p.reshape(-1)
    ones = np.ones(k, dtype=p.dtype)
    pred = np.empty(n, dtype=np.intp)
    top = np.empty(n, dtype=p.dtype)
    sums = np.empty(n, dtype=p.dtype)
    rows = max(1, _BLOCK_ELEMENTS // k)
    row_starts = np.arange(rows) * k

    def span(lo: int, hi: int) -> None:
        with np.errstate(all="ignore"):  # inf - inf in a row sum is reported as a ValueError, not a warning
            for s in range(lo, hi, rows):
                e = min(hi, s + rows)
                a = bits[s:e].argmax(axis=1)
                pred[s:e] = a
                a += row_starts[:e - s]
                a += s * k
                np.take(flat, a, out=top[s:e])
                np.matmul(p[s:e], ones, out=sums[s:e])

    threads = n_threads(p.size, cap=4)
    if threads == 1:
        span(0, n)
    else:
        from concurrent.futures import ThreadPoolExecutor

        cuts = np.linspace(0, n, threads + 1).astype(int)
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(span, cuts[:-1], cuts[1:]))
    return pred, top, sums


def _row_sums_within_tolerance(p: np.ndarray, sums: np.ndarray) -> bool:
    r"""Whether every row of the non-negative ``p`` sums to 1 within :data:`ROW_SUM_ATOL`, as :func:`as_scores`
    decides it (the float64 sum of the row), given ``sums``, the rows summed in ``p``'s own dtype.

    A sum of K non-negative terms in any order, rounded at unit roundoff u, is within
    :math:`\gamma_{K-1} = (K-1)u / (1 - (K-1)u)` times the exact sum of it (Higham 2002, Eq. 4.4); so is
    numpy's float64 sum. Rows whose ``sums`` lie further than twice that bound inside the tolerance pass on it;
    the others (none, for a softmax) are summed again in float64 as :func:`as_scores` does, and decide.
    """
    terms_times_unit = (p.shape[1] - 1) * np.finfo(p.dtype).eps / 2
    gamma = terms_times_unit / (1 - terms_times_unit)
    # |sums - exact| <= gamma * exact, and so is the float64 sum; 1e-12 covers the rounding of this comparison
    slack = 2 * gamma * (1 + ROW_SUM_ATOL) / (1 - gamma) + 1e-12 if gamma < 0.25 else np.inf
    off = np.abs(sums.astype(np.float64) - 1)
    unsure = np.flatnonzero(~(off <= ROW_SUM_ATOL - slack))  # NaN sums are unsure too
    if unsure.size == 0:
        return True
    exact = p[unsure].sum(axis=1, dtype=np.float64)
    return bool(np.all(np.abs(exact - 1) <= ROW_SUM_ATOL))


def as_probs_top(probs, probs_name: str = "probs", dtype=np.float64):
    """Check ``probs`` exactly as :func:`as_scores` does (``kind="probs"``) and return its top label too.

    Returns ``(p, pred, conf)`` as :func:`as_probs_labels_top` does, without labels.
    """
    arr = as_float_array(probs, probs_name, finite=False, dtype=dtype)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] < 2:
        as_scores(arr, probs_name, kind="probs")  # raises the shape message
    p = np.ascontiguousarray(arr)
    pred, conf, sums = _top_label_pass(p)
    one_bits = np.array(1.0, dtype=p.dtype).view(np.uint64 if p.dtype == np.float64 else np.uint32)
    ok = (conf.view(one_bits.dtype).max() <= one_bits  # finite, >= +0.0 and <= 1 everywhere (see above)
          and _row_sums_within_tolerance(p, sums))
    if not ok:
        # Raises the usual message. It returns only when every entry is fine for as_scores but the fast
        # path refused it: a -0.0 entry (sign bit set).
        p = as_scores(probs if _is_half(probs) else p, probs_name, kind="probs", dtype=dtype)
        pred = p.argmax(axis=1)
        conf = p[np.arange(p.shape[0]), pred] + 0.0  # -0.0 -> +0.0
    return p, pred, conf.astype(np.float64, copy=False)


def as_probs_labels_top(probs, labels, probs_name: str = "probs", labels_name: str = "labels", dtype=np.float64):
    """Check ``(probs, labels)`` exactly as :func:`as_probs_labels` does, and return the top label too.

    Returns ``(p, y, pred, conf)``: (N, K) probabilities, int64 (N,) labels, the argmax of each row (first
    maximum on ties, as ``np.argmax``) and its probability as float64 (N,). ``p`` is float64, or with
    ``dtype=None`` the input's float32 or float64 array itself (no copy: metrics that use only ``pred`` and
    ``conf`` need no (N, K) float64 array). The checks and the argmax share one read of ``probs`` (see
    :func:`_top_label_pass`), which is most of the cost of a binned metric at large N. Anything the fast path
    does not accept goes through :func:`as_scores`, which raises the usual message (for half-precision input:
    that precision is the cause, and to cast).
    """
    p, pred, conf = as_probs_top(probs, probs_name, dtype)
    y = as_labels(labels, labels_name, n=p.shape[0], n_classes=p.shape[1])
    return p, y, pred, conf
