"""Metrics accumulated over batches and across processes, in torchmetrics' protocol: ``update(probs, labels)``,
``compute()``, ``reset()``, ``to(device)``, ``state_dict()`` and ``load_state_dict()``.

Each class holds the sufficient statistics of its one-shot function in float64 and ``compute()`` returns that
function's value on all the rows seen, to rounding (the per-bin sums are added batch by batch instead of in one
``bincount``: measured differences are below 1e-15 for N = 1e6, ``tests/test_streaming.py``):

- :class:`StreamingECE` (equal-width bins, "bin" estimator): :func:`~calib.metrics.binned.ece` from the
  per-bin count, sum of confidences and number correct (3 M numbers);
- :class:`StreamingClasswiseECE` (equal-width bins): :func:`~calib.metrics.binned.classwise_ece` from the same
  sums per (class, bin) (3 K M numbers);
- :class:`StreamingNLL`, :class:`StreamingBrier`, :class:`StreamingAccuracy`: :func:`~calib.metrics.scores.nll`,
  :func:`~calib.metrics.scores.brier`, :func:`~calib.metrics.scores.accuracy` from a sum and N;
- :class:`StreamingAURC`: :func:`~calib.metrics.risk_coverage.aurc` (maximum softmax probability, 0/1 loss), from
  the per-sample keys (below).

Every batch must have the number of classes K of the first (a batch of another K raises ValueError and leaves
the state as it was; ``reset()`` starts over).

**Where the state lives.** A metric fed torch tensors keeps its state as tensors on the device of the first batch
(or the device given to :meth:`StreamingMetric.to`), and an update adds the batch into it there: no batch is copied
to the host. The counts (N, per-bin counts and hits) are int64 and the other sums float64, except on a device
without float64 (Apple's MPS), where those are float32, all there is: a metric there is exact to float32 rounding
of its sums (about 7 digits), its bins are the one-shot function's (the float32 edges are rounded down so that
every comparison decides as in float64) and its per-sample keys are exact. The checks of a tensor batch (the
one-shot function's: finite, in [0, 1], rows summing to 1, labels in [0, K), and for the NLL no true class of
probability 0) are reductions on its device whose one boolean is read, one synchronisation an update;
``validate_args=False`` skips them (as torchmetrics' option of that name), and a batch that fails them is checked
again on the host to raise the one-shot function's message. On the CPU, where batch and state are on the host
already, numpy's kernels update the tensors through views of their memory, without a copy (about ten times faster
there than torch's operations one by one); the torch kernels that every other device runs are tested on the CPU
with ``DEVICE_KERNELS_ON_CPU``. A metric fed numpy arrays keeps numpy arrays and never imports torch; a metric
keeps the kind of its first batch (a tensor batch added to a numpy state is read on the host, a numpy batch added
to a tensor state is copied to its device). :meth:`StreamingMetric.to` moves the state (numpy arrays become
tensors); ``state_dict()`` gives it as tensors (``torch.save``, ``weights_only`` loading) with the metric's
settings, which ``load_state_dict`` checks.

**What cannot stream exactly.** Equal-mass ("quantile", adaptive) bins are cut at ranks of *all* the
confidences, the label-binned estimator needs each sample's gap to its bin's accuracy, and the AURC weights each
loss by its rank among all the confidences: no fixed-size summary of the batches seen gives these exactly. The
classes keep one int64 key a row instead, 8 bytes: the float64 bits of the top-label confidence shifted left
by one, with the outcome in the lowest bit (the key of ``calib.metrics._binning.sorted_pairs``, which sorts as
the confidences; on a device without float64 the float32 bits are widened to float64's with integer operations,
exactly). The keys stay on the batches' device until ``compute()``, which sorts one copy of them (on that device,
then one copy to the host; on the host in place for numpy or CPU keys: 8 bytes a row more, released when it
returns; the equal-width label estimator needs no copy) and reads it in blocks of 8192 rows (under 1 MiB of
temporaries), cutting the same bins, with the same tie rule, as the one-shot function: a peak of 16 bytes a row in
all, measured with ``tracemalloc`` in ``tests/test_streaming.py``. The class-wise ECE with equal-mass bins keeps the
float64 probabilities and labels (8 K + 8 bytes a row) and calls :func:`~calib.metrics.binned.classwise_ece` on
them. ``compute()`` says which in :attr:`StreamingMetric.exact_streaming`. No approximation (a sketch of the
quantiles) is used.

**Across processes.** When ``torch.distributed`` is initialised with more than one process, ``compute()`` first
gathers every rank's settings (bins, binning, norm, estimator) and number of classes and raises the same
ValueError on every rank, naming the setting and each rank's value, when they differ; then it reduces the
accumulators over the ranks with ``torch.distributed``: one ``all_reduce`` of the float64 sums, and an
``all_gather`` of the per-sample rows (padded to the longest rank's, after an ``all_gather`` of the counts), on the
GPU for NCCL and on the CPU for gloo; every rank gets the value of all ranks' rows. A rank that saw no batch takes
part with an empty state of the others' shape. It is a collective, so every rank must call it, for the same
metrics in the same order. The local state is left as it was (``compute()`` twice does not count twice);
``sync=False`` gives the local value.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, cast

import numpy as np

from calib._validate import ROW_SUM_ATOL, as_probs_labels_top
from calib.distributed import gather_object, world_size
from calib.metrics import _binning  # BLOCK_ELEMENTS is read at call time, as in calib.metrics.binned
from calib.metrics._binning import (NORMS, Bins, bin_top_label, binned_error, check_binning_args, quantile_sizes,
                                    uniform_bin, uniform_edges)
from calib.metrics.binned import classwise_ece
from calib.metrics.scores import brier, nll

if TYPE_CHECKING:           # torch is imported where a tensor state needs it
    import torch

__all__ = ["StreamingMetric", "StreamingECE", "StreamingClasswiseECE", "StreamingNLL", "StreamingBrier",
           "StreamingAccuracy", "StreamingAURC"]

#: Rows of keys read at a time by ``compute()`` of the per-sample metrics: every temporary of a block is 64 KiB.
KEY_BLOCK_ROWS = 1 << 13
#: Whether a tensor state on the CPU is updated by the device kernels (torch operations) rather than by numpy's
#: through views of the batch and of the state (the default: on the CPU both are the host, and numpy's fused
#: kernels are about 10x faster there than torch's op by op). The tests set it to run the device kernels.
DEVICE_KERNELS_ON_CPU = False
#: Entries of the (B, K) row blocks of a tensor update (class-wise ECE, Brier): 32 MiB of float64 temporaries, so
#: that a GPU runs few, large kernels.
TENSOR_BLOCK_ELEMENTS = 1 << 22


def _is_tensor(x) -> bool:
    """Whether ``x`` is a torch tensor, decided without importing torch (as :func:`calib._validate.to_numpy`)."""
    return type(x).__module__.startswith("torch")


def _float_dtype(device):
    """The dtype of a tensor state's sums on ``device``: float64, or float32 where the device has no float64 (MPS)."""
    import torch

    return torch.float32 if device.type == "mps" else torch.float64


def _host(x) -> np.ndarray:
    """``x`` (an array, a number or a tensor on any device) as a numpy array; a CPU tensor without a copy."""
    if _is_tensor(x):
        x = x.detach()
        return (x if x.device.type == "cpu" else x.cpu()).numpy()
    return np.asarray(x)


def _collective_device():
    """Where the collectives run: the current GPU for NCCL, the CPU for gloo (and the other CPU backends)."""
    import torch
    import torch.distributed as dist

    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def _as_collective_tensor(x, dtype, device):
    """``x`` (array or tensor) as a contiguous tensor of ``dtype`` on ``device`` (moved first, then converted: a
    device without float64 cannot hold the float64 copy)."""
    import torch

    t = torch.as_tensor(x).detach().to(device)
    return t.to(dtype).contiguous()


def _all_reduce_sums(arrays: dict) -> dict:
    """The float64 sums (arrays or tensors) summed over all ranks in one ``all_reduce``, as numpy float64 arrays on
    the host (a copy; the inputs are untouched)."""
    import torch
    import torch.distributed as dist

    names = sorted(arrays)
    device = _collective_device()
    flat: torch.Tensor | np.ndarray                    # the tensor reduced, then its numpy copy
    flat = torch.cat([_as_collective_tensor(arrays[name], torch.float64, device).reshape(-1) for name in names])
    dist.all_reduce(flat)
    flat = flat.cpu().numpy()
    out, start = {}, 0
    for name in names:
        shape = tuple(np.shape(arrays[name])) if not _is_tensor(arrays[name]) else tuple(arrays[name].shape)
        size = int(np.prod(shape))
        out[name] = flat[start:start + size].reshape(shape)
        start += size
    return out


def _all_gather_rows(arrays: dict, template: dict | None = None) -> dict:
    """Each list of per-sample arrays or tensors: every rank's rows, one tensor a rank in rank order, gathered with
    ``all_gather`` (each rank's rows padded to the longest rank's; their counts gathered first). ``template``: name
    -> (trailing shape, numpy dtype) of a row, for a rank whose lists are empty (taken from the parts when None)."""
    import torch
    import torch.distributed as dist

    device, world = _collective_device(), dist.get_world_size()
    out = {}
    for name in sorted(arrays):
        parts = arrays[name]
        if template is not None:
            trailing, dtype = template[name]
        else:
            trailing, dtype = tuple(np.shape(parts[0])[1:]), np.dtype(_host(parts[0][:0]).dtype)
        dtype = torch.from_numpy(np.zeros(0, dtype=dtype)).dtype
        local = (torch.cat([_as_collective_tensor(part, dtype, device) for part in parts]) if parts
                 else torch.zeros((0, *trailing), dtype=dtype, device=device))
        counts: list[torch.Tensor] | list[int]         # the gathered tensors, then the numbers they hold
        counts = [torch.zeros(1, dtype=torch.long, device=device) for _ in range(world)]
        dist.all_gather(counts, torch.tensor([local.shape[0]], dtype=torch.long, device=device))
        counts = [int(c) for c in torch.cat(counts).tolist()]
        padded = torch.zeros((max(counts), *trailing), dtype=dtype, device=device)
        padded[:local.shape[0]] = local
        gathered = [torch.empty_like(padded) for _ in range(world)]
        dist.all_gather(gathered, padded)
        out[name] = [rows[:count] for rows, count in zip(gathered, counts)]
    return out


def _per_rank(values) -> str:
    return ", ".join(f"{'no batch' if v is None else repr(v)} on rank {r}" for r, v in enumerate(values))


# ------------------------------------------------------------------------------------------- tensor batches

def _tensor_batch(probs, labels, device, validate: bool, extra=None, one_shot=None):
    """``(p, y, pred, conf)`` of a batch for a tensor state on ``device``: probabilities (float16 and bfloat16 as
    float32), int64 labels, the argmax of each row (the first maximum, as ``np.argmax``) and its probability in the
    state's float dtype, all on ``device``, with no copy to the host.

    A batch that is not two tensors (or that has the wrong shapes or dtypes) is checked on the host by
    ``one_shot`` (:func:`~calib._validate.as_probs_labels_top` by default), which raises its message; numpy input
    comes back as tensors on ``device``. With ``validate`` the values are checked on the device (``extra(p, y)``:
    a further boolean, e.g. a true class of probability 0) and one boolean is read; a batch that fails is checked on
    the host, which raises the one-shot function's message.
    """
    import torch

    host_check = one_shot or as_probs_labels_top
    if _is_tensor(probs) and not _is_tensor(labels):
        try:
            labels = torch.as_tensor(np.asarray(labels))
        except (TypeError, ValueError, RuntimeError):
            pass
    if not (_is_tensor(probs) and _is_tensor(labels)):
        if one_shot is not None:
            one_shot(probs, labels)
        p, y, _, _ = as_probs_labels_top(probs, labels, dtype=None)
        p, y = torch.from_numpy(np.ascontiguousarray(p)).to(device), torch.from_numpy(y).to(device)
        validate = False                                          # checked on the host just now
    else:
        p, y = probs.detach(), labels.detach()
        fine = (p.ndim == 2 and y.ndim == 1 and p.shape[0] >= 1 and p.shape[1] >= 2 and y.shape[0] == p.shape[0]
                and p.is_floating_point() and not y.is_floating_point() and not y.is_complex()
                and y.dtype != torch.bool)
        if not fine:
            host_check(p.cpu(), y.cpu())                          # raises the one-shot function's message
            raise ValueError(f"probs {tuple(p.shape)} and labels {tuple(y.shape)} cannot be scored; pass (B, K) "
                             f"probabilities and (B,) integer labels.")
        p, y = p.to(device), y.to(device=device, dtype=torch.long)
        if p.dtype in (torch.float16, torch.bfloat16):
            p = p.float()
    conf, pred = p.max(dim=1)
    if validate:
        dtype, k = _float_dtype(p.device), p.shape[1]
        low, high = torch.aminmax(p)
        off = (p.sum(dim=1, dtype=dtype) - 1).abs().max()
        label_low, label_high = torch.aminmax(y)
        bad = ~(low >= 0) | ~(high <= 1) | ~(off <= ROW_SUM_ATOL) | (label_low < 0) | (label_high >= k)
        if extra is not None:
            bad = bad | extra(p, y.clamp(0, k - 1))
        if bool(bad):                                             # the one read of an update
            host_check(probs.detach().cpu(), labels.detach().cpu())  # raises the one-shot function's message
    return p, y, pred, conf.to(_float_dtype(p.device))


def _uniform_bin_tensor(x, n_bins: int, edges):
    """:func:`calib.metrics._binning.uniform_bin` on a tensor (``edges``: the float edges ``i / M``, a tensor on
    ``x``'s device): the same index for every x, with the same corrections on the edges."""
    import torch

    idx = (x * n_bins).to(torch.long).clamp_(max=n_bins - 1)   # truncation = floor, as x >= 0
    lower = edges[:-1].clone()
    lower[0] = -1.0                                              # x = 0 stays in the first bin
    idx -= (x <= lower[idx]).to(torch.long)
    idx += (x > edges[1:][idx]).to(torch.long)
    return idx


def _tensor_keys(conf, flag):
    """:func:`_keys` on the device: ``bits(conf) << 1 | flag`` in int64, the float64 bits of the confidences; float32
    confidences (a device without float64) have their bits widened to float64's exactly with integer operations, so
    that the keys of every device sort and decode alike."""
    import torch

    conf = conf + 0.0                                             # -0.0 -> +0.0
    if conf.dtype == torch.float64:
        bits = conf.view(torch.int64)
    else:
        bits = _float32_bits_as_float64_bits(conf.to(torch.float32))
    return (bits << 1) | flag.to(torch.int64)


def _float32_bits_as_float64_bits(x):
    """The float64 bit pattern (int64) of each non-negative float32 of ``x``, without float64 arithmetic.

    A normal float32 of exponent e and mantissa m is the float64 of exponent e - 127 + 1023 and mantissa m << 29; a
    subnormal one, m 2^-149 with m < 2^23, is normalised: with t = floor(log2 m) (read from the exponent of m as a
    float32, exact), its exponent is t - 149 + 1023 and its mantissa m << (52 - t) without the leading bit."""
    import torch

    b = x.view(torch.int32).to(torch.int64)
    exponent, mantissa = (b >> 23) & 0xFF, b & 0x7FFFFF
    normal = ((exponent + (1023 - 127)) << 52) | (mantissa << 29)
    top = ((mantissa.to(torch.float32).view(torch.int32).to(torch.int64) >> 23) & 0xFF) - 127
    top = top.clamp(min=0)
    subnormal = ((top + (1023 - 149)) << 52) | ((mantissa << (52 - top)) & ((1 << 52) - 1))
    return torch.where(exponent > 0, normal, torch.where(mantissa > 0, subnormal, 0))


# ------------------------------------------------------------------------------------- the per-sample keys

def _keys(conf: np.ndarray, flag: np.ndarray) -> np.ndarray:
    """One int64 a row, ``bits(conf) << 1 | flag``: ordered as the confidences (>= 0, read as float64; -0.0 as
    +0.0), and among equal ones by ``flag`` (``calib.metrics._binning.sorted_pairs``'s key)."""
    key = (np.asarray(conf, dtype=np.float64) + 0.0).view(np.int64) << 1
    key |= flag
    return key


def _key_blocks(parts):
    """``(x, flag)`` of every row of the key arrays ``parts``, in blocks of :data:`KEY_BLOCK_ROWS` rows, in the
    order given: the confidences (float64) and the outcomes (0.0 or 1.0). Tensor parts are read on the host one at a
    time (a CPU tensor without a copy)."""
    for part in parts:
        part = _host(part)
        for lo in range(0, part.shape[0], KEY_BLOCK_ROWS):
            key = part[lo:lo + KEY_BLOCK_ROWS]
            yield (key >> 1).view(np.float64), (key & 1).astype(np.float64)


def _tie_mean_blocks(keys: np.ndarray, descending: bool = False):
    """``(start, x, outcome)`` of the sorted keys in blocks of :data:`KEY_BLOCK_ROWS` rows (ascending, or the last
    block first and each one reversed): the position of the block's first row in ``keys``, the confidences, and
    each row's outcome replaced by the mean outcome of its run of equal confidences, the values
    :func:`calib.metrics._binning.tie_mean` gives on the whole array (a run that crosses a block's edge counts
    whole: its ends are found by bisection and its outcomes counted from the per-block totals)."""
    step, n = KEY_BLOCK_ROWS, keys.shape[0]
    starts = range(0, n, step)
    before = np.zeros(len(starts) + 1, dtype=np.int64)          # outcomes before each block's first row
    for i, lo in enumerate(starts):
        before[i + 1] = before[i] + np.count_nonzero(keys[lo:lo + step] & 1)

    def outcomes_before(position: int) -> int:
        block = position // step
        return int(before[block]) + int(np.count_nonzero(keys[block * step:position] & 1))

    for lo in (reversed(starts) if descending else starts):
        key = keys[lo:lo + step]
        bits, flag = key >> 1, key & 1
        new = np.empty(bits.shape[0], dtype=bool)
        new[0] = True
        np.not_equal(bits[1:], bits[:-1], out=new[1:])
        runs = np.flatnonzero(new)
        sizes = np.diff(np.append(runs, bits.shape[0]))
        whole_sizes, whole_sums = sizes.copy(), np.add.reduceat(flag, runs)
        for r in {0, runs.shape[0] - 1}:                       # the runs at the edges may go on beyond them
            first = bits[runs[r]] << 1
            s, e = int(np.searchsorted(keys, first, "left")), int(np.searchsorted(keys, first | 1, "right"))
            if s < lo + runs[r] or e > lo + runs[r] + sizes[r]:
                whole_sizes[r], whole_sums[r] = e - s, outcomes_before(e) - outcomes_before(s)
        outcome = np.repeat(whole_sums / whole_sizes, sizes)
        x = bits.view(np.float64)
        yield (lo, x[::-1], outcome[::-1]) if descending else (lo, x, outcome)


def _sorted_keys(parts) -> np.ndarray:
    """One sorted copy of the keys of ``parts`` on the host (the state is left as it was): sorted on their device
    and copied to the host once for keys off the CPU, else joined and sorted in place on the host."""
    if parts and _is_tensor(parts[0]) and parts[0].device.type != "cpu":
        import torch

        return torch.sort(torch.cat(list(parts))).values.cpu().numpy()
    keys = np.concatenate([_host(part) for part in parts])
    keys.sort()
    return keys


class StreamingMetric:
    """Base of the streaming metrics, in torchmetrics' protocol: ``update`` adds a batch, ``compute`` gives the
    value, ``reset`` starts over, ``to(device)`` moves the state, ``state_dict``/``load_state_dict`` save and
    restore it.

    Subclasses keep float64 sums in ``self._sums`` (reduced over ranks by summing; ``_new_sums`` gives those
    of no row) and lists of per-sample arrays in ``self._rows`` (reduced by gathering; ``_row_template`` gives
    their rows' shapes), name in :meth:`settings` what must agree across ranks, add a batch in ``_update_numpy``
    (numpy arrays) and ``_update_tensor`` (tensors on the state's device), and implement ``_value`` (on the host,
    from numpy sums). ``n_classes`` is the K of the first batch (None before it).

    Parameters
    ----------
    validate_args : bool
        Check every tensor batch's values as the one-shot function does (one synchronisation an update on a GPU);
        False skips those checks (not the shapes'), as torchmetrics' option. numpy batches and CPU tensors are
        always checked (the checks share numpy's one read of the batch).
    """

    #: Whether the state is a fixed-size summary (True) or the per-sample arrays, O(N) (False).
    exact_streaming = True
    #: The names of the lists of per-sample arrays (empty for a fixed-size state).
    _row_names: tuple = ()
    #: The sums that count rows (N, per-bin counts and hits): int64 in a tensor state, exact on every device
    #: (a float32 count stops at 2**24).
    _counts: tuple = ("n", "counts", "hits")

    def __init__(self, validate_args: bool = True):
        self.validate_args = bool(validate_args)
        self._device: torch.device | None = None
        self.reset()

    def reset(self) -> None:
        """Forget every row seen (and the number of classes); the device given to :meth:`to` stays."""
        self._sums: dict = {}
        self._rows: dict = {name: [] for name in self._row_names}
        self.n_classes: int | None = None

    def settings(self) -> dict:
        """The constructor's settings that decide the value (bins, binning, norm, estimator): every rank must
        have the same ones."""
        return {}

    def _new_sums(self, n_classes: int) -> dict:
        """The float64 sums of no row for ``n_classes`` classes, as numpy arrays (what a rank that saw no batch
        reduces)."""
        return {}

    def _row_template(self, n_classes: int) -> dict:
        """name -> (trailing shape, numpy dtype) of one row of each list of per-sample arrays."""
        return {}

    @property
    def device(self):
        """The torch device of the state (that of the first tensor batch, or the one given to :meth:`to`); None for
        a state of numpy arrays, or before any batch."""
        if self._device is not None:
            return self._device
        first = next(iter(self._sums.values()), None)
        if first is None:                                         # the first batch of a per-sample state
            first = next((parts[0] for parts in self._rows.values() if parts), None)
        return first.device if _is_tensor(first) else None

    def _tensor_state(self, probs) -> bool:
        """Whether this batch goes into a tensor state: one is held (or a device was given to :meth:`to`), or the
        state is empty and the batch is a tensor."""
        if self.device is not None:
            return True
        return self.n_classes is None and _is_tensor(probs)

    def update(self, probs, labels) -> None:
        """Add a batch: ``probs`` (B, K) rows summing to 1 and integer ``labels`` (B,), numpy or torch, checked
        as the one-shot function checks them (the same ValueError), with the K of the earlier batches.

        Tensors are added on the state's device (a batch on another device is moved there); numpy arrays into a
        numpy state (or, after :meth:`to`, copied to its device)."""
        if self._tensor_state(probs):
            import torch

            device = self.device if self.device is not None else probs.device
            if device.type == "cpu" and not DEVICE_KERNELS_ON_CPU:
                batch = self._check_numpy_batch(probs, labels)     # a CPU tensor is read in place
                k = int(np.shape(batch[0])[1])
                self._check_classes(k)
                if not self._sums:
                    self._sums = self._as_tensors(self._new_sums(k), device)
                self._update_numpy_views(batch, torch)
            else:
                batch = self._check_tensor_batch(probs, labels, device)
                k = int(batch[0].shape[1])
                self._check_classes(k)
                if not self._sums:
                    self._sums = self._as_tensors(self._new_sums(k), device)
                self._update_tensor(*batch)
        else:
            batch = self._check_numpy_batch(probs, labels)
            k = int(np.shape(batch[0])[1])
            self._check_classes(k)
            if not self._sums:
                self._sums = self._new_sums(k)
            self._update_numpy(*batch)
        self.n_classes = k

    def _update_numpy_views(self, batch, torch) -> None:
        """Add a checked numpy batch into a CPU tensor state through numpy views of it (the state's memory): numpy's
        kernels, which are several times faster than torch's op by op on the CPU, without a copy."""
        tensors, counts = self._sums, {name: len(parts) for name, parts in self._rows.items()}
        self._sums = {name: value.numpy() for name, value in tensors.items()}
        try:
            self._update_numpy(*batch)
        finally:
            self._sums = tensors
            for name, parts in self._rows.items():
                parts[counts[name]:] = [torch.from_numpy(part) for part in parts[counts[name]:]]

    def _check_numpy_batch(self, probs, labels) -> tuple:
        """``(p, y, pred, conf)`` of a batch for a numpy state (:func:`~calib._validate.as_probs_labels_top`)."""
        return as_probs_labels_top(probs, labels, dtype=None)

    def _check_tensor_batch(self, probs, labels, device) -> tuple:
        """``(p, y, pred, conf)`` of a batch for a tensor state on ``device`` (:func:`_tensor_batch`)."""
        return _tensor_batch(probs, labels, device, self.validate_args)

    def _update_numpy(self, p, y, pred, conf) -> None:
        raise NotImplementedError

    def _update_tensor(self, p, y, pred, conf) -> None:
        raise NotImplementedError

    def _as_tensors(self, sums: dict, device, copy: bool = False) -> dict:
        """Sums (arrays or tensors) as a tensor state on ``device``: the counts int64 (rounded from floats), the
        others in the state's float dtype; with ``copy``, never sharing the memory of ``sums``."""
        import torch

        out = {}
        for name, value in sums.items():
            t = torch.as_tensor(value).detach()
            if name in self._counts:
                t = (t.round() if t.is_floating_point() else t).to(torch.int64).to(device)
            else:
                t = t.to(device).to(_float_dtype(device))
            out[name] = t.clone() if copy else t
        return out

    def _check_classes(self, n_classes: int) -> None:
        """Refuse a batch whose number of classes is not the earlier batches' (before the state changes)."""
        if self.n_classes is not None and n_classes != self.n_classes:
            raise ValueError(f"probs has {n_classes} columns but the earlier batches had {self.n_classes}; every "
                             f"batch must have the same classes (call reset() to start over).")

    # ----------------------------------------------------------------------------------- device and state

    def to(self, device) -> StreamingMetric:
        """Move the state to ``device`` (a torch device or its name) and keep it there: later batches are added
        there. A numpy state becomes tensors (float64; float32 on a device without float64). Returns the metric."""
        import torch

        device = torch.device(device)
        self._sums = self._as_tensors(self._sums, device)
        self._rows = {name: [self._row_tensor(name, part, device) for part in parts]
                      for name, parts in self._rows.items()}
        self._device = device
        return self

    def _row_tensor(self, name: str, part, device, copy: bool = False):
        """One array or tensor of per-sample rows on ``device``: integer rows as they are, floats in the state's
        float dtype; with ``copy``, never sharing the memory of ``part``."""
        import torch

        t = torch.as_tensor(part).detach().to(device)
        t = t if not t.is_floating_point() else t.to(_float_dtype(device))
        return t.clone() if copy else t

    def state_dict(self) -> dict:
        """The state as tensors (on its device; a numpy state as CPU tensors sharing its memory) with what decides
        its meaning: ``{"metric": name, "settings": ..., "n_classes": K, "sums": {...}, "rows": {name: tensor}}``,
        the rows of each list joined. ``torch.save`` writes it and ``torch.load(weights_only=True)`` reads it."""
        import torch

        rows = {}
        for name, parts in self._rows.items():
            if parts:
                tensors = [torch.as_tensor(part) for part in parts]
                rows[name] = torch.cat(tensors) if len(tensors) > 1 else tensors[0]
        return {"metric": type(self).__name__, "settings": self.settings(), "n_classes": self.n_classes,
                "sums": {name: torch.as_tensor(value) for name, value in self._sums.items()}, "rows": rows}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s state, on this metric's device (that of the saved tensors when :meth:`to`
        was not called). Raises ValueError, changing nothing, for another metric's or other settings' state."""
        import torch

        name = type(self).__name__
        if not isinstance(state, dict) or set(state) != {"metric", "settings", "n_classes", "sums", "rows"}:
            raise ValueError(f"{name}.load_state_dict: pass what state_dict() gave (a dict with keys 'metric', "
                             f"'settings', 'n_classes', 'sums', 'rows').")
        if state["metric"] != name or state["settings"] != self.settings():
            raise ValueError(f"{name}.load_state_dict: the state is that of {state['metric']} with settings "
                             f"{state['settings']}; this metric is {name} with {self.settings()}.")
        k = state["n_classes"]
        sums, rows = state["sums"], state["rows"]
        expected = set(self._new_sums(k)) if k is not None else set()
        if (k is not None and (isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 2)) \
                or set(sums) != expected or not set(rows) <= set(self._row_names):
            raise ValueError(f"{name}.load_state_dict: the state's n_classes ({k!r}), sums ({sorted(sums)}) or rows "
                             f"({sorted(rows)}) are not those of a {name} with these settings.")
        for key, zero in (self._new_sums(cast(int, k)).items() if k is not None else ()):
            if tuple(torch.as_tensor(sums[key]).shape) != np.shape(zero):
                raise ValueError(f"{name}.load_state_dict: sums[{key!r}] has shape "
                                 f"{tuple(torch.as_tensor(sums[key]).shape)}, not {np.shape(zero)}.")
        device = self._device
        if device is None:
            values = [*sums.values(), *rows.values()]
            device = torch.as_tensor(values[0]).device if values else torch.device("cpu")
        self.reset()
        self._sums = self._as_tensors(sums, device, copy=True)             # not the memory of the given state
        self._rows = {row: [self._row_tensor(row, rows[row], device, copy=True)] if row in rows else []
                      for row in self._row_names}
        self._device, self.n_classes = device, (None if k is None else int(k))

    # --------------------------------------------------------------------------------------------- across ranks

    def _agree_across_ranks(self) -> int | None:
        """Gather every rank's metric, settings and number of classes; raise the same ValueError on every rank when
        they differ (naming the setting and each rank's value); return the ranks' K (None when no rank saw a
        batch). A collective."""
        name = type(self).__name__
        everyone = gather_object((name, self.settings(), self.n_classes))
        kinds = [kind for kind, _, _ in everyone]
        if len(set(kinds)) > 1:
            raise ValueError(f"compute() was called on different metrics across the ranks ({_per_rank(kinds)}); "
                             f"every rank must compute the same metrics in the same order.")
        differ = [f"{setting}: {_per_rank([s.get(setting) for _, s, _ in everyone])}" for setting in self.settings()
                  if any(s.get(setting) != everyone[0][1].get(setting) for _, s, _ in everyone)]
        if differ:
            raise ValueError(f"{name}.compute(): the ranks' settings differ ({'; '.join(differ)}); construct the "
                             f"metric with the same settings on every rank.")
        classes = [k for _, _, k in everyone]
        seen = {k for k in classes if k is not None}
        if len(seen) > 1:
            raise ValueError(f"{name}.compute(): the ranks' batches have different numbers of classes "
                             f"({_per_rank(classes)}); every rank must score the same K classes.")
        return seen.pop() if seen else None

    def compute(self, sync: bool = True) -> float:
        """The one-shot function's value on every row seen (by every rank when ``torch.distributed`` is
        initialised and ``sync``; then a collective, which first checks that the ranks' settings agree). Raises
        ValueError before any row was seen."""
        sums, rows, n_classes = self._sums, self._rows, self.n_classes
        if sync and world_size() > 1:
            n_classes = self._agree_across_ranks()
            if self.n_classes is None and n_classes is not None:
                sums = self._new_sums(n_classes)
            sums = _all_reduce_sums(sums) if sums else sums
            if rows and n_classes is not None:
                rows = _all_gather_rows(rows, self._row_template(n_classes))
        sums = {name: _host(value).astype(np.float64, copy=False) for name, value in sums.items()}
        if "n" in sums:
            n = float(sums["n"])
        else:
            n = sum(len(part) for part in rows[self._row_names[0]]) if self._row_names else 0
        if n == 0:
            raise ValueError(f"{type(self).__name__}.compute() before any row: call update(probs, labels) with a "
                             f"batch first.")
        return float(self._value(sums, rows, cast(int, n_classes)))    # set by the rows counted above

    def _value(self, sums: dict, rows: dict, n_classes: int) -> float:
        """The value from the (reduced) numpy sums and the lists of per-sample arrays or tensors (each list's
        batches in order)."""
        raise NotImplementedError


class StreamingECE(StreamingMetric):
    """:func:`calib.metrics.ece <calib.metrics.binned.ece>` accumulated over batches: the same bins, norms and
    estimators.

    Equal-width bins with the usual ("bin") estimator keep, per bin, the count, the sum of confidences and the
    number of correct predictions (float64), from which every norm ("l1", "l2", "max") is exact. Equal-mass
    bins (``binning="quantile"``, the adaptive ECE) and ``estimator="label"`` keep one int64 key a row (the
    confidence and the outcome, 8 bytes) and compute :func:`~calib.metrics.binned.top_label_ece`'s value from
    them, block by block (O(N) memory, 16 bytes a row at the peak of ``compute()``; module docstring). Tensor
    batches are binned on their device (module docstring).

    Examples
    --------
    >>> metric = StreamingECE(n_bins=15)
    >>> for probs, labels in batches:          # doctest: +SKIP
    ...     metric.update(probs, labels)
    >>> metric.compute()                       # doctest: +SKIP
    """

    def __init__(self, n_bins: int = 15, binning: str = "uniform", norm: str = "l1", estimator: str = "bin", *,
                 validate_args: bool = True):
        self.n_bins = check_binning_args(n_bins, binning, norm, estimator)
        self.binning, self.norm, self.estimator = binning, norm, estimator
        self.exact_streaming = binning == "uniform" and estimator == "bin"
        self._row_names = () if self.exact_streaming else ("keys",)
        super().__init__(validate_args)

    def settings(self) -> dict:
        """``n_bins``, ``binning``, ``norm`` and ``estimator``."""
        return {"n_bins": self.n_bins, "binning": self.binning, "norm": self.norm, "estimator": self.estimator}

    def _new_sums(self, n_classes: int) -> dict:
        if not self.exact_streaming:
            return {}
        return {"n": np.zeros(()), "counts": np.zeros(self.n_bins), "conf_sum": np.zeros(self.n_bins),
                "hits": np.zeros(self.n_bins)}

    def _row_template(self, n_classes: int) -> dict:
        return {"keys": ((), np.int64)} if not self.exact_streaming else {}

    def _update_numpy(self, p, y, pred, conf) -> None:
        if not self.exact_streaming:
            self._rows["keys"].append(_keys(conf, pred == y))
            return
        b = bin_top_label(conf, pred == y, self.n_bins, "uniform")
        self._sums["n"] += conf.shape[0]
        self._sums["counts"] += b.counts
        self._sums["conf_sum"] += b.conf_sum
        self._sums["hits"] += b.hits

    def _update_tensor(self, p, y, pred, conf) -> None:
        if not self.exact_streaming:
            self._rows["keys"].append(_tensor_keys(conf, pred == y))
            return
        sums = self._sums
        idx = _uniform_bin_tensor(conf, self.n_bins, _edges_like(conf, self.n_bins))
        sums["n"] += conf.shape[0]
        sums["counts"] += _count(idx, self.n_bins, conf)
        sums["conf_sum"].index_add_(0, idx, conf)
        sums["hits"] += _count(idx, self.n_bins, conf, (pred == y).to(conf.dtype))

    def _value(self, sums, rows, n_classes) -> float:
        if self.exact_streaming:
            n = int(round(float(sums["n"])))
            counts = np.rint(sums["counts"]).astype(np.int64)
            return self._error(n, counts, sums["conf_sum"], sums["hits"], None)
        # top_label_ece's bins from the keys, block by block: equal-width bins of the rows as they are, equal-mass
        # bins of the sorted keys (array_split sizes; a tied sample counts with its group's mean outcome)
        parts = rows["keys"]
        if self.binning == "uniform":
            edges = uniform_edges(self.n_bins)

            def blocks():
                for x, outcome in _key_blocks(parts):
                    yield uniform_bin(x, self.n_bins, edges), x, outcome
        else:
            keys = _sorted_keys(parts)
            ends = np.cumsum(quantile_sizes(keys.shape[0], self.n_bins))

            def blocks():
                for lo, x, outcome in _tie_mean_blocks(keys):
                    yield np.searchsorted(ends, np.arange(lo, lo + x.shape[0]), "right"), x, outcome
        counts, conf_sum, hits = np.zeros(self.n_bins, dtype=np.int64), np.zeros(self.n_bins), np.zeros(self.n_bins)
        for idx, x, outcome in blocks():
            counts += np.bincount(idx, minlength=self.n_bins)
            conf_sum += np.bincount(idx, weights=x, minlength=self.n_bins)
            hits += np.bincount(idx, weights=outcome, minlength=self.n_bins)
        return self._error(int(counts.sum()), counts, conf_sum, hits, blocks)

    def _error(self, n: int, counts, conf_sum, hits, blocks) -> float:
        """:func:`~calib.metrics._binning.binned_error` from the per-bin sums; the label estimator reads each row's
        gap to its bin's accuracy from ``blocks()`` (``(bin, x, outcome)`` of every row)."""
        if self.estimator == "bin":
            member = np.broadcast_to(0.0, (n,))  # binned_error reads N from its length; "bin" reads nothing else
            return binned_error(Bins(counts, conf_sum, hits, member, member, uniform_edges(self.n_bins)), self.norm,
                                "bin")
        full = counts > 0
        accuracy = np.zeros(self.n_bins)
        accuracy[full] = hits[full] / counts[full]
        total = 0.0
        for idx, x, _ in blocks():
            gap = np.abs(accuracy[idx] - x)                        # |A_{b_i} - c_i|
            total = max(total, float(gap.max())) if self.norm == "max" else total + float(
                (gap if self.norm == "l1" else gap * gap).sum())
        return total if self.norm == "max" else total / n if self.norm == "l1" else float(np.sqrt(total / n))


class StreamingClasswiseECE(StreamingMetric):
    """:func:`calib.metrics.classwise_ece <calib.metrics.binned.classwise_ece>` accumulated over batches: the same
    bins and norms (names or rho).

    Equal-width bins keep the (class, bin) counts, probability sums and hits (3 K M float64). Equal-mass bins
    keep the float64 probabilities and labels of every row (O(N K) memory, on the batches' device until
    ``compute()``, which copies them to the host once) and call :func:`~calib.metrics.binned.classwise_ece` on
    them. The number of classes is fixed by the first batch.
    """

    def __init__(self, n_bins: int = 15, binning: str = "uniform", norm="l1", *, validate_args: bool = True):
        if isinstance(norm, str):
            rho = None
        elif isinstance(norm, bool) or not isinstance(norm, numbers.Real) or not np.isfinite(cast(float, norm)) \
                or norm < 1:
            raise ValueError(f"norm must be one of {', '.join(map(repr, NORMS))} or a number rho >= 1; got {norm!r}.")
        else:
            rho = float(norm)
        self.n_bins = check_binning_args(n_bins, binning, norm if rho is None else None)
        self.binning, self.norm, self.rho = binning, norm, rho
        self.exact_streaming = binning == "uniform"
        self._row_names = () if self.exact_streaming else ("probs", "labels")
        super().__init__(validate_args)

    def settings(self) -> dict:
        """``n_bins``, ``binning`` and ``norm``."""
        return {"n_bins": self.n_bins, "binning": self.binning, "norm": self.norm}

    def _new_sums(self, n_classes: int) -> dict:
        if not self.exact_streaming:
            return {}
        size = n_classes * self.n_bins
        return {"n": np.zeros(()), "counts": np.zeros(size), "conf_sum": np.zeros(size), "hits": np.zeros(size)}

    def _row_template(self, n_classes: int) -> dict:
        return {} if self.exact_streaming else {"probs": ((n_classes,), np.float64), "labels": ((), np.int64)}

    def _update_numpy(self, p, y, pred, conf) -> None:
        if not self.exact_streaming:
            self._rows["probs"].append(np.array(p, dtype=np.float64))
            self._rows["labels"].append(np.array(y, dtype=np.int64))   # a copy: y may be the caller's array
            return
        # classwise_ece's row blocks and flat (class * M + bin) index, added into the running sums
        n, k = p.shape
        edges, offset, size = uniform_edges(self.n_bins), np.arange(k) * self.n_bins, k * self.n_bins
        rows = max(1, _binning.BLOCK_ELEMENTS // k)
        for s in range(0, n, rows):
            block = p[s:s + rows].astype(np.float64, copy=False)
            flat = uniform_bin(block, self.n_bins, edges)
            flat += offset
            self._sums["counts"] += np.bincount(flat.ravel(), minlength=size)
            self._sums["conf_sum"] += np.bincount(flat.ravel(), weights=block.ravel(), minlength=size)
            self._sums["hits"] += np.bincount(flat[np.arange(block.shape[0]), y[s:s + rows]], minlength=size)
        self._sums["n"] += n

    def _update_tensor(self, p, y, pred, conf) -> None:
        import torch

        if not self.exact_streaming:
            dtype = _float_dtype(p.device)
            self._rows["probs"].append(p.to(dtype, copy=True))
            self._rows["labels"].append(y.clone())
            return
        sums, (n, k), dtype = self._sums, p.shape, _float_dtype(p.device)
        edges = _edges_like(sums["conf_sum"], self.n_bins)
        offset, size = torch.arange(k, device=p.device) * self.n_bins, k * self.n_bins
        rows = max(1, TENSOR_BLOCK_ELEMENTS // k)
        for s in range(0, n, rows):
            block = p[s:s + rows].to(dtype)
            flat = _uniform_bin_tensor(block, self.n_bins, edges) + offset
            sums["counts"] += _count(flat.reshape(-1), size, block)
            sums["conf_sum"].index_add_(0, flat.reshape(-1), block.reshape(-1))
            sums["hits"] += _count(flat.gather(1, y[s:s + rows].unsqueeze(1)).squeeze(1), size, block)
        sums["n"] += n

    def _value(self, sums, rows, n_classes) -> float:
        if not self.exact_streaming:
            return classwise_ece(np.concatenate([_host(part) for part in rows["probs"]]),
                                 np.concatenate([_host(part) for part in rows["labels"]]), self.n_bins,
                                 self.binning, self.norm)
        # the formula of classwise_ece, from the summed (class, bin) statistics
        n, k = float(sums["n"]), n_classes
        counts = np.rint(sums["counts"])
        full = counts > 0
        diff = sums["hits"][full] - sums["conf_sum"][full]
        if self.rho is not None:
            rho = self.rho
            return ((np.abs(diff) ** rho / counts[full] ** (rho - 1)).sum() / (n * k)) ** (1 / rho)
        if self.norm == "l1":
            return np.abs(diff).sum() / (n * k)
        if self.norm == "l2":
            return np.sqrt((diff * diff / counts[full]).sum() / (n * k))
        return np.max(np.abs(diff) / counts[full])


class _MeanOfRows(StreamingMetric):
    """A mean over rows: the sum of the one-shot function's per-row terms and N."""

    def _new_sums(self, n_classes: int) -> dict:
        return {"n": np.zeros(()), "total": np.zeros(())}

    def _check_numpy_batch(self, probs, labels) -> tuple:
        n, total = self._batch(probs, labels)          # the one-shot function's checks: probs is (B, K) now
        return np.broadcast_to(0.0, np.shape(probs)), n, total   # the batch's shape, for its K

    def _batch(self, probs, labels) -> tuple[int, float]:
        """(N, the sum of the batch's terms) of numpy input, by the one-shot function."""
        raise NotImplementedError

    # its own batch, the (p, n, total) of _check_numpy_batch below, in place of the base class's (p, y, pred, conf)
    def _update_numpy(self, p, n, total) -> None:  # type: ignore[override]
        self._sums["n"] += n
        self._sums["total"] += total

    def _update_tensor(self, p, y, pred, conf) -> None:
        self._sums["n"] += p.shape[0]
        self._sums["total"] += self._tensor_total(p, y, pred)

    def _tensor_total(self, p, y, pred):
        """The sum of the batch's terms, a 0-d tensor of the state's float dtype on the batch's device."""
        raise NotImplementedError

    def _value(self, sums, rows, n_classes) -> float:
        return float(sums["total"]) / float(sums["n"])


class StreamingNLL(_MeanOfRows):
    """:func:`calib.metrics.nll <calib.metrics.scores.nll>` over batches (a true class of probability 0 raises its
    ValueError)."""

    def _batch(self, probs, labels):
        value = nll(probs, labels)        # first: it checks labels (one per row of probs; None is refused)
        return len(labels), value * len(labels)

    def _check_tensor_batch(self, probs, labels, device) -> tuple:
        return _tensor_batch(probs, labels, device, self.validate_args, one_shot=nll,
                             extra=lambda p, y: (p.gather(1, y.unsqueeze(1)) == 0).any())

    def _tensor_total(self, p, y, pred):
        return -p.gather(1, y.unsqueeze(1)).to(_float_dtype(p.device)).log().sum()


class StreamingBrier(_MeanOfRows):
    """:func:`calib.metrics.brier <calib.metrics.scores.brier>` (multiclass Brier score) over batches."""

    def _batch(self, probs, labels):
        value = brier(probs, labels)        # first: it checks labels (one per row of probs; None is refused)
        return len(labels), value * len(labels)

    def _tensor_total(self, p, y, pred):
        import torch

        dtype = _float_dtype(p.device)
        rows, total = max(1, TENSOR_BLOCK_ELEMENTS // p.shape[1]), 0
        for s in range(0, p.shape[0], rows):
            d = p[s:s + rows].to(dtype, copy=True)           # p - onehot(y), as brier subtracts it
            d.scatter_add_(1, y[s:s + rows].unsqueeze(1), torch.full_like(d[:, :1], -1.0))
            total = total + (d * d).sum()
        return total


class StreamingAccuracy(_MeanOfRows):
    """:func:`calib.metrics.accuracy <calib.metrics.scores.accuracy>` over batches: the number of correct argmaxes
    and N."""

    _counts = ("n", "total")

    def _batch(self, probs, labels):
        _, y, pred, _ = as_probs_labels_top(probs, labels, dtype=None)
        return y.shape[0], int(np.count_nonzero(pred == y))

    def _tensor_total(self, p, y, pred):
        import torch

        return (pred == y).sum(dtype=torch.int64)


class StreamingAURC(StreamingMetric):
    """:func:`calib.metrics.aurc <calib.metrics.risk_coverage.aurc>` with the maximum softmax probability and the 0/1
    loss, over batches.

    The AURC weights each loss by its rank among all the confidences, so it cannot stream in a fixed-size state:
    this keeps one int64 key a row (the confidence and the error, 8 bytes; on the batches' device for tensors)
    and computes the one-shot formula (ties share their group's mean loss) from a sorted copy, block by block
    (16 bytes a row at the peak of ``compute()``; module docstring).
    """

    exact_streaming = False
    _row_names = ("keys",)

    def _row_template(self, n_classes: int) -> dict:
        return {"keys": ((), np.int64)}

    def _update_numpy(self, p, y, pred, conf) -> None:
        self._rows["keys"].append(_keys(conf, pred != y))

    def _update_tensor(self, p, y, pred, conf) -> None:
        self._rows["keys"].append(_tensor_keys(conf, pred != y))

    def _value(self, sums, rows, n_classes) -> float:
        # aurc's sum: the risk at coverage i/N is the mean tie-averaged loss of the i most confident samples; the
        # running sum goes on from block to block in the same order (the carry first), as one cumsum would
        keys = _sorted_keys(rows["keys"])
        carry, total, seen = 0.0, 0.0, 0
        for _, _, loss in _tie_mean_blocks(keys, descending=True):
            running = np.cumsum(np.concatenate([[carry], loss]))[1:]
            total += float((running / np.arange(seen + 1, seen + loss.shape[0] + 1)).sum())
            carry, seen = float(running[-1]), seen + loss.shape[0]
        return total / seen


# ------------------------------------------------------------------------------------------- small helpers

def _edges_like(x, n_bins: int):
    """The equal-width edges ``i / M`` (:func:`calib.metrics._binning.uniform_edges`, correctly rounded float64) as a
    tensor of ``x``'s dtype on its device. In float32 each edge is rounded down, so that the comparisons of
    :func:`_uniform_bin_tensor` with float32 confidences decide as those with the float64 edges do (for a float32
    c and a float64 e, c <= e exactly when c <= e rounded down to float32; c > e likewise): the bins of a device
    without float64 are those of the one-shot function."""
    import torch

    edges = uniform_edges(n_bins)
    if x.dtype != torch.float64:
        below = edges.astype(np.float32)
        above = below.astype(np.float64) > edges
        below[above] = np.nextafter(below[above], np.float32(-np.inf))
        edges = below
    return torch.from_numpy(edges).to(x.device)


def _count(index, size: int, like, weights=None):
    """How many entries of ``index`` (or the sum of 0/1 ``weights`` at them) fall on each of ``size`` slots, int64.

    Counted with ``index_add_`` in ``like``'s float dtype, exact for a batch of fewer than 2**24 entries even in
    float32 (a device without float64 may lack an int64 ``index_add_``), then made int64 for the running count,
    which stays exact beyond 2**24."""
    import torch

    counts = torch.zeros(size, dtype=like.dtype, device=like.device)
    counts.index_add_(0, index, torch.ones_like(index, dtype=like.dtype) if weights is None else weights)
    return counts.round().to(torch.int64)
