"""One table of every loss calib can build from a name: ``get_loss("fl-3")``, ``get_secondary_loss("sb-ece")``.

Each row of :data:`REGISTRY` is a :class:`LossSpec`: the family's key, whether it is a primary loss (a name
for ``calib train --loss``) or a secondary one (a batch statistic added with a weight, ``--secondary``), the
forms its names take, an example, the paper it comes from, and the function that builds it. Everything else is
generated from the table: :func:`get_loss`, :func:`get_secondary_loss`, :func:`loss_names`,
:func:`secondary_loss_names`, the lookups :data:`LOSSES` and :data:`SECONDARY_LOSSES`, :func:`describe_loss` and
the list of names in :func:`get_loss`'s docstring. A new loss is one new row.

Every loss built here is a ``torch.nn.Module`` that pickles (``pickle.dumps(get_loss("fl-3"))``), deep-copies
and prints its options, called as ``loss(logits, targets)``: the focal family's names build the modules of
:mod:`calib.losses.modules` (``get_loss("fl-3")`` is ``FocalLoss(3.0)``, ``"flsd-53"`` an :class:`FLSD53Loss
<calib.losses.modules.FLSD53Loss>`, ``"inverse-fl-2"`` and ``"dual-fl-2"`` an ``InverseFocalLoss`` and a
``DualFocalLoss``) and ``"flsc-531"`` an :class:`~calib.losses.functional.EpochScheduledFocalLoss`, each with
torch's defaults (mean, no class weights, ``ignore_index=-100``); the other names a :class:`RegisteredLoss` (a
function and its options) or a :class:`CombinedLoss`.

Primary names are ``<key>`` or ``<key>-<argument>`` (``"fl-3"``: key ``fl``, argument ``3``); secondary names
are matched whole (``"avuc-gs"``). Names are case-insensitive.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, cast

import torch

from calib.focal import SCHEDULES
from calib.focal.numerics import check_gamma
from calib.losses.batch import avuc, check_au_args, mmce, s_avuc, selective_au_loss, soft_binned_ece_loss
from calib.losses.functional import (FLSC_SCHEDULES, EpochScheduledFocalLoss, brier_loss, cross_entropy,
                                     label_smoothing_focal_loss, label_smoothing_loss)
from calib.losses.modules import DualFocalLoss, FLSD53Loss, FLSDLoss, FocalLoss, InverseFocalLoss
from calib.metrics import CSFS

__all__ = ["LossSpec", "REGISTRY", "LOSSES", "SECONDARY_LOSSES", "AURC_DEFAULTS", "S_AVUC_DEFAULTS", "get_loss",
           "get_secondary_loss", "loss_names", "secondary_loss_names", "describe_loss", "combined_loss", "focal_gamma",
           "RegisteredLoss",
           "CombinedLoss"]

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class LossSpec:
    """One family of losses in the registry.

    Attributes
    ----------
    key : str
        The family's name: the prefix of a primary name (``"fl"`` for ``"fl-3"``), or a secondary name whole.
    kind : {"primary", "secondary"}
        A training loss of its own, or a batch statistic added to one with a weight beta.
    forms : tuple of str
        The names it accepts, as shown to users (``"fl-<gamma>"``, ``"flsd-53"``).
    example : str
        A name that builds, e.g. ``"fl-3"`` (the tests build every example).
    summary : str
        What it is, with the paper it comes from.
    build : callable
        ``build(name, argument, **params) -> loss``: ``argument`` is the text after the key and its hyphen (None
        when absent; always None for a secondary loss), ``params`` override a secondary loss's defaults.
    focal_gamma : bool
        Whether the family is focal loss with one fixed gamma, the loss's ``gamma`` (so that the focal
        calibration map Psi^gamma of the same gamma applies to its model; :func:`focal_gamma`).
    options : bool
        For a secondary loss: whether its name may carry options, ``<key>-<option>=<value>,...``
        (``"s-avuc-kappa=0.3,t=0.05"``), passed to ``build`` as ``argument``.
    """

    key: str
    kind: str
    forms: tuple
    example: str
    summary: str
    build: Callable[..., Loss]
    focal_gamma: bool = False
    options: bool = False


# ------------------------------------------------------------------------------------------ the modules

class RegisteredLoss(torch.nn.Module):
    """A loss of the registry: ``function(logits, targets, **options)`` as a module.

    Parameters
    ----------
    function : callable
        A module-level function ``(logits, targets, **options) -> scalar tensor`` (so that the loss pickles).
    name : str
        Its name, also ``__name__`` (``"focal_loss_gamma_3"``).
    doc : str
        What it computes, with its options and the paper (its ``__doc__``).
    **options
        The function's keyword arguments, e.g. ``gamma=3.0``; each is also an attribute (``loss.gamma``).
    """

    def __init__(self, function: Callable, name: str, doc: str, **options):
        super().__init__()
        self.function, self.options, self.__name__, self.__doc__ = function, options, name, doc

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The loss of the batch, a scalar tensor (the mean over the batch)."""
        return self.function(logits, targets, **self.options)

    def __getattr__(self, attribute: str):
        options = self.__dict__.get("options")
        if options is not None and attribute in options:
            return options[attribute]
        return super().__getattr__(attribute)

    def extra_repr(self) -> str:
        """Its name and options, for ``repr(loss)``: ``RegisteredLoss('focal_loss_gamma_3', gamma=3.0)``."""
        return ", ".join([repr(self.__name__)] + [f"{k}={v!r}" for k, v in self.options.items()])


class CombinedLoss(torch.nn.Module):
    """``primary + weight * secondary`` as a module (Karandikar et al. 2021, Sec. 5.1); see :func:`combined_loss`.

    ``primary`` and ``secondary`` are kept as given (modules, or plain callables); an epoch-scheduled primary
    (FLSc) keeps its schedule through :meth:`set_epoch`.
    """

    def __init__(self, primary: Loss, secondary: Loss, weight: float, name: str):
        super().__init__()
        self.primary, self.secondary, self.weight, self.__name__ = primary, secondary, weight, name
        self.__doc__ = f"{name} (mean over the batch; the secondary is a batch statistic)."

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """``primary(logits, targets) + weight * secondary(logits, targets)``."""
        return self.primary(logits, targets) + self.weight * self.secondary(logits, targets)

    def parts(self, logits: torch.Tensor, targets: torch.Tensor) -> tuple:
        """Both terms, ``(primary, secondary)``, for logging."""
        return self.primary(logits, targets), self.secondary(logits, targets)

    def set_epoch(self, epoch: int, total_epochs: int | None = None) -> None:
        """Pass the epoch on to an epoch-scheduled primary loss (FLSc); nothing for the others."""
        if hasattr(self.primary, "set_epoch"):
            self.primary.set_epoch(epoch, total_epochs)

    def extra_repr(self) -> str:
        """The weight, for ``repr(loss)`` (the two terms are printed as its submodules when they are modules)."""
        return f"weight={self.weight!r}"


# ------------------------------------------------------------------------------------------ builders

def _no_argument(name: str, arg: str | None, key: str) -> None:
    if arg is not None:
        raise ValueError(f"loss {name!r}: {key!r} takes no parameter; write {key!r}.")


def _parse_gamma(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"loss {name!r}: {text!r} is not a number; write e.g. 'fl-3' or 'fl-0.5'.") from None
    try:
        return check_gamma(value, scalar=True)
    except ValueError as exc:
        raise ValueError(f"loss {name!r}: {exc}") from None


def _build_ce(name: str, arg: str | None) -> Loss:
    _no_argument(name, arg, "ce")
    return RegisteredLoss(cross_entropy, "cross_entropy", "Cross-entropy -log softmax(logits)[y], mean over the batch.")


def _gamma_family(module: type, label: str, prefix: str = ""):
    """A builder for ``<prefix><gamma>`` names of a module ``module(gamma)`` (:mod:`calib.losses.modules`); the
    loss is named ``<label>_gamma_<text>`` (``focal_loss_gamma_3``)."""
    def build(name: str, arg: str | None) -> Loss:
        if arg is None or not arg.startswith(prefix) or arg == prefix:
            key = name.strip().lower().partition("-")[0]
            raise ValueError(f"loss {name!r}: write '{key}-{prefix}<gamma>', e.g. '{key}-{prefix}2'.")
        text = arg[len(prefix):]
        loss = module(_parse_gamma(name, text))
        loss.__name__ = f"{label}_gamma_{text}"
        return loss
    return build


def _build_flsd(name: str, arg: str | None) -> Loss:
    key = f"flsd-{arg}"
    if key not in SCHEDULES:
        raise ValueError(f"loss {name!r}: the sample-dependent schedules are {', '.join(map(repr, SCHEDULES))}.")
    loss: Loss = FLSD53Loss() if key == "flsd-53" else FLSDLoss(SCHEDULES[key])
    loss.__name__ = key.replace("-", "_")
    return loss


def _build_flsc(name: str, arg: str | None) -> Loss:
    key = f"flsc-{arg}"
    if key not in FLSC_SCHEDULES:
        raise ValueError(f"loss {name!r}: the epoch schedules are {', '.join(map(repr, FLSC_SCHEDULES))}.")
    gammas, boundaries, reference = FLSC_SCHEDULES[key]
    return EpochScheduledFocalLoss(gammas, boundaries, reference, name=key)


def _build_brier(name: str, arg: str | None) -> Loss:
    _no_argument(name, arg, "brier")
    return RegisteredLoss(brier_loss, "brier_loss", "Brier score sum_k (softmax(logits)_k - 1[k = y])^2 (Brier 1950), "
                                                    "mean over the batch.")


def _build_ls(name: str, arg: str | None) -> Loss:
    """"ls-<alpha>": cross-entropy on smoothed targets; "ls-<alpha>-fl-<gamma>": focal loss on them (Charoenphakdee
    et al. 2021's LS paradigm, Sec. 6.1)."""
    text, sep, focal = (arg or "").partition("-fl-")
    try:
        alpha = float(text) if arg is not None else None
    except ValueError:
        alpha = None
    if alpha is None or not 0 <= alpha < 1 or (sep and arg is not None and arg.endswith("-fl-")):
        raise ValueError(f"loss {name!r}: write 'ls-<alpha>' with 0 <= alpha < 1, e.g. 'ls-0.05', or "
                         f"'ls-<alpha>-fl-<gamma>' for focal loss on the smoothed targets, e.g. 'ls-0.1-fl-2'.")
    if not sep:
        return RegisteredLoss(label_smoothing_loss, f"label_smoothing_{text}",
                              f"Label smoothing with alpha = {alpha:g} (Mukhoti et al.'s alpha / (K - 1)), mean over "
                              f"the batch.", alpha=alpha)
    try:
        gamma = float(focal)
    except ValueError:
        raise ValueError(f"loss {name!r}: {focal!r} is not a number; write 'ls-<alpha>-fl-<gamma>' with gamma >= 0, "
                         f"e.g. 'ls-0.1-fl-2'.") from None
    try:
        gamma = check_gamma(gamma, scalar=True)
    except ValueError as exc:
        raise ValueError(f"loss {name!r}: {exc}") from None
    return RegisteredLoss(label_smoothing_focal_loss, f"label_smoothing_{text}_focal_loss_gamma_{focal}",
                          f"Focal loss with gamma = {gamma:g} on targets smoothed with alpha = {alpha:g} (alpha / "
                          f"(K - 1) to each other class; Charoenphakdee et al. 2021's LS, Sec. 6.1), mean over the "
                          f"batch.", gamma=gamma, alpha=alpha)


#: Defaults of the "aurc" loss name, the paper's CIFAR-10 setting (App. E.2, App. Table 3, kappa 0.9 or 0.8,
#: nu = 0.1), MSP, 15 bins (K is not stated), gradient through the weights (Eq. 27), Eq. 16 as printed.
AURC_DEFAULTS = {"kappa": 0.9, "nu": 0.1, "bins": 15, "csf": "msp", "cdf": "bins", "detach": False,
                 "normalize": False}
_AURC_HELP = ("write 'aurc' or 'aurc-<key>=<value>,...' with keys kappa (0 < kappa <= 1), nu (> 0), bins (int), "
              "csf (msp, margin, negative_entropy, neg_gini), cdf (bins or exact), detach and normalize "
              "(0/1/true/false; a bare key means true), e.g. 'aurc-kappa=0.8,nu=0.01' or 'aurc-kappa=1,cdf=exact'")


def _build_aurc(name: str, arg: str | None) -> Loss:
    opts = dict(AURC_DEFAULTS)
    for item in (arg.split(",") if arg else []):
        key, eq, value = item.strip().partition("=")
        if key not in opts:
            raise ValueError(f"loss {name!r}: unknown option {key!r}; {_AURC_HELP}.")
        try:
            if key in ("detach", "normalize"):
                if eq and value not in ("0", "1", "true", "false"):
                    raise ValueError
                opts[key] = (not eq) or value in ("1", "true")
            elif key == "bins":
                opts[key] = int(value)
            elif key in ("kappa", "nu"):
                opts[key] = float(value)
            else:
                opts[key] = value
        except ValueError:
            raise ValueError(f"loss {name!r}: bad value {value!r} for {key}; {_AURC_HELP}.") from None
    check_au_args(opts["kappa"], opts["nu"], opts["bins"], opts["cdf"])
    if opts["csf"] not in CSFS:
        raise ValueError(f"loss {name!r}: csf {opts['csf']!r} is not one of {', '.join(CSFS)}; {_AURC_HELP}.")
    kw = dict(kappa=opts["kappa"], nu=opts["nu"], n_bins=opts["bins"], csf=opts["csf"], cdf=opts["cdf"],
              detach=opts["detach"], normalize=opts["normalize"])
    return RegisteredLoss(selective_au_loss, "selective_au_loss",
                          f"Selective AURC loss (Zhou et al. 2025, Eq. 17) with {kw}, mean over the batch.", **kw)


def _build_mmce_primary(name: str, arg: str | None) -> Loss:
    """"mmce-<lambda>": cross-entropy + lambda * MMCE_w, the MMCE baseline of Mukhoti et al. (2020), Sec. 5.1
    (lambda = 2 for images, 8 for text), after Kumar et al. (2018)."""
    try:
        lam = float(arg) if arg is not None else None
    except ValueError:
        lam = None
    if lam is None or not 0 <= lam < float("inf"):
        raise ValueError(f"loss {name!r}: write 'mmce-<lambda>' with lambda >= 0, e.g. 'mmce-2' (cross-entropy + "
                         f"2 * MMCE_w); for MMCE alone as a secondary loss use secondary='mmce' or 'mmce-w'.")
    loss = combined_loss("ce", _build_mmce("mmce-w", None, weighted=True), lam)
    loss.__name__ = f"mmce_{arg}"
    loss.__doc__ = f"Cross-entropy + {lam:g} * MMCE_w (Kumar et al. 2018; Mukhoti et al. 2020's baseline)."
    return loss


# -------------------------------------------------------------------- secondary (batch) losses

def _build_sb_ece(name: str, arg: None, temperature: float = 0.01, n_bins: int = 15, norm: str = "l2",
                  estimator: str = "label") -> Loss:
    return RegisteredLoss(soft_binned_ece_loss, name,
                          f"SB-ECE_{'lb' if estimator == 'label' else 'bin'},{norm[1]} (M = {n_bins}, "
                          f"T = {temperature:g}).", n_bins=n_bins, temperature=temperature, norm=norm,
                          estimator=estimator)


#: Defaults of the "s-avuc" secondary loss name, the book's (Karandikar et al. tune kappa and T on validation,
#: App. G, and do not report the values): the threshold kappa on the normalised entropy and the temperature T.
S_AVUC_DEFAULTS = {"kappa": 0.5, "t": 0.1}
_S_AVUC_HELP = ("write 's-avuc' or 's-avuc-<key>=<value>,...' with keys kappa (the threshold on the normalised "
                "entropy, 0 < kappa < 1) and t (the temperature T > 0), e.g. 's-avuc-kappa=0.3,t=0.05'")


def _s_avuc_options(name: str, arg: str | None) -> dict:
    """The options an ``s-avuc`` name sets: ``"kappa=0.3,t=0.05"`` -> ``{"kappa": 0.3, "temperature": 0.05}``."""
    options: dict = {}
    for item in ([] if arg is None else arg.split(",")):
        key, eq, text = item.strip().partition("=")
        if key not in S_AVUC_DEFAULTS:
            raise ValueError(f"secondary loss {name!r}: unknown option {key!r}; {_S_AVUC_HELP}.")
        field = "kappa" if key == "kappa" else "temperature"
        if field in options:
            raise ValueError(f"secondary loss {name!r}: option {key!r} is given twice; {_S_AVUC_HELP}.")
        try:
            value = float(text) if eq else math.nan
        except ValueError:
            value = math.nan
        if not (0 < value < 1 if key == "kappa" else 0 < value < math.inf):
            raise ValueError(f"secondary loss {name!r}: bad value {text!r} for {key}; {_S_AVUC_HELP}.")
        options[field] = value
    return options


def _build_s_avuc(name: str, arg: str | None, **params) -> Loss:
    options = _s_avuc_options(name, arg)
    unknown = sorted(set(params) - {"kappa", "temperature"})
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
    twice = sorted(set(params) & set(options))
    if twice:
        raise ValueError(f"secondary loss {name!r}: {twice[0]} is set by the name and by a keyword; give it once.")
    options = {"kappa": S_AVUC_DEFAULTS["kappa"], "temperature": S_AVUC_DEFAULTS["t"], **options, **params}
    kappa, temperature = options["kappa"], options["temperature"]
    return RegisteredLoss(s_avuc, name, f"S-AvUC (kappa = {kappa:g}, T = {temperature:g}).", kappa=kappa,
                          temperature=temperature)


def _avuc_of_batch(logits: torch.Tensor, targets: torch.Tensor, kappa: float | None,
                   stop_gradient: bool) -> torch.Tensor:
    """:func:`~calib.losses.batch.avuc` with kappa = log(K) / 2 (half the maximum entropy) when kappa is None."""
    k = 0.5 * math.log(max(logits.shape[1], 2)) if kappa is None else kappa   # K = 1: avuc says why it fails
    return avuc(logits, targets, kappa=k, stop_gradient=stop_gradient)


def _build_avuc(name: str, arg: None, kappa: float | None = None, stop_gradient: bool = False) -> Loss:
    label = "half the maximum entropy, log(K) / 2" if kappa is None else f"{kappa:g} nats"
    return RegisteredLoss(_avuc_of_batch, name, f"AvUC{'-GS' if stop_gradient else ''} (kappa = {label}).",
                          kappa=kappa, stop_gradient=stop_gradient)


def _build_mmce(name: str, arg: None, bandwidth: float = 0.4, weighted: bool = False) -> Loss:
    return RegisteredLoss(mmce, name, f"MMCE_{'w' if weighted else 'm'} (Laplacian kernel, width {bandwidth:g}).",
                          bandwidth=bandwidth, weighted=weighted)


# ---------------------------------------------------------------------------------------- the table

#: Every loss family, primary then secondary. The secondary defaults are the book's (Karandikar et al. tune T,
#: kappa and beta and do not report the values).
#:
#: :meta hide-value:
REGISTRY: tuple[LossSpec, ...] = (
    LossSpec("ce", "primary", ("ce",), "ce", "cross-entropy", _build_ce),
    LossSpec("fl", "primary", ("fl-<gamma>",), "fl-3", "focal loss, fixed gamma >= 0 (Lin et al. 2017)",
             _gamma_family(FocalLoss, "focal_loss"), focal_gamma=True),
    LossSpec("flsd", "primary", tuple(SCHEDULES), "flsd-53",
             "sample-dependent focal loss (Mukhoti et al. 2020, Sec. 4, App. E)", _build_flsd),
    LossSpec("flsc", "primary", tuple(FLSC_SCHEDULES), "flsc-531",
             "epoch-scheduled focal loss (Mukhoti et al. 2020, App. E)", _build_flsc),
    LossSpec("brier", "primary", ("brier",), "brier", "Brier score (Brier 1950; Mukhoti et al. 2020, Sec. 5.1)",
             _build_brier),
    LossSpec("ls", "primary", ("ls-<alpha>", "ls-<alpha>-fl-<gamma>"), "ls-0.05",
             "label smoothing, alpha / (K - 1) to each other class (Mukhoti et al. 2020, Sec. 5.1); with '-fl-<gamma>' "
             "focal loss on the smoothed targets (Charoenphakdee et al. 2021, Sec. 6.1)", _build_ls),
    LossSpec("mmce", "primary", ("mmce-<lambda>",), "mmce-2",
             "cross-entropy + lambda MMCE_w (Kumar et al. 2018; Mukhoti et al. 2020, Sec. 5.1)", _build_mmce_primary),
    LossSpec("inverse", "primary", ("inverse-fl-<gamma>",), "inverse-fl-2",
             "inverse focal loss (Wang et al. 2021; Zhou et al. 2025, Eq. 3)",
             _gamma_family(InverseFocalLoss, "inverse_focal_loss", prefix="fl-")),
    LossSpec("dual", "primary", ("dual-fl-<gamma>",), "dual-fl-2",
             "dual focal loss as in Tao et al. (2023)'s code",
             _gamma_family(DualFocalLoss, "dual_focal_loss", prefix="fl-")),
    LossSpec("aurc", "primary", ("aurc", "aurc-<key>=<value>,..."), "aurc-kappa=0.8,nu=0.01",
             "selective AURC loss (Zhou et al. 2025, Eq. 17)", _build_aurc),
    LossSpec("sb-ece", "secondary", ("sb-ece",), "sb-ece",
             "SB-ECE_lb,2, M = 15, T = 0.01 (Karandikar et al. 2021, Eq. 12, App. G)", _build_sb_ece),
    LossSpec("s-avuc", "secondary", ("s-avuc", "s-avuc-kappa=<kappa>,t=<T>"), "s-avuc",
             "soft AvUC, kappa = 0.5 and T = 0.1 unless the name sets them (Karandikar et al. 2021, Eq. 15)",
             _build_s_avuc, options=True),
    LossSpec("avuc", "secondary", ("avuc",), "avuc",
             "AvUC, kappa = log(K) / 2 nats (Krishnan & Tickoo 2020; Karandikar et al. 2021, Eq. 13)", _build_avuc),
    LossSpec("avuc-gs", "secondary", ("avuc-gs",), "avuc-gs",
             "AvUC with gradient stopping (Karandikar et al. 2021, App. F)", partial(_build_avuc, stop_gradient=True)),
    LossSpec("mmce", "secondary", ("mmce",), "mmce", "MMCE_m, Laplacian kernel of width 0.4 (Kumar et al. 2018)",
             _build_mmce),
    LossSpec("mmce-w", "secondary", ("mmce-w",), "mmce-w", "MMCE_w, Laplacian kernel of width 0.4 (Kumar et al. 2018)",
             partial(_build_mmce, weighted=True)),
)

_PRIMARY = {s.key: s for s in REGISTRY if s.kind == "primary"}
_SECONDARY = {s.key: s for s in REGISTRY if s.kind == "secondary"}

#: The primary families by name prefix, ``key -> build(name, argument)`` (generated from :data:`REGISTRY`).
#:
#: :meta hide-value:
LOSSES: dict[str, Callable] = {key: spec.build for key, spec in _PRIMARY.items()}

#: The secondary losses by name, ``name -> factory(**params)`` (generated from :data:`REGISTRY`).
#:
#: :meta hide-value:
SECONDARY_LOSSES: dict[str, Callable] = {key: partial(spec.build, key, None) for key, spec in _SECONDARY.items()}


def loss_names() -> str:
    """The accepted primary loss names, for error messages and ``--help`` (generated from :data:`REGISTRY`)."""
    parts = []
    for spec in _PRIMARY.values():
        forms = ", ".join(repr(f) for f in spec.forms)
        parts.append(forms if spec.example in spec.forms else f"{forms} (e.g. {spec.example!r})")
    return ", ".join(parts)


def secondary_loss_names() -> str:
    """The accepted secondary-loss names, for error messages and ``--help``."""
    return ", ".join(repr(k) for k in _SECONDARY)


def _primary_spec(name) -> tuple[LossSpec, str | None]:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"loss name must be a non-empty string; choose from {loss_names()}.")
    prefix, sep, arg = name.strip().lower().partition("-")
    spec = _PRIMARY.get(prefix)
    if spec is None:
        raise ValueError(f"unknown loss {name!r}; choose from {loss_names()}.")
    return spec, (arg if sep else None)


def describe_loss(name: str) -> LossSpec:
    """The :class:`LossSpec` of a primary loss name (``"fl-3"`` -> the ``fl`` family), e.g. for its summary."""
    return _primary_spec(name)[0]


def focal_gamma(name: str) -> float | None:
    """The fixed gamma of a focal-loss name (``"fl-3"`` -> 3.0), None for any other loss of the registry.

    The families whose :class:`LossSpec` has ``focal_gamma`` set are focal loss with one gamma (Lin et al.
    2017), whose model the focal calibration map Psi^gamma of that gamma inverts (Komisarenko & Kull 2024).

    Raises
    ------
    ValueError
        For a name that is not a loss of the registry, as :func:`get_loss` does.
    """
    spec, arg = _primary_spec(name)
    return cast(FocalLoss, spec.build(name, arg)).gamma if spec.focal_gamma else None   # FocalLoss: the one family


def get_loss(name: str, secondary: str | None = None, secondary_weight: float = 1.0) -> Loss:
    """The loss called ``name``, a ``torch.nn.Module`` called as ``loss(logits, targets) -> scalar tensor``
    (the mean over the batch) that pickles.

    Parameters
    ----------
    name : str
        A primary loss name, case-insensitive (the list below).
    secondary : str, optional
        A secondary (calibration) loss added to it, ``name + secondary_weight * secondary`` (Karandikar et
        al. 2021, Sec. 5.1); see :func:`combined_loss`.
    secondary_weight : float
        beta >= 0, the weight of the secondary loss.

    Raises
    ------
    ValueError
        For an unknown family or a malformed parameter, listing the accepted names.
    """
    spec, arg = _primary_spec(name)
    loss = spec.build(name, arg)
    return loss if secondary is None else combined_loss(loss, secondary, secondary_weight)


def get_secondary_loss(name: str, **params) -> Loss:
    """The secondary loss called ``name``, with its parameters overridden by ``params``
    (e.g. ``get_secondary_loss("sb-ece", temperature=1e-3)``); the names are listed in :func:`get_loss`. A family
    whose :class:`LossSpec` has ``options`` also takes them in the name: ``"s-avuc-kappa=0.3,t=0.05"`` is S-AvUC
    with kappa 0.3 and T 0.05 (the keys it leaves out keep :data:`S_AVUC_DEFAULTS`), the form a grid's
    ``secondary`` field and ``--secondary`` take.

    Raises
    ------
    ValueError
        For an unknown name or parameter.
    """
    full = name.strip().lower() if isinstance(name, str) else ""
    key: str | None = full if full in _SECONDARY else None
    arg = None
    if key is None and full:
        key = next((k for k, spec in _SECONDARY.items() if spec.options and full.startswith(k + "-")), None)
        arg = None if key is None else full[len(key) + 1:]
    if key is None:
        raise ValueError(f"unknown secondary loss {name!r}; choose from {secondary_loss_names()}.")
    try:
        loss: Any = _SECONDARY[key].build(full, arg, **params)
    except TypeError as exc:
        raise ValueError(f"secondary loss {key!r}: {exc}; see calib.losses.REGISTRY for its parameters.") from None
    loss.__name__ = key.replace("-", "_")
    loss.secondary_name = full
    return loss


def _registry_listing() -> str:
    lines = ["", "    Notes", "    -----", "    The names, generated from :data:`REGISTRY`.", ""]
    for kind in ("primary", "secondary"):
        lines.append("    Primary losses:" if kind == "primary" else
                     "    Secondary losses (``secondary=``, or :func:`get_secondary_loss`):")
        lines.append("")
        for spec in REGISTRY:
            if spec.kind == kind:
                lines.append(f"    - {', '.join(f'``{f}``' for f in spec.forms)}: {spec.summary};")
        lines.append("")
    return "\n".join(lines)


if get_loss.__doc__ is not None:                  # None under python -OO
    get_loss.__doc__ += _registry_listing()


def combined_loss(primary, secondary, weight: float = 1.0) -> Loss:
    r"""The composite training loss PL + beta * SL (Karandikar et al. 2021, Sec. 5.1; the L2 term is the
    optimiser's weight decay).

    Parameters
    ----------
    primary : str or callable
        A name for :func:`get_loss` (``"ce"``, ``"fl-3"``, ...) or a callable ``(logits, targets) -> scalar``.
    secondary : str or callable
        A name for :func:`get_secondary_loss` (``"sb-ece"``, ``"s-avuc"``, ``"avuc"``, ``"avuc-gs"``,
        ``"mmce"``, ``"mmce-w"``) or a callable.
    weight : float
        beta >= 0.

    Returns
    -------
    CombinedLoss
        ``(logits, targets) -> primary + weight * secondary``, with attributes ``primary``, ``secondary``
        and ``weight``, and a method ``parts(logits, targets)`` returning both terms (for logging).
    """
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not 0 <= weight < float("inf"):
        raise ValueError(f"secondary_weight must be a finite number >= 0; got {weight!r}.")
    weight = float(weight)
    pl = get_loss(primary) if isinstance(primary, str) else primary
    sl = get_secondary_loss(secondary) if isinstance(secondary, str) else secondary
    if not callable(pl) or not callable(sl):
        raise ValueError("primary and secondary must be loss names or callables (logits, targets) -> scalar tensor.")
    pname = primary if isinstance(primary, str) else getattr(primary, "__name__", "primary")
    sname = secondary if isinstance(secondary, str) else getattr(secondary, "__name__", "secondary")
    return CombinedLoss(pl, sl, weight, f"{pname}+{weight:g}*{sname}")
