"""ClippedStep: the same maths as clip_grad_norm_ + a fused Adam/AdamW step, bit for bit, and only where it can be."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch as th

from sb3_ppo_ext.ppo import optim
from sb3_ppo_ext.ppo.optim import ClippedStep

#: The tests that build ``Adam(fused=True)`` on the CPU: torch has CPU fused Adam kernels since 2.4; before, the
#: constructor refuses them, and PPO steps through torch's default kernel (``test_without_cpu_fused_kernels...``).
needs_cpu_fused_adam = pytest.mark.skipif(
    "cpu" not in optim.fused_kernel_devices(), reason="no fused Adam kernel for the CPU in this torch"
)


def _network() -> th.nn.Module:
    th.manual_seed(0)
    return th.nn.Sequential(th.nn.Linear(5, 16), th.nn.Tanh(), th.nn.Linear(16, 3))


def _backward(network: th.nn.Module, seed: int) -> None:
    generator = th.Generator().manual_seed(seed)
    inputs = th.randn(32, 5, generator=generator) * 3
    for parameter in network.parameters():
        parameter.grad = None
    network(inputs).pow(2).sum().backward()


@needs_cpu_fused_adam
@pytest.mark.parametrize(
    "optimizer_class, kwargs",
    [
        (th.optim.Adam, dict(lr=1e-2)),
        (th.optim.Adam, dict(lr=3e-3, weight_decay=0.1, amsgrad=True, betas=(0.8, 0.95), eps=1e-6)),
        (th.optim.Adam, dict(lr=1e-2, maximize=True)),
        (th.optim.AdamW, dict(lr=1e-2, weight_decay=0.05)),
    ],
)
@pytest.mark.parametrize("max_norm", [0.5, 1e6])  # clipping active / inactive
def test_steps_equal_clip_grad_norm_and_fused_step_exactly(optimizer_class, kwargs, max_norm):
    reference = _network()
    ours = copy.deepcopy(reference)
    reference_optimizer = optimizer_class(reference.parameters(), fused=True, **kwargs)
    our_optimizer = optimizer_class(ours.parameters(), fused=True, **kwargs)
    parameters = list(ours.parameters())
    assert ClippedStep.supports(our_optimizer, parameters)
    step = ClippedStep(our_optimizer, parameters, max_norm)
    for seed in range(6):
        if seed == 3:
            for group in (*reference_optimizer.param_groups, *our_optimizer.param_groups):
                group["lr"] = group["lr"] / 3  # a schedule or the adaptive rate changes it between steps
        _backward(reference, seed)
        th.nn.utils.clip_grad_norm_(reference.parameters(), max_norm)
        reference_optimizer.step()
        _backward(ours, seed)
        step.step()
        for expected, actual in zip(reference.parameters(), ours.parameters(), strict=True):
            assert th.equal(expected, actual)
            assert th.equal(expected.grad, actual.grad)  # clipped in place, as clip_grad_norm_ leaves them
    assert step._groups is not None  # the direct path ran after the first step
    for expected, actual in zip(reference_optimizer.state.values(), our_optimizer.state.values(), strict=True):
        for key in expected:
            assert th.equal(expected[key], actual[key]), key


@needs_cpu_fused_adam
def test_a_parameter_without_gradient_steps_through_torch():
    reference = _network()
    ours = copy.deepcopy(reference)
    reference_optimizer = th.optim.Adam(reference.parameters(), lr=1e-2, fused=True)
    our_optimizer = th.optim.Adam(ours.parameters(), lr=1e-2, fused=True)
    step = ClippedStep(our_optimizer, list(ours.parameters()), 0.5)
    for seed in range(3):
        for network, optimizer in ((reference, reference_optimizer), (ours, None)):
            _backward(network, seed)
            if seed == 2:
                network[2].bias.grad = None  # this parameter takes no step, as in torch
            if optimizer is not None:
                th.nn.utils.clip_grad_norm_(network.parameters(), 0.5)
                optimizer.step()
        step.step()
    for expected, actual in zip(reference.parameters(), ours.parameters(), strict=True):
        assert th.equal(expected, actual)


@needs_cpu_fused_adam
def test_supports_only_what_it_mirrors():
    network = _network()
    parameters = list(network.parameters())
    assert ClippedStep.supports(th.optim.Adam(parameters, fused=True), parameters)
    assert not ClippedStep.supports(th.optim.Adam(parameters), parameters)  # not fused: other kernels
    assert not ClippedStep.supports(th.optim.Adam(parameters, foreach=True), parameters)
    assert not ClippedStep.supports(th.optim.SGD(parameters, lr=0.1), parameters)
    assert not ClippedStep.supports(th.optim.Adam(parameters[:2], fused=True), parameters)  # clips more than it steps
    assert not ClippedStep.supports(th.optim.Adam(parameters, lr=th.tensor(1e-3), fused=True), parameters)
    hooked = th.optim.Adam(parameters, fused=True)
    hooked.register_step_pre_hook(lambda optimizer, args, kwargs: None)
    assert not ClippedStep.supports(hooked, parameters)  # user hooks run through torch's step
    from torch.optim.optimizer import register_optimizer_step_post_hook

    handle = register_optimizer_step_post_hook(lambda optimizer, args, kwargs: None)
    try:
        assert not ClippedStep.supports(th.optim.Adam(parameters, fused=True), parameters)
    finally:
        handle.remove()


def test_anything_else_steps_through_torch():
    reference = _network()
    ours = copy.deepcopy(reference)
    reference_optimizer = th.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    our_optimizer = th.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    step = ClippedStep(our_optimizer, list(ours.parameters()), 0.5)
    assert not step.direct
    for seed in range(3):
        _backward(reference, seed)
        th.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
        reference_optimizer.step()
        step.zero_grad()
        _backward(ours, seed)
        step.step()
    for expected, actual in zip(reference.parameters(), ours.parameters(), strict=True):
        assert th.equal(expected, actual)
    step.zero_grad()
    assert all(parameter.grad is None for parameter in ours.parameters())


@needs_cpu_fused_adam
def test_fused_adam_only_inside_the_block_and_only_where_the_user_chose_nothing():
    from sb3_ppo_ext.ppo.optim import fused_adam

    network = _network()
    first, second = list(network[0].parameters()), list(network[2].parameters())
    optimizer = th.optim.Adam([{"params": first}, {"params": second, "foreach": True}], lr=1e-3)
    with fused_adam(optimizer):
        assert optimizer.param_groups[0]["fused"] is True
        assert not optimizer.param_groups[1]["fused"]  # the user asked for foreach: left alone
    assert [group["fused"] for group in optimizer.param_groups] == [None, None]  # restored: saved states stay plain
    for_loop = th.optim.Adam(network.parameters(), lr=1e-3, fused=False)
    with fused_adam(for_loop):
        assert for_loop.param_groups[0]["fused"] is False  # the user asked for the for-loop kernel (SB3's): left alone
    sgd = th.optim.SGD(network.parameters(), lr=0.1)
    with fused_adam(sgd):
        assert "fused" not in sgd.param_groups[0] or not sgd.param_groups[0]["fused"]


@needs_cpu_fused_adam
def test_a_changed_private_kernel_falls_back_to_torch_with_one_warning(monkeypatch):
    """torch's private fused kernels may change between versions: the direct path is checked against torch's own step
    once per device type, and where it fails (here: a kernel that no longer takes our arguments) every step goes
    through torch, with one warning instead of a TypeError."""

    def changed_kernel(*args, new_required_argument, **kwargs):
        raise AssertionError("never reached: the call fails on its arguments")

    class TorchWithAChangedKernel:  # torch as optim.py sees it; torch.optim's own Adam calls the real kernel
        _fused_adam_ = staticmethod(changed_kernel)

        def __getattr__(self, name):
            return getattr(th, name)

    monkeypatch.setattr(optim, "th", TorchWithAChangedKernel())
    optim.direct_path_works.cache_clear()
    try:
        reference = _network()
        ours = copy.deepcopy(reference)
        reference_optimizer = th.optim.Adam(reference.parameters(), lr=1e-2, fused=True)
        our_optimizer = th.optim.Adam(ours.parameters(), lr=1e-2, fused=True)
        assert ClippedStep.supports(our_optimizer, list(ours.parameters()))  # its conditions hold; the kernel does not
        with pytest.warns(RuntimeWarning, match="private fused Adam kernels differ .*TypeError"):
            step = ClippedStep(our_optimizer, list(ours.parameters()), 0.5)
        assert not step.direct
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # warned once per process and device type
            ClippedStep(our_optimizer, list(ours.parameters()), 0.5)
        for seed in range(3):
            _backward(reference, seed)
            th.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
            reference_optimizer.step()
            _backward(ours, seed)
            step.step()
        for expected, actual in zip(reference.parameters(), ours.parameters(), strict=True):
            assert th.equal(expected, actual)
    finally:
        optim.direct_path_works.cache_clear()


@needs_cpu_fused_adam
def test_the_direct_path_is_checked_against_torch_on_this_torch():
    optim.direct_path_works.cache_clear()
    assert optim.direct_path_works("cpu")


def test_without_cpu_fused_kernels_ppo_steps_through_torchs_default_kernel(monkeypatch):
    """A torch with no fused Adam kernel for the device (the CPU before torch 2.4): no group is switched to fused, no
    direct path is taken, and PPO's updates are those of torch's default Adam kernel, bit for bit."""
    from sb3_ppo_ext import PPO

    def train(**policy_kwargs):
        model = PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=16, n_epochs=2, seed=0, policy_kwargs=policy_kwargs)
        model.learn(128)
        return model

    sb3_kernel = train(net_arch=[16], optimizer_kwargs=dict(eps=1e-5, fused=False))  # eps: SB3's default for PPO
    monkeypatch.setattr(optim, "_fused_devices", lambda: ["cuda"])
    network = _network()
    optimizer = th.optim.Adam(network.parameters(), lr=1e-3)
    with optim.fused_adam(optimizer):
        assert optimizer.param_groups[0]["fused"] is None
    without_kernels = train(net_arch=[16])
    assert not any(group.get("fused") for group in without_kernels.policy.optimizer.param_groups)
    for expected, actual in zip(sb3_kernel.policy.parameters(), without_kernels.policy.parameters(), strict=True):
        assert th.equal(expected, actual)
