"""The epoch of the epoch-scheduled focal loss (FLSc, Mukhoti et al. 2020, App. E) is part of the loss's
state_dict, so that a training loop that checkpoints its loss resumes the schedule (issue 45, item 7)."""

import io

import pytest
import torch

from calib.losses import get_loss


@pytest.mark.parametrize("secondary", [None, "avuc"])
def test_a_checkpointed_flsc_resumes_its_schedule(secondary):
    loss = get_loss("flsc-531", secondary=secondary)
    loss.set_epoch(300, 350)                                       # past both switches: gamma 1
    buffer = io.BytesIO()
    torch.save({"loss": loss.state_dict()}, buffer)                # as a loop checkpoints it with the model
    buffer.seek(0)
    fresh = get_loss("flsc-531", secondary=secondary)
    schedule = fresh if secondary is None else fresh.primary
    assert schedule.gamma == 5.0                                   # a new loss begins the schedule
    fresh.load_state_dict(torch.load(buffer)["loss"])              # weights_only: plain ints travel
    assert (schedule.epoch, schedule.total_epochs, schedule.gamma) == (300, 350, 1.0)
    logits = torch.randn(16, 10, generator=torch.Generator().manual_seed(0))
    targets = torch.arange(16) % 10
    assert torch.equal(fresh(logits, targets), loss(logits, targets))


def test_a_damaged_flsc_state_is_refused_by_name():
    loss = get_loss("flsc-532")
    with pytest.raises(ValueError, match=r"flsc-532: the state's epoch must be an integer >= 1; got 0"):
        loss.load_state_dict({"_extra_state": {"epoch": 0, "total_epochs": 35}})
    with pytest.raises(ValueError, match=r"flsc-532: the loss's state must be \{'epoch': e, 'total_epochs': E\}"):
        loss.load_state_dict({"_extra_state": {"epoch": 3}})
    assert (loss.epoch, loss.total_epochs) == (1, 350)             # left as it was
