"""Metrics accumulated over batches and across processes: ``update(probs, labels)``, ``compute()``, ``reset()``.

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
  the per-sample arrays (below).

**What cannot stream exactly.** Equal-mass ("quantile", adaptive) bins are cut at ranks of *all* the
confidences, the label-binned estimator needs each sample's gap to its bin's accuracy, and the AURC weights each
loss by its rank among all the confidences: no fixed-size summary of the batches seen gives these exactly. The
classes keep the per-sample arrays instead (the top-label confidence and outcome, 9 bytes a row; for the
class-wise ECE with equal-mass bins the float64 probabilities, 8 K bytes a row) and compute the one-shot function
on them, exactly, in O(N) memory; ``compute()`` says so in :attr:`StreamingMetric.exact_streaming`. No
approximation (a sketch of the quantiles) is used.

**Across processes.** When ``torch.distributed`` is initialised with more than one process, ``compute()``
reduces the accumulators over the ranks first (``all_reduce`` of the float64 sums; ``all_gather_object`` of
the per-sample arrays) and every rank gets the value of all ranks' rows: it is a collective, so every rank must
call it. The local state is left as it was (``compute()`` twice does not count twice); ``sync=False`` gives the
local value.
"""

from __future__ import annotations

import numbers

import numpy as np

from calib._validate import as_probs_labels_top
from calib.distributed import world_size
from calib.metrics import _binning  # BLOCK_ELEMENTS is read at call time, as in calib.metrics.binned
from calib.metrics._binning import (NORMS, Bins, bin_top_label, binned_error, check_binning_args, uniform_bin,
                                    uniform_edges)
from calib.metrics.binned import classwise_ece, top_label_ece
from calib.metrics.scores import brier, nll

__all__ = ["StreamingMetric", "StreamingECE", "StreamingClasswiseECE", "StreamingNLL", "StreamingBrier",
           "StreamingAccuracy", "StreamingAURC"]


def _all_reduce_sums(arrays: dict) -> dict:
    """The float64 arrays summed over all ranks (a copy; the inputs are untouched)."""
    import torch
    import torch.distributed as dist

    names = sorted(arrays)
    flat = np.concatenate([np.asarray(arrays[name], dtype=np.float64).ravel() for name in names])
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    tensor = torch.from_numpy(flat).to(device)
    dist.all_reduce(tensor)
    flat = tensor.cpu().numpy()
    out, start = {}, 0
    for name in names:
        shape = np.shape(arrays[name])
        size = int(np.prod(shape))
        out[name] = flat[start:start + size].reshape(shape)
        start += size
    return out


def _all_gather_rows(arrays: dict) -> dict:
    """Each list of per-sample arrays concatenated over this rank's batches and then over all ranks."""
    import torch.distributed as dist

    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, arrays)
    return {name: [part for rank in gathered for part in rank[name]] for name in arrays}


class StreamingMetric:
    """Base of the streaming metrics: ``update`` adds a batch, ``compute`` gives the value, ``reset`` starts over.

    Subclasses keep float64 sums in ``self._sums`` (reduced over ranks by summing) and lists of per-sample
    arrays in ``self._rows`` (reduced by gathering), and implement ``_value``.
    """

    #: Whether the state is a fixed-size summary (True) or the per-sample arrays, O(N) (False).
    exact_streaming = True

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        """Forget every row seen."""
        self._sums: dict = {}
        self._rows: dict = {}
        self._init_state()

    def _init_state(self) -> None:
        raise NotImplementedError

    def update(self, probs, labels) -> None:
        """Add a batch: ``probs`` (B, K) rows summing to 1 and integer ``labels`` (B,), numpy or torch, checked
        as the one-shot function checks them (the same ValueError)."""
        raise NotImplementedError

    def compute(self, sync: bool = True) -> float:
        """The one-shot function's value on every row seen (by every rank when ``torch.distributed`` is
        initialised and ``sync``; then a collective). Raises ValueError before any row was seen."""
        sums, rows = self._sums, self._rows
        if sync and world_size() > 1:
            sums = _all_reduce_sums(sums) if sums else sums
            rows = _all_gather_rows(rows) if rows else rows
        n = sums["n"] if "n" in sums else sum(len(part) for part in next(iter(rows.values())))
        if n == 0:
            raise ValueError(f"{type(self).__name__}.compute() before any row: call update(probs, labels) with a "
                             f"batch first.")
        return float(self._value(sums, {name: np.concatenate(parts) for name, parts in rows.items()}))

    def _value(self, sums: dict, rows: dict) -> float:
        raise NotImplementedError


class StreamingECE(StreamingMetric):
    """:func:`calib.metrics.ece <calib.metrics.binned.ece>` accumulated over batches: the same bins, norms and estimators.

    Equal-width bins with the usual ("bin") estimator keep, per bin, the count, the sum of confidences and the
    number of correct predictions (float64), from which every norm ("l1", "l2", "max") is exact. Equal-mass
    bins (``binning="quantile"``, the adaptive ECE) and ``estimator="label"`` keep each row's confidence and
    outcome and compute :func:`~calib.metrics.binned.top_label_ece` on them (O(N) memory; module docstring).

    Examples
    --------
    >>> metric = StreamingECE(n_bins=15)
    >>> for probs, labels in batches:          # doctest: +SKIP
    ...     metric.update(probs, labels)
    >>> metric.compute()                       # doctest: +SKIP
    """

    def __init__(self, n_bins: int = 15, binning: str = "uniform", norm: str = "l1", estimator: str = "bin"):
        self.n_bins = check_binning_args(n_bins, binning, norm, estimator)
        self.binning, self.norm, self.estimator = binning, norm, estimator
        self.exact_streaming = binning == "uniform" and estimator == "bin"
        super().__init__()

    def _init_state(self) -> None:
        if self.exact_streaming:
            self._sums = {"n": 0.0, "counts": np.zeros(self.n_bins), "conf_sum": np.zeros(self.n_bins),
                          "hits": np.zeros(self.n_bins)}
        else:
            self._rows = {"conf": [], "correct": []}

    def update(self, probs, labels) -> None:
        """Add a batch (see :meth:`StreamingMetric.update`)."""
        _, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
        if not self.exact_streaming:
            self._rows["conf"].append(conf + 0.0)
            self._rows["correct"].append(pred == y)
            return
        b = bin_top_label(conf, pred == y, self.n_bins, "uniform")
        self._sums["n"] += conf.shape[0]
        self._sums["counts"] += b.counts
        self._sums["conf_sum"] += b.conf_sum
        self._sums["hits"] += b.hits

    def _value(self, sums, rows) -> float:
        if not self.exact_streaming:
            return top_label_ece(rows["conf"], rows["correct"], self.n_bins, self.binning, self.norm,
                                 self.estimator, check=False)
        n = int(round(float(sums["n"])))
        counts = np.rint(sums["counts"]).astype(np.int64)
        member = np.broadcast_to(0.0, (n,))  # binned_error reads N from its length; "bin" reads nothing else
        bins = Bins(counts, sums["conf_sum"], sums["hits"], member, member, uniform_edges(self.n_bins))
        return binned_error(bins, self.norm, "bin")


class StreamingClasswiseECE(StreamingMetric):
    """:func:`calib.metrics.classwise_ece <calib.metrics.binned.classwise_ece>` accumulated over batches: the same bins and norms (names or rho).

    Equal-width bins keep the (class, bin) counts, probability sums and hits (3 K M float64). Equal-mass bins
    keep the float64 probabilities and labels of every row (O(N K) memory) and call
    :func:`~calib.metrics.binned.classwise_ece` on them. The number of classes is fixed by the first batch.
    """

    def __init__(self, n_bins: int = 15, binning: str = "uniform", norm="l1"):
        if isinstance(norm, str):
            rho = None
        elif isinstance(norm, bool) or not isinstance(norm, numbers.Real) or not np.isfinite(norm) or norm < 1:
            raise ValueError(f"norm must be one of {', '.join(map(repr, NORMS))} or a number rho >= 1; got {norm!r}.")
        else:
            rho = float(norm)
        self.n_bins = check_binning_args(n_bins, binning, norm if rho is None else None)
        self.binning, self.norm, self.rho = binning, norm, rho
        self.exact_streaming = binning == "uniform"
        super().__init__()

    def _init_state(self) -> None:
        self.n_classes = None
        if self.exact_streaming:
            self._sums = {"n": 0.0}
        else:
            self._rows = {"probs": [], "labels": []}

    def update(self, probs, labels) -> None:
        """Add a batch (see :meth:`StreamingMetric.update`)."""
        p, y, _, _ = as_probs_labels_top(probs, labels, dtype=None)  # float32 stays float32; blocks go to float64
        if self.n_classes is None:
            self.n_classes = p.shape[1]
            if self.exact_streaming:
                size = self.n_classes * self.n_bins
                self._sums.update(counts=np.zeros(size), conf_sum=np.zeros(size), hits=np.zeros(size))
        elif p.shape[1] != self.n_classes:
            raise ValueError(f"probs has {p.shape[1]} columns but the earlier batches had {self.n_classes}; every "
                             f"batch must have the same classes (call reset() to start over).")
        if not self.exact_streaming:
            self._rows["probs"].append(np.array(p, dtype=np.float64))
            self._rows["labels"].append(y)
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

    def _value(self, sums, rows) -> float:
        if not self.exact_streaming:
            return classwise_ece(rows["probs"], rows["labels"], self.n_bins, self.binning, self.norm)
        # the formula of classwise_ece, from the summed (class, bin) statistics
        n, k = float(sums["n"]), self.n_classes
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
    """A mean over rows: the sum of the one-shot function's batch values times the batch sizes, and N."""

    def _init_state(self) -> None:
        self._sums = {"n": 0.0, "total": 0.0}

    def _batch(self, probs, labels) -> tuple[int, float]:
        raise NotImplementedError

    def update(self, probs, labels) -> None:
        """Add a batch (see :meth:`StreamingMetric.update`)."""
        n, total = self._batch(probs, labels)
        self._sums["n"] += n
        self._sums["total"] += total

    def _value(self, sums, rows) -> float:
        return float(sums["total"]) / float(sums["n"])


class StreamingNLL(_MeanOfRows):
    """:func:`calib.metrics.nll <calib.metrics.scores.nll>` over batches (a true class of probability 0 raises its ValueError)."""

    def _batch(self, probs, labels):
        n = len(labels)                  # nll checks that it is the number of rows of probs
        return n, nll(probs, labels) * n


class StreamingBrier(_MeanOfRows):
    """:func:`calib.metrics.brier <calib.metrics.scores.brier>` (multiclass Brier score) over batches."""

    def _batch(self, probs, labels):
        n = len(labels)                  # brier checks that it is the number of rows of probs
        return n, brier(probs, labels) * n


class StreamingAccuracy(_MeanOfRows):
    """:func:`calib.metrics.accuracy <calib.metrics.scores.accuracy>` over batches: the number of correct argmaxes and N."""

    def _batch(self, probs, labels):
        _, y, pred, _ = as_probs_labels_top(probs, labels, dtype=None)
        return y.shape[0], float(np.count_nonzero(pred == y))


class StreamingAURC(StreamingMetric):
    """:func:`calib.metrics.aurc <calib.metrics.risk_coverage.aurc>` with the maximum softmax probability and the 0/1 loss, over batches.

    The AURC weights each loss by its rank among all the confidences, so it cannot stream in a fixed-size state:
    this keeps each row's confidence and error (O(N), 9 bytes a row) and computes the one-shot formula (ties
    share their group's mean loss) on them.
    """

    exact_streaming = False

    def _init_state(self) -> None:
        self._rows = {"conf": [], "error": []}

    def update(self, probs, labels) -> None:
        """Add a batch (see :meth:`StreamingMetric.update`)."""
        _, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
        self._rows["conf"].append(conf + 0.0)
        self._rows["error"].append(pred != y)

    def _value(self, sums, rows) -> float:
        score, ell = rows["conf"], rows["error"].astype(np.float64)
        n = score.shape[0]
        order = np.argsort(score)[::-1]
        s, ell = score[order], ell[order]
        starts = np.flatnonzero(np.concatenate([[True], s[1:] != s[:-1]]))
        sizes = np.diff(np.append(starts, n))
        ell = np.repeat(np.add.reduceat(ell, starts) / sizes, sizes)
        return float((np.cumsum(ell) / np.arange(1, n + 1)).mean())

