"""The GPU path is device-clean: no host synchronisation inside the rollout or training step
loops, and memory budgets read from the device.

On a GPU every read of a tensor's value on the host (``.item()``, ``.cpu()``, ``.numpy()``,
``bool(t)``, ``float(t)``), every upload of host data (``torch.as_tensor``) and every operation
whose output shape depends on the data (``nonzero``, boolean-mask indexing, ``unique``)
makes the host wait for the device. The tests count these events on a CPU with a torch
function mode and a dispatch mode that see every such call, whatever the device, so they run
without a GPU: a step loop that synchronised once per step would show a count that grows with
the number of steps. A positive control injects one ``.item()`` per step and sees it counted.
The memory budgets are checked against a stand-in CUDA device whose free memory is chosen by
the test.
"""

from __future__ import annotations

import collections
import os
import sys

import numpy as np
import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from opcc_edu.dynamics import ModelSpec, build_ensemble, rollout_values, train_dynamics
from opcc_edu.dynamics import rollout as rollout_module
from opcc_edu.dynamics import training as training_module
from opcc_edu.dynamics.memory import InsufficientMemoryError, available_bytes, training_bytes

torch.set_num_threads(1)

#: Tensor methods that read a value back to the host.
HOST_READS = {
    torch.Tensor.item: "item",
    torch.Tensor.tolist: "tolist",
    torch.Tensor.numpy: "numpy",
    torch.Tensor.cpu: "cpu",
    torch.Tensor.__bool__: "bool",
    torch.Tensor.__float__: "float",
    torch.Tensor.__int__: "int",
    torch.Tensor.__index__: "index",
    torch.Tensor.__array__: "array",
}
#: Functions that copy host data to the device.
UPLOADS = {torch.as_tensor: "as_tensor", torch.tensor: "tensor", torch.from_numpy: "from_numpy"}
#: Operations whose output shape (or Python value) depends on the data.
DATA_DEPENDENT = {"nonzero", "masked_select", "_unique2", "unique_dim", "unique_consecutive", "equal", "is_nonzero"}


def _from_optimizer(frame) -> bool:
    return f"{os.sep}torch{os.sep}optim{os.sep}" in frame.f_code.co_filename


class HostSyncCounter:
    """Counts every call that would make the host wait for a device, by kind."""

    def __init__(self) -> None:
        self.events: collections.Counter[str] = collections.Counter()
        counter = self

        class Functions(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                name = HOST_READS.get(func) or UPLOADS.get(func)
                if name == "item" and _from_optimizer(sys._getframe(1)):
                    # Adam's step counts are host tensors (test_adam_keeps_its_step_counts_on_the_host):
                    # reading one waits for nothing on the device
                    name = "optimizer step count (host tensor)"
                if name is not None:
                    counter.events[name] += 1
                return func(*args, **(kwargs or {}))

        class Dispatch(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = func.overloadpacket.__name__
                if name in DATA_DEPENDENT:
                    counter.events[name] += 1
                elif name == "repeat_interleave" and isinstance(args[1] if len(args) > 1 else None, torch.Tensor):
                    counter.events["repeat_interleave(tensor)"] += 1  # output size read from the repeats
                elif name == "index" and any(
                    isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or [])
                ):
                    counter.events["boolean mask"] += 1
                return func(*args, **(kwargs or {}))

        self._modes = (Functions(), Dispatch())

    @property
    def total(self) -> int:
        return sum(self.events.values())

    def __enter__(self) -> HostSyncCounter:
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)


def make_model(model_type="ff", stochastic=False, prior_scale=0.0, termination="none", m=4, seed=0):
    spec = ModelSpec(
        env_name="maze2d-umaze",
        obs_dim=4,
        act_dim=2,
        ensemble_size=m,
        hidden_sizes=(16, 16),
        model_type=model_type,
        stochastic=stochastic,
        prior_scale=prior_scale,
        normalize=True,
        clip="transitions",
        termination=termination,
    )
    return build_ensemble(spec, seed=seed).eval()


def policies(count=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        layer = nn.Linear(4, 2)
        with torch.no_grad():
            layer.weight.copy_(torch.randn(2, 4, generator=gen))
        out.append(nn.Sequential(layer, nn.Tanh()))
    return out


def rows(n=30, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(n, 4)).astype(np.float32),
        rng.integers(0, 3, n),
        rng.uniform(-1, 1, (n, 2)).astype(np.float32),
    )


def count_rollout(model, horizon, **kwargs):
    obs, pidx, first = rows()
    with HostSyncCounter() as counter:
        _, plan = rollout_values(
            model, policies(), obs, pidx, np.full(len(obs), horizon), first, progress=False, return_plan=True, **kwargs
        )
    return counter, plan


def linear_dataset(n=400, seed=0):
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    act = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    nxt = 0.9 * obs + 0.1 * np.concatenate([act, act], axis=1)
    return {
        "observations": obs,
        "actions": act,
        "next_observations": nxt.astype(np.float32),
        "rewards": nxt[:, 0].astype(np.float32),
        "terminals": np.zeros(n, dtype=np.float32),
    }


# --------------------------------------------------------------------------------------------
# Rollouts
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "model_kwargs,rollout_kwargs",
    [
        ({}, {}),
        ({"stochastic": True, "prior_scale": 1.0}, {"runs": 2}),
        ({"model_type": "ar"}, {}),
        ({"termination": "learned"}, {"mixture": True}),
    ],
    ids=["ff", "stochastic-prior", "autoregressive", "mixture-terminating"],
)
def test_rollout_syncs_once_per_chunk_whatever_the_horizon(model_kwargs, rollout_kwargs):
    model = make_model(**model_kwargs)
    short, plan_short = count_rollout(model, 3, **rollout_kwargs)
    long, plan_long = count_rollout(model, 40, **rollout_kwargs)
    assert plan_short.chunks[0][1] == 3 and plan_long.chunks[0][1] == 40
    # 37 more steps, not one more synchronisation
    assert long.events == short.events
    # the chunk's (steps, M, n, R) curve comes back once: one .cpu() and one .numpy() per chunk
    assert long.events["cpu"] == long.events["numpy"] == len(plan_long.chunks)
    assert not {"item", "bool", "float", "int", "nonzero", "boolean mask"} & set(long.events)


def test_chunks_and_member_blocks_each_sync_once():
    model = make_model(m=6)
    counter, plan = count_rollout(model, 12, chunk_rows=7, member_block=4)
    assert len(plan.chunks) == 5 and plan.member_block == 4
    assert counter.events["cpu"] == len(plan.chunks) * 2  # two member blocks per chunk


def test_the_counter_sees_a_sync_per_step(monkeypatch):
    """Positive control: a model that reads one value back per step is caught."""
    model = make_model()
    step = model.step

    def syncing_step(obs, act, generator=None):
        out = step(obs, act, generator)
        out[1].sum().item()
        return out

    monkeypatch.setattr(model, "step", syncing_step)
    short, _ = count_rollout(model, 3)
    long, _ = count_rollout(model, 40)
    assert long.events["item"] - short.events["item"] == 37


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model_type,termination", [("ff", "learned"), ("ar", "none")])
def test_training_steps_do_not_sync(model_type, termination):
    data = linear_dataset()
    counts = {}
    for steps in (4, 40):
        model = make_model(model_type=model_type, termination=termination, seed=1)
        with HostSyncCounter() as counter:
            history = train_dynamics(model, data, steps=steps, batch_size=32, seed=2, eval_every=steps, progress=False)
        assert history.steps == [steps]
        counts[steps] = counter.events
    params = len(list(model.parameters()))
    # 36 more steps: only the optimizer's host-side step counts are read more often
    assert counts[40] - counts[4] == {"optimizer step count (host tensor)": 36 * params}
    assert counts[4] - counts[40] == {}
    # the one loss record reads the running loss once: float() of a 0-d tensor
    assert counts[40]["float"] == 1


def test_adam_keeps_its_step_counts_on_the_host():
    """Why reading Adam's step counts is no synchronisation: torch keeps them on the host for
    parameters on any device (unless the optimizer is capturable or fused), shown here with
    parameters on the meta device."""
    model = make_model(seed=1).to("meta")
    optimizer = training_module._adam_with_weight_decay(model, 1e-3, 5e-5)
    for param in model.parameters():
        param.grad = torch.ones_like(param)
    optimizer.step()
    steps = [optimizer.state[p]["step"] for p in model.parameters()]
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert {s.device.type for s in steps} == {"cpu"} and len(steps) == len(list(model.parameters()))


def test_training_syncs_once_per_loss_record():
    data = linear_dataset()
    counts = []
    for records in (1, 4):
        model = make_model(seed=1)
        with HostSyncCounter() as counter:
            train_dynamics(model, data, steps=40, batch_size=32, seed=2, eval_every=40 // records, progress=False)
        counts.append(counter.events)
    assert counts[1]["float"] - counts[0]["float"] == 3
    assert counts[1]["cpu"] - counts[0]["cpu"] == 3  # the held-out error of each record


# --------------------------------------------------------------------------------------------
# Memory budgets come from the device
# --------------------------------------------------------------------------------------------
@pytest.fixture
def fake_cuda(monkeypatch):
    """A stand-in CUDA device whose free memory the test sets (nothing is allocated on it)."""
    state = {"free": 0}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (state["free"], 80 * 2**30))
    return state


def test_rollout_chunks_follow_the_free_device_memory(fake_cuda):
    model = make_model(m=100)
    cuda = torch.device("cuda")
    shapes = {}
    for free in (2**30, 2 * 2**30, 64 * 2**30):
        fake_cuda["free"] = free
        shapes[free] = rollout_module._chunk_shape(model, 10**9, 50, None, cuda, mixture=False)
    # half the free memory, capped at DEFAULT_GPU_BUDGET: 1 GiB free -> a 512 MiB budget
    assert shapes[2 * 2**30][0] == pytest.approx(2 * shapes[2**30][0], abs=1)
    cap = rollout_module.DEFAULT_GPU_BUDGET
    assert shapes[64 * 2**30][0] == pytest.approx(shapes[2**30][0] * cap / 2**29, rel=1e-3)
    assert all(block == 100 for _, block in shapes.values())  # all members in one call on a GPU


def test_training_refuses_what_the_device_cannot_hold(fake_cuda):
    data = linear_dataset()
    model = make_model(m=4)
    need = training_bytes(model.spec, len(data["observations"]), 32)
    fake_cuda["free"] = need - 1
    assert available_bytes(torch.device("cuda")) == need - 1
    with pytest.raises(InsufficientMemoryError, match="on cuda"):
        train_dynamics(model, data, steps=1, batch_size=32, device="cuda", progress=False)
    assert next(model.parameters()).device.type == "cpu"  # refused before anything moved
