"""Workloads lower to device programs: the same tasks, the same results as the schedule's run."""

from __future__ import annotations

import numpy as np
import pytest

from pto_core import PTOFunctionBuilder, PTOModule
from pto_core.asm import parse, print_module
from pto_core.device.execute import run_device_program
from pto_core.errors import PTOError
from pto_core.workload import Dense, Tensor, parallel_for, sequential, task
from pto_core.workload.device import to_device_program


def kernels() -> PTOModule:
    m = PTOModule("wl_dev")
    (PTOFunctionBuilder("double_rows", module=m).in_core()
     .memref("x", "gm", "f32").memref("y", "gm", "f32")
     .tile("t", 4, 16, "f32").load("t", "x").add("t", "t", "t").store("y", "t").build())
    (PTOFunctionBuilder("exp_add", module=m).in_core()
     .memref("a", "gm", "f32").memref("b", "gm", "f32").memref("c", "gm", "f32")
     .tile("s", 4, 16, "f32").tile("u", 4, 16, "f32")
     .load("s", "a").load("u", "b").add("s", "s", "u").exp("s", "s").store("c", "s").build())
    return m


x, h, z = Tensor("x"), Tensor("h"), Tensor("z")
# h (not given by the caller: an intermediate) = 2x, then z = exp(h + x), row tile by row tile
W = sequential(
    parallel_for(Dense(8), lambda i: task("double_rows", [x.read(i * 4, 0, 4, 16),
                                                          h.write(i * 4, 0, 4, 16)])),
    parallel_for(Dense(8), lambda i: task("exp_add", [h.read(i * 4, 0, 4, 16),
                                                      x.read(i * 4, 0, 4, 16),
                                                      z.write(i * 4, 0, 4, 16)])))


def test_the_lowered_program_has_one_kernel_per_parallel_for_and_an_edge_per_step() -> None:
    xs = np.zeros((32, 16), np.float32)
    m = to_device_program(W, kernels(), {"x": xs, "z": xs}, name="main")
    text = print_module(m)
    assert "    TG_KERNEL @t0, @double_rows, 8\n" in text
    assert "    TG_KERNEL @t8, @exp_add, 8\n" in text
    assert "    TG_DEPEND @t0, @t8, AFTER\n" in text
    assert "    MC_ALLOC %h, 2048, 64 : !pto.memref<gm,32x16xf32>\n" in text
    assert "    MC_BIND @t8, 0, %h[block, 0]\n" in text
    assert parse(text) == m


@pytest.mark.parametrize("target", ["reference", "arm64", "cuda_sim"])
def test_both_paths_give_the_same_results(target: str, need_target) -> None:
    need_target(target)
    xs = np.random.default_rng(1).standard_normal((32, 16)).astype(np.float32)
    mod = kernels()
    z_sched = np.zeros_like(xs)
    W.schedule().compile(target, module=mod).run({"x": xs.copy(), "z": z_sched})
    dev = to_device_program(W, mod, {"x": xs, "z": xs}, name="main")
    run = run_device_program(dev, "main", {"x": xs.copy(), "z": np.zeros_like(xs)}, target=target)
    np.testing.assert_allclose(z_sched, np.exp(3 * xs), rtol=1e-5)
    np.testing.assert_array_equal(run.tensors["z"], z_sched)
    assert len(run.tasks) == 16
    if target == "cuda_sim":        # the graph ran as one executor run: a grid per kernel
        assert list(run.graph_modules) == ["w"]
        return
    first = {k for k, t in enumerate(run.tasks) if t.kernel == "t0"}
    second = {k for k, t in enumerate(run.tasks) if t.kernel == "t8"}
    assert {(a, b) for a in first for b in second} <= run.edges


def test_a_region_that_is_not_a_footprint_is_refused() -> None:
    bad = parallel_for(Dense(2), lambda i: task("double_rows", [x.read(i * 2, 0, 2, 16),
                                                               z.write(i * 2, 0, 2, 16)]))
    mod = kernels()
    xs = np.zeros((4, 16), np.float32)
    with pytest.raises(PTOError, match="is not one footprint"):
        to_device_program(bad, mod, {"x": xs, "z": xs})
