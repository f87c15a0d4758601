"""Small trainings the chapters run in memory: full-batch gradient descent on the linear toy (Mukhoti et al.
2020, App. B) and a minimal mini-batch loop returning the loss history. A run with a directory, checkpoints and
diagnostics is :mod:`calib.train`.

- :func:`logistic_gradient_descent`: full-batch gradient descent on bias-free logistic regression with
  cross-entropy or focal loss, vectorised over several problems at once.
- :func:`train_classifier`: a minimal loop (full-batch or mini-batch, Adam or SGD, an optional step schedule of
  the learning rate) returning the loss history.
- :func:`resolve_device`: ``"auto"`` to the first CUDA GPU or the CPU (the device rule of every training).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from calib._validate import check_choice, check_int, check_positive, to_numpy

__all__ = ["resolve_device", "logistic_gradient_descent", "train_classifier"]

#: The optimisers of :func:`train_classifier`.
OPTIMIZERS = ("adam", "sgd")


def resolve_device(device: str = "auto") -> torch.device:
    """``"auto"``: the first CUDA GPU if there is one, else the CPU; any other value is passed to torch."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={device!r} is not a torch device ({exc}); use 'auto', 'cpu' or 'cuda'.") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        why = ("this torch is a CPU build" if torch.version.cuda is None else "no CUDA GPU is visible")
        raise ValueError(f"device={device!r}: {why}; use 'cpu' or 'auto', or install a CUDA build of torch.")
    return resolved


# ---------------------------------------------------------------- App. B: the linear model, full batch

def logistic_gradient_descent(x, y, gamma=0.0, lr: float = 0.5, iterations: int = 20000, record_every: int = 100,
                              w0=None) -> dict:
    r"""Full-batch gradient descent on bias-free logistic regression ``p = sigma(w . x)`` with cross-entropy
    (gamma = 0) or focal loss (Mukhoti et al. 2020, App. B), for several problems at once.

    The gradient of the focal loss with respect to the logit z is ``g(p_t, gamma)`` times that of
    cross-entropy, ``sigma(z) - y`` (Prop. 1, exact for any parameter), where ``p_t`` is the probability of
    the true label and ``g`` is :func:`calib.focal.gradient.gradient_factor` (computed from the logit); the step is
    ``w <- w - lr * mean_i g_i (sigma(z_i) - y_i) x_i``.

    Parameters
    ----------
    x : array_like, shape (N, d) or (R, N, d)
        Inputs of one problem or of R problems of the same size (e.g. noise levels x losses).
    y : array_like of {0, 1}, shape (N,) or (R, N)
    gamma : float or array_like, shape (R,)
        Focal parameter of each problem (0: cross-entropy).
    lr : float
        Step size (the paper does not give it).
    iterations : int
    record_every : int
        Record ``w`` every this many iterations (and at 0 and the end).
    w0 : array_like, shape (d,) or (R, d), optional
        Starting weights; zero by default.

    Returns
    -------
    dict
        ``iteration`` (T,), ``w`` (R, T, d) (or (T, d) for one problem), ``weight_norm``, ``logit_norm``
        (the mean ``|z_i|`` over the training points) and ``gradient_norm`` (of the risk) with the same leading
        shape, and ``final_w``.
    """
    from scipy.special import expit

    from calib.focal.numerics import gradient_factor_of_logit

    x = np.asarray(to_numpy(x, "x"), dtype=np.float64)
    single = x.ndim == 2
    if single:
        x = x[None]
    if x.ndim != 3:
        raise ValueError(f"x must have shape (N, d) or (R, N, d); got {x.shape}.")
    r, n, d = x.shape
    y = np.asarray(to_numpy(y, "y"), dtype=np.float64).reshape(r, n)
    if not np.isin(y, (0, 1)).all():
        raise ValueError("y must hold binary labels 0 and 1.")
    gamma = np.broadcast_to(np.asarray(gamma, dtype=np.float64), (r,)).reshape(r, 1)
    lr = check_positive(lr, "lr")
    iterations = check_int(iterations, "iterations")
    record_every = check_int(record_every, "record_every")
    w = np.zeros((r, d)) if w0 is None else np.broadcast_to(np.asarray(w0, dtype=np.float64), (r, d)).copy()
    sign = 2 * y - 1
    steps: set[int] | list[int] = set(range(0, iterations + 1, record_every)) | {iterations}
    recorded, grads = [], []
    for t in range(iterations + 1):
        z = np.matmul(x, w[:, :, None])[:, :, 0]
        dz = gradient_factor_of_logit(sign * z, gamma) * (expit(z) - y)
        grad = np.matmul(dz[:, None, :], x)[:, 0, :] / n
        if t in steps:
            recorded.append(w.copy())
            grads.append(np.linalg.norm(grad, axis=1))
        if t == iterations:
            break
        w -= lr * grad
    steps = sorted(steps)
    ws = np.stack(recorded, axis=1)                                    # (R, T, d)
    logit_norm = np.abs(np.einsum("rnd,rtd->rtn", x, ws)).mean(axis=2)
    out = {"iteration": np.array(steps), "w": ws, "weight_norm": np.linalg.norm(ws, axis=2),
           "logit_norm": logit_norm, "gradient_norm": np.stack(grads, axis=1), "final_w": ws[:, -1]}
    if single:
        out = {k: (v[0] if k != "iteration" else v) for k, v in out.items()}
    return out


# ------------------------------------------------------------------------------------ the minimal loop

def _as_tensor(a, name: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    if isinstance(a, torch.Tensor):
        return a.detach().to(device=device, dtype=dtype)
    return torch.as_tensor(np.ascontiguousarray(to_numpy(a, name)), dtype=dtype, device=device)


def train_classifier(model: torch.nn.Module, x, y, loss, epochs: int, lr: float, batch_size: int | None = None,
                     seed: int = 0, device: str = "cpu", progress: bool = True, optimizer: str = "adam",
                     momentum: float = 0.9, weight_decay: float = 0.0, milestones=(), lr_decay: float = 0.1):
    """Fit ``model`` to (x, y) by minimising ``loss`` for a number of epochs.

    Parameters
    ----------
    model : torch.nn.Module
        Maps x (N, ...) to logits (N, K); trained in place.
    x : array_like or torch.Tensor
        Inputs (converted to float32).
    y : array_like or torch.Tensor
        Integer class labels, shape (N,).
    loss : callable or str
        ``loss(logits, targets) -> scalar tensor`` (mean over the batch), or a name for
        :func:`calib.losses.registry.get_loss`. A loss with a ``set_epoch(epoch, epochs)`` method (an
        epoch-scheduled focal loss, FLSc) is told each epoch (1-based) before it starts, as :mod:`calib.train` does.
    epochs : int
        Passes over the data.
    lr : float
        Learning rate.
    batch_size : int, optional
        Mini-batch size (the data are reshuffled every epoch); None: full-batch, one step per epoch.
    seed : int
        Seed of the shuffling (a private torch generator; the global random state is not touched).
    device : str
        ``"cpu"``, ``"cuda"``, ``"auto"`` (see :func:`resolve_device`).
    progress : bool
        Show a tqdm progress bar over the epochs.
    optimizer : {"adam", "sgd"}
        Adam (default betas) or SGD with ``momentum``.
    momentum, weight_decay : float
        Optimizer settings (momentum only for SGD).
    milestones : sequence of int
        The epochs after which the learning rate is multiplied by ``lr_decay`` (torch's ``MultiStepLR``; e.g.
        :func:`calib.run_config.paper_milestones`); empty: a constant learning rate.
    lr_decay : float
        The factor of each drop.

    Returns
    -------
    model : torch.nn.Module
        The trained model (the same object), in eval mode, on ``device``.
    history : list of float
        The mean training loss of each epoch (averaged over its mini-batches, weighted by their size;
        computed during the epoch, before each step).
    """
    from calib.losses import get_loss

    epochs = check_int(epochs, "epochs")
    lr = check_positive(lr, "lr")
    check_choice(optimizer, "optimizer", OPTIMIZERS)
    loss_fn = get_loss(loss) if isinstance(loss, str) else loss
    if not callable(loss_fn):
        raise ValueError(f"loss must be a callable (logits, targets) -> scalar tensor or a loss name; got {loss!r}.")
    dev = resolve_device(device)
    xt = _as_tensor(x, "x", torch.float32, dev)
    yt = _as_tensor(y, "y", torch.long, dev)
    if yt.ndim != 1 or yt.shape[0] != xt.shape[0]:
        raise ValueError(f"y must have shape ({xt.shape[0]},), one label per row of x; got {tuple(yt.shape)}.")
    n = xt.shape[0]
    if batch_size is not None:
        batch_size = min(check_int(batch_size, "batch_size"), n)
    if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
        raise ValueError(f"milestones must be a sequence of epochs after which the learning rate drops, e.g. (2, 3); "
                         f"got {milestones!r}.")
    milestones = [check_int(m, "milestones") for m in milestones]
    lr_decay = check_positive(lr_decay, "lr_decay")
    model.to(dev).train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt: torch.optim.Optimizer
    if optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    else:
        opt = torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=lr_decay) if milestones else None
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    history: list[float] = []
    epoch_iter: Any = range(epochs)                   # or its tqdm bar
    if progress:
        from tqdm.auto import tqdm

        epoch_iter = tqdm(epoch_iter, desc="training", unit="epoch", leave=False)
    for epoch in epoch_iter:
        if hasattr(loss_fn, "set_epoch"):
            loss_fn.set_epoch(epoch + 1, epochs)
        if batch_size is None:
            batches: Sequence[torch.Tensor | None] = [None]
        else:
            order = torch.randperm(n, generator=gen).to(dev)
            batches = torch.split(order, batch_size)
        total = 0.0
        for idx in batches:
            xb, yb = (xt, yt) if idx is None else (xt[idx], yt[idx])
            opt.zero_grad(set_to_none=True)
            value = loss_fn(model(xb), yb)
            if not torch.isfinite(value):
                raise FloatingPointError(f"the training loss became {value.item()} at epoch {len(history) + 1}; "
                                         f"lower the learning rate.")
            value.backward()
            opt.step()
            total += value.item() * yb.shape[0]
        history.append(total / n)
        if schedule is not None:
            schedule.step()
        if progress:
            epoch_iter.set_postfix(loss=f"{history[-1]:.4f}")
    model.eval()
    return model, history
