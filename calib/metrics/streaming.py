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
  the per-sample keys (below).

Every batch must have the number of classes K of the first (a batch of another K raises ValueError and leaves
the state as it was; ``reset()`` starts over).

**What cannot stream exactly.** Equal-mass ("quantile", adaptive) bins are cut at ranks of *all* the
confidences, the label-binned estimator needs each sample's gap to its bin's accuracy, and the AURC weights each
loss by its rank among all the confidences: no fixed-size summary of the batches seen gives these exactly. The
classes keep one int64 key a row instead, 8 bytes: the float64 bits of the top-label confidence shifted left
by one, with the outcome in the lowest bit (the key of :func:`calib.metrics._binning.sorted_pairs`, which sorts as
the confidences). ``compute()`` sorts one copy of the keys (8 bytes a row more, released when it returns; the
equal-width label estimator needs no copy) and reads it in blocks of 8192 rows (under 1 MiB of temporaries),
cutting the same bins, with the same tie rule, as the one-shot function: a peak of 16 bytes a row in all, measured
with ``tracemalloc`` in ``tests/test_streaming.py``. The class-wise ECE with equal-mass bins keeps the float64
probabilities and labels (8 K + 8 bytes a row) and calls :func:`~calib.metrics.binned.classwise_ece` on them.
``compute()`` says which in :attr:`StreamingMetric.exact_streaming`. No approximation (a sketch of the quantiles)
is used.

**Across processes.** When ``torch.distributed`` is initialised with more than one process, ``compute()`` first
gathers every rank's settings (bins, binning, norm, estimator) and number of classes and raises the same
ValueError on every rank, naming the setting and each rank's value, when they differ; then it reduces the
accumulators over the ranks (``all_reduce`` of the float64 sums; ``all_gather_object`` of the per-sample keys,
which holds them pickled for a while) and every rank gets the value of all ranks' rows. A rank that saw no batch
takes part with an empty state of the others' shape. It is a collective, so every rank must call it, for the
same metrics in the same order. The local state is left as it was (``compute()`` twice does not count twice);
``sync=False`` gives the local value.
"""

from __future__ import annotations

import numbers

import numpy as np

from calib._validate import as_probs_labels_top
from calib.distributed import gather_object, world_size
from calib.metrics import _binning  # BLOCK_ELEMENTS is read at call time, as in calib.metrics.binned
from calib.metrics._binning import (NORMS, Bins, bin_top_label, binned_error, check_binning_args, quantile_sizes,
                                    uniform_bin, uniform_edges)
from calib.metrics.binned import classwise_ece
from calib.metrics.scores import brier, nll

__all__ = ["StreamingMetric", "StreamingECE", "StreamingClasswiseECE", "StreamingNLL", "StreamingBrier",
           "StreamingAccuracy", "StreamingAURC"]

#: Rows of keys read at a time by ``compute()`` of the per-sample metrics: every temporary of a block is 64 KiB.
KEY_BLOCK_ROWS = 1 << 13


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
    """Each list of per-sample arrays: this rank's batches, then every rank's, in rank order."""
    gathered = gather_object(arrays)
    return {name: [part for rank in gathered for part in rank[name]] for name in arrays}


def _per_rank(values) -> str:
    return ", ".join(f"{'no batch' if v is None else repr(v)} on rank {r}" for r, v in enumerate(values))


# ------------------------------------------------------------------------------------- the per-sample keys

def _keys(conf: np.ndarray, flag: np.ndarray) -> np.ndarray:
    """One int64 a row, ``bits(conf) << 1 | flag``: ordered as the confidences (>= 0, read as float64; -0.0 as
    +0.0), and among equal ones by ``flag`` (:func:`calib.metrics._binning.sorted_pairs`'s key)."""
    key = (np.asarray(conf, dtype=np.float64) + 0.0).view(np.int64) << 1
    key |= flag
    return key


def _key_blocks(parts):
    """``(x, flag)`` of every row of the key arrays ``parts``, in blocks of :data:`KEY_BLOCK_ROWS` rows, in the
    order given: the confidences (float64) and the outcomes (0.0 or 1.0)."""
    for part in parts:
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
    """One sorted copy of the keys of ``parts`` (the state is left as it was)."""
    keys = np.concatenate(parts)
    keys.sort()
    return keys


class StreamingMetric:
    """Base of the streaming metrics: ``update`` adds a batch, ``compute`` gives the value, ``reset`` starts over.

    Subclasses keep float64 sums in ``self._sums`` (reduced over ranks by summing) and lists of per-sample
    arrays in ``self._rows`` (reduced by gathering), name in :meth:`settings` what must agree across ranks, and
    implement ``_value``. ``n_classes`` is the K of the first batch (None before it).
    """

    #: Whether the state is a fixed-size summary (True) or the per-sample arrays, O(N) (False).
    exact_streaming = True

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        """Forget every row seen (and the number of classes)."""
        self._sums: dict = {}
        self._rows: dict = {}
        self.n_classes: int | None = None
        self._init_state()

    def _init_state(self) -> None:
        raise NotImplementedError

    def settings(self) -> dict:
        """The constructor's settings that decide the value (bins, binning, norm, estimator): every rank must
        have the same ones."""
        return {}

    def update(self, probs, labels) -> None:
        """Add a batch: ``probs`` (B, K) rows summing to 1 and integer ``labels`` (B,), numpy or torch, checked
        as the one-shot function checks them (the same ValueError), with the K of the earlier batches."""
        raise NotImplementedError

    def _check_classes(self, n_classes: int) -> None:
        """Refuse a batch whose number of classes is not the earlier batches' (before the state changes)."""
        if self.n_classes is not None and n_classes != self.n_classes:
            raise ValueError(f"probs has {n_classes} columns but the earlier batches had {self.n_classes}; every "
                             f"batch must have the same classes (call reset() to start over).")

    def _empty_sums(self, n_classes: int) -> dict:
        """The sums of no row, shaped for ``n_classes`` classes (what a rank that saw no batch reduces)."""
        return self._sums

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
                sums = self._empty_sums(n_classes)
            sums = _all_reduce_sums(sums) if sums else sums
            rows = _all_gather_rows(rows) if rows else rows
        n = sums["n"] if "n" in sums else sum(len(part) for part in next(iter(rows.values())))
        if n == 0:
            raise ValueError(f"{type(self).__name__}.compute() before any row: call update(probs, labels) with a "
                             f"batch first.")
        return float(self._value(sums, rows, n_classes))

    def _value(self, sums: dict, rows: dict, n_classes: int) -> float:
        """The value from the (reduced) sums and the lists of per-sample arrays (each list's batches in order)."""
        raise NotImplementedError


class StreamingECE(StreamingMetric):
    """:func:`calib.metrics.ece <calib.metrics.binned.ece>` accumulated over batches: the same bins, norms and estimators.

    Equal-width bins with the usual ("bin") estimator keep, per bin, the count, the sum of confidences and the
    number of correct predictions (float64), from which every norm ("l1", "l2", "max") is exact. Equal-mass
    bins (``binning="quantile"``, the adaptive ECE) and ``estimator="label"`` keep one int64 key a row (the
    confidence and the outcome, 8 bytes) and compute :func:`~calib.metrics.binned.top_label_ece`'s value from
    them, block by block (O(N) memory, 16 bytes a row at the peak of ``compute()``; module docstring).

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

    def settings(self) -> dict:
        """``n_bins``, ``binning``, ``norm`` and ``estimator``."""
        return {"n_bins": self.n_bins, "binning": self.binning, "norm": self.norm, "estimator": self.estimator}

    def _init_state(self) -> None:
        if self.exact_streaming:
            self._sums = {"n": 0.0, "counts": np.zeros(self.n_bins), "conf_sum": np.zeros(self.n_bins),
                          "hits": np.zeros(self.n_bins)}
        else:
            self._rows = {"keys": []}

    def update(self, probs, labels) -> None:
        """Add a batch (see :meth:`StreamingMetric.update`)."""
        p, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
        self._check_classes(p.shape[1])
        if not self.exact_streaming:
            self._rows["keys"].append(_keys(conf, pred == y))
        else:
            b = bin_top_label(conf, pred == y, self.n_bins, "uniform")
            self._sums["n"] += conf.shape[0]
            self._sums["counts"] += b.counts
            self._sums["conf_sum"] += b.conf_sum
            self._sums["hits"] += b.hits
        self.n_classes = p.shape[1]

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

    def settings(self) -> dict:
        """``n_bins``, ``binning`` and ``norm``."""
        return {"n_bins": self.n_bins, "binning": self.binning, "norm": self.norm}

    def _init_state(self) -> None:
        if self.exact_streaming:
            self._sums = {"n": 0.0}
        else:
            self._rows = {"probs": [], "labels": []}

    def _empty_sums(self, n_classes: int) -> dict:
        if not self.exact_streaming:
            return self._sums
        size = n_classes * self.n_bins
        return {"n": 0.0, "counts": np.zeros(size), "conf_sum": np.zeros(size), "hits": np.zeros(size)}

    def update(self, probs, labels) -> None:
        """Add a batch (see :meth:`StreamingMetric.update`)."""
        p, y, _, _ = as_probs_labels_top(probs, labels, dtype=None)  # float32 stays float32; blocks go to float64
        self._check_classes(p.shape[1])
        if self.n_classes is None:
            self.n_classes = p.shape[1]
            self._sums = self._empty_sums(self.n_classes)
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

    def _value(self, sums, rows, n_classes) -> float:
        if not self.exact_streaming:
            return classwise_ece(np.concatenate(rows["probs"]), np.concatenate(rows["labels"]), self.n_bins,
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
    """A mean over rows: the sum of the one-shot function's batch values times the batch sizes, and N."""

    def _init_state(self) -> None:
        self._sums = {"n": 0.0, "total": 0.0}

    def _batch(self, probs, labels) -> tuple[int, float]:
        raise NotImplementedError

    def update(self, probs, labels) -> None:
        """Add a batch (see :meth:`StreamingMetric.update`)."""
        n, total = self._batch(probs, labels)          # the one-shot function's checks: probs is (B, K) now
        n_classes = int(np.shape(probs)[1])
        self._check_classes(n_classes)
        self._sums["n"] += n
        self._sums["total"] += total
        self.n_classes = n_classes

    def _value(self, sums, rows, n_classes) -> float:
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
    this keeps one int64 key a row (the confidence and the error, 8 bytes) and computes the one-shot formula
    (ties share their group's mean loss) from a sorted copy, block by block (16 bytes a row at the peak of
    ``compute()``; module docstring).
    """

    exact_streaming = False

    def _init_state(self) -> None:
        self._rows = {"keys": []}

    def update(self, probs, labels) -> None:
        """Add a batch (see :meth:`StreamingMetric.update`)."""
        p, y, pred, conf = as_probs_labels_top(probs, labels, dtype=None)
        self._check_classes(p.shape[1])
        self._rows["keys"].append(_keys(conf, pred != y))
        self.n_classes = p.shape[1]

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
