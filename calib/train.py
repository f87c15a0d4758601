"""Training a classifier: a minimal loop (full-batch or mini-batch, Adam or SGD) with a per-epoch loss history.

This is the first version; checkpoints, resume and per-epoch diagnostics come with the training issue.
"""

from __future__ import annotations

import numpy as np
import torch

from calib._validate import check_choice, check_int, check_positive, to_numpy

__all__ = ["resolve_device", "train_classifier"]

OPTIMIZERS = ("adam", "sgd")


def resolve_device(device: str = "auto") -> torch.device:
    """``"auto"``: the first CUDA GPU if there is one, else the CPU; any other value is passed to torch."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={device!r} is not a torch device ({exc}); use 'auto', 'cpu' or 'cuda'.") from None


def _as_tensor(a, name: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    if isinstance(a, torch.Tensor):
        return a.detach().to(device=device, dtype=dtype)
    return torch.as_tensor(np.ascontiguousarray(to_numpy(a, name)), dtype=dtype, device=device)


def train_classifier(model: torch.nn.Module, x, y, loss, epochs: int, lr: float, batch_size: int | None = None,
                     seed: int = 0, device: str = "cpu", progress: bool = True, optimizer: str = "adam",
                     momentum: float = 0.9, weight_decay: float = 0.0):
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
        :func:`calib.losses.get_loss`.
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
    model.to(dev).train()
    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    else:
        opt = torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    history: list[float] = []
    epoch_iter = range(epochs)
    if progress:
        from tqdm.auto import tqdm

        epoch_iter = tqdm(epoch_iter, desc="training", unit="epoch", leave=False)
    for _ in epoch_iter:
        if batch_size is None:
            batches = [None]
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
        if progress:
            epoch_iter.set_postfix(loss=f"{history[-1]:.4f}")
    model.eval()
    return model, history
