"""Checkpoints of fits with minibatches and validation (`difsim._fit._loop`,
`difsim._fit._monitor`): a fit killed after a checkpoint and resumed ends bit for bit as
the same fit run without interruption — parameters, loss history and the record of
evaluations — with early stopping and the minibatches' keys (from the seed and the step)
carried over; a checkpoint of another split is refused.

Data are the closed form u0 exp(-k c t) of exponential decay in eight experiments."""

import numpy as np
import pytest
import xarray as xr

import difsim as ds
import difsim._fit._loop as loop

E, K = 8, 0.8
T = np.linspace(0.0, 2.0, 6)
RNG = np.random.default_rng(3)
U0, C = RNG.uniform(0.5, 2.0, E), RNG.uniform(0.5, 1.5, E)
DATA = xr.Dataset(
    {"u": (("experiment", "time"), U0[:, None] * np.exp(-K * C[:, None] * T)
           + 0.01 * RNG.standard_normal((E, T.size))),
     "state.u": ("experiment", U0), "c": ("experiment", C)},
    coords={"time": T, "experiment": [f"run{i}" for i in range(E)]},
)  # fmt: skip
SETTINGS = dict(optimizer="adam", learning_rate=0.05, batch_size=3, validation=0.25, seed=4,
                rtol=1e-8, atol=1e-8, adjoint="forward", progress=False)  # fmt: skip


class Decay(ds.Model):
    k: float = 0.3
    c: float = 1.0
    state = ds.State(u=1.0)

    def rhs(self, t, s):
        return {"u": -self.k * self.c * s.u}


def killed_after(saves: int, monkeypatch):
    """Make the fit stop (as a kill would) just after its `saves`-th checkpoint."""
    original, count = loop.save_checkpoint, [0]

    def save(*args, **kwargs):
        original(*args, **kwargs)
        count[0] += 1
        if count[0] == saves:
            raise KeyboardInterrupt

    monkeypatch.setattr(loop, "save_checkpoint", save)


def same(a, b) -> None:
    assert a.parameters["k"] == b.parameters["k"]  # bit for bit
    np.testing.assert_array_equal(a.loss_history, b.loss_history)
    np.testing.assert_array_equal(a.monitor_history, b.monitor_history)
    assert (a.status, a.num_steps, a.message) == (b.status, b.num_steps, b.message)


@pytest.mark.parametrize("patience", [None, 2])
def test_resumed_fit_is_the_uninterrupted_one(tmp_path, monkeypatch, patience):
    whole = ds.fit(Decay(), DATA, ["k"], steps=300, patience=patience, **SETTINGS)
    assert whole.monitor_kind == "validation"
    if patience is None:
        assert whole.num_steps == 300 and whole.monitor_history.shape == (6, 2)
        assert whole.parameters["k"] == pytest.approx(K, abs=0.02)
    else:  # it stopped early: the resumed one must stop at the same evaluation
        assert whole.num_steps < 300 and "stopped early" in whole.message
    path = tmp_path / "fit.ckpt"
    with monkeypatch.context() as m:
        killed_after(2, m)
        with pytest.raises(KeyboardInterrupt):
            ds.fit(Decay(), DATA, ["k"], steps=300, patience=patience, checkpoint=path,
                   **SETTINGS)  # fmt: skip
    resumed = ds.fit(Decay(), DATA, ["k"], steps=300, patience=patience, checkpoint=path,
                     **SETTINGS)  # fmt: skip
    same(resumed, whole)
    # Once more from the final checkpoint: nothing left to run, the same result.
    same(ds.fit(Decay(), DATA, ["k"], steps=300, patience=patience, checkpoint=path,
                **SETTINGS), whole)  # fmt: skip
    if patience is None:  # without the validation split (another training set): refused
        plain = {k: v for k, v in SETTINGS.items() if k != "validation"}
        with pytest.raises(ValueError, match="belongs to a different fit") as info:
            ds.fit(Decay(), DATA, ["k"], steps=300, checkpoint=path, **plain)
        assert str(path) in str(info.value)
