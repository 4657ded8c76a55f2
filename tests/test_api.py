"""The Python API: ``pto_core.compile(...)`` called with numpy arrays and DLPack tensors, and
seed 003's runtime layer (BinaryCompiler, Graph with explicit edges, DeviceRunner)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import pto_core
from pto_core import (BinaryCompiler, DeviceRunner, Graph, InOut, Input, Output, PTOError,
                      plugins)
from pto_core import driver
from pto_core.reference import run_module

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))
import rowmax  # noqa: E402

pytestmark = pytest.mark.skipif(
    "arm64" not in [b.name for b in plugins.list_backends()],
    reason="the arm64 backend is not installed (pip install -e plugins/pto_arm64)")


@pytest.fixture(scope="module")
def kernel():
    return pto_core.compile(rowmax.build_module(), target="arm64")


def reference(x: np.ndarray, tiles: int) -> np.ndarray:
    return run_module(rowmax.build_module(), {"input": x}, {"num_tiles": tiles})["output"]


def random(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


class DLPackOnly:
    """A tensor that is not a numpy array and offers only the DLPack protocol."""

    def __init__(self, array: np.ndarray, device=(1, 0)) -> None:
        self._a, self._device = array, device

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._device


# ------------------------------------------------------------------ compile and call

def test_a_compiled_kernel_allocates_what_is_not_given_and_matches_the_reference(kernel):
    x = random((40, 128))
    out = kernel(x, num_tiles=5)
    assert set(out) == {"input", "output"} and out["input"] is x
    assert out["output"].shape == (40, 1)
    np.testing.assert_array_equal(out["output"], reference(x, 5))
    # positional and keyword arguments are the entry function's parameters
    assert kernel.params == ("input", "output", "num_tiles")


def test_host_memory_kernels_write_into_the_callers_arrays_without_a_copy(kernel, monkeypatch):
    big_x, big_y = random((64, 256)), np.full((64, 4), -7.0, np.float32)
    x, y = big_x[:, :128], big_y[:, 2:3]                 # row-strided views (ld 256 and 4)
    b = kernel.binary
    direct = driver.run_built("arm64", b.module, b.build_dir, {"input": x, "output": y},
                              {"num_tiles": 8}, optimised=True, in_place=True)
    assert direct["output"] is y and direct["input"] is x   # the kernels used the caller's memory
    np.testing.assert_array_equal(y, reference(np.ascontiguousarray(x), 8))
    y[:] = 0

    def no_copy(*a, **kw):
        raise AssertionError("results were copied back")
    monkeypatch.setattr(np, "copyto", no_copy)
    out = kernel(input=x, output=y, num_tiles=8)
    assert out["output"] is y
    np.testing.assert_array_equal(y, reference(np.ascontiguousarray(x), 8))
    assert (big_y[:, [0, 1, 3]] == -7.0).all()           # nothing outside the view was touched


def test_arrays_the_kernels_cannot_use_directly_still_receive_the_results(kernel):
    x = np.asfortranarray(random((16, 128)))
    y = np.lib.stride_tricks.as_strided(np.zeros(32, np.float32), (16, 1), (8, 8))  # elements apart
    out = kernel(x, y, 2)
    assert out["output"] is y
    np.testing.assert_array_equal(y, reference(np.ascontiguousarray(x), 2))


def test_dlpack_tensors_are_used_in_place(kernel):
    x, y = random((24, 128)), np.zeros((24, 1), np.float32)
    out = kernel(DLPackOnly(x), DLPackOnly(y), num_tiles=3)
    assert isinstance(out["output"], DLPackOnly)
    np.testing.assert_array_equal(y, reference(x, 3))


def test_torch_tensors_are_used_in_place(kernel):
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch)")
    x, y = torch.randn(32, 128), torch.zeros(32, 1)
    ptr = y.data_ptr()
    out = kernel(x, y, num_tiles=4)
    assert out["output"] is y and y.data_ptr() == ptr
    assert torch.equal(y, x.amax(dim=1, keepdim=True))


def test_two_modules_of_one_name_stay_two_kernels():
    # the same module name, two IRs (8- and 16-row tiles): each keeps its own build
    eight, sixteen = (pto_core.compile(rowmax.build_module(tile_rows=r), "arm64") for r in (8, 16))
    assert eight.binary.module.name == sixteen.binary.module.name
    assert eight.binary.build_dir != sixteen.binary.build_dir
    x = random((32, 128), 1)
    for _ in range(2):
        np.testing.assert_array_equal(eight(x, num_tiles=4)["output"], reference(x, 4))
        np.testing.assert_array_equal(sixteen(x, num_tiles=2)["output"], reference(x, 4))


@pytest.mark.parametrize("call, message", [
    (lambda k: k(np.zeros((8, 128)), num_tiles=1), "has dtype float64, the kernel expects float32"),
    (lambda k: k(np.zeros(128, np.float32), num_tiles=1), "must be 2-D"),
    (lambda k: k(np.zeros((8, 128), np.float32)), "needs the scalar(s) num_tiles"),
    (lambda k: k(num_tiles=1, tiles=2), "has no parameter 'tiles'"),
    (lambda k: k(None, None, 1, 2), "takes 3 arguments"),
    (lambda k: k(np.zeros((8, 128), np.float32), input=None, num_tiles=1), "'input' given twice"),
    (lambda k: k(DLPackOnly(np.zeros((8, 128), np.float32), (2, 0)), num_tiles=1),
     "is on DLPack device 2:0"),
])
def test_bad_calls_are_refused_with_the_reason(kernel, call, message):
    with pytest.raises(PTOError) as e:
        call(kernel)
    assert message in str(e.value)


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("output", [
    lambda: _read_only(np.zeros((8, 1), np.float32)),
    lambda: np.broadcast_to(np.zeros((1, 1), np.float32), (8, 1)),
    lambda: np.frombuffer(bytes(32), np.float32).reshape(8, 1),
])
def test_a_tensor_the_kernel_writes_given_read_only_is_refused(kernel, output):
    """Before: the run wrote elsewhere and the call returned the caller's array unchanged
    (zeros where rowmax of ones is 1), saying nothing."""
    x = np.ones((8, 128), np.float32)
    with pytest.raises(PTOError, match="tensor 'output' is written by 'rowmax_rows', but the "
                                       "array given for it is read-only"):
        kernel(x, output(), num_tiles=1)
    assert kernel(_read_only(x), num_tiles=1)["output"].ravel().tolist() == [1.0] * 8


# ------------------------------------------------------------------ Graph, DeviceRunner

@pytest.fixture(scope="module")
def binary():
    return BinaryCompiler().compile("arm64", rowmax.build_module())


def runner(**kw) -> DeviceRunner:
    r = DeviceRunner("arm64", **kw)
    r.init()
    return r


def test_binary_names_its_kernels(binary):
    assert binary.kernels == ("rowmax",) and binary.func_id("rowmax") == 0
    assert binary.library.is_file() and binary.buffer_bytes["rowmax"] > 0
    with pytest.raises(PTOError, match="no kernel 'rowsum'"):
        binary.func_id("rowsum")


def test_a_graph_of_binary_kernels_matches_the_reference(binary):
    x, m = random((48, 128), 3), np.zeros((48, 1), np.float32)
    g = Graph(binary)
    for i in reversed(range(6)):                     # offsets in whole tiles, as in a CALL
        g.add_task(args=[(x, i, 0), (m, i, 0)], func_id="rowmax" if i % 2 else 0)
    r = runner(num_workers=3)
    assert r.copy_to_device(g) is g
    dump = r.run(g, record_graph=True)
    np.testing.assert_array_equal(r.copy_from_device(m), reference(x, 6))
    assert r.stats.tasks_completed == 6 and r.stats.edges == 0 and dump.count("rowmax") >= 6


def test_explicit_edges_order_tasks_that_share_no_tensor():
    order: list[int] = []
    lock = threading.Lock()

    def record(args):
        with lock:
            order.append(args[0])
    g = Graph()
    ids = [g.add_task(args=[k], func_id=record) for k in range(24)]
    for a, b in zip(ids, ids[1:]):
        g.add_successor(from_task=a, to_task=b)
    r = runner(num_workers=4)
    r.run(g)
    assert order == list(range(24))
    assert r.stats.edges == 23 and g.edges[0] == (0, 1)


def test_python_kernels_see_their_regions_and_edges_from_regions_are_found():
    x = np.zeros((4, 8), np.float32)

    def fill(args):
        args.array(0, 4, 8)[:] = 1.5

    def double(args):
        a = args.array(0, 4, 8)
        a *= 2
    g = Graph()
    g.add_task(args=[Output(x)], func_id=fill)
    g.add_task(args=[InOut(x)], func_id=double)
    r = runner()
    r.run(g)
    assert (x == 3.0).all() and r.stats.edges == 1


def test_a_failing_task_is_named():
    g = Graph()
    g.add_task(func_id=lambda args: 0, name="fine")
    g.add_task(args=[Input(np.zeros((2, 2), np.float32))], func_id=lambda args: 3, name="broken")
    with pytest.raises(PTOError, match=r"task 1 'broken' failed \(kernel returned 3\)"):
        runner().run(g)


@pytest.mark.parametrize("build, message", [
    (lambda g: g.add_successor(1, 0), "a predecessor must be added before its successor"),
    (lambda g: g.add_successor(0, 5), "no task 5"),
    (lambda g: g.add_task(args=[np.zeros((8, 128), np.float32)], func_id="rowmax"),
     "needs 2 arguments (input, output), got 1"),
    (lambda g: g.add_task(args=[1, 2], func_id=0), "tensor parameter 'input' needs an array"),
    (lambda g: g.add_task(func_id=7), "func_id 7 out of range"),
    (lambda g: Graph().add_task(func_id=0), "this Graph has none"),
    (lambda g: g.add_task(args=[np.zeros((2, 2))], func_id=lambda a: 0), "Input, Output or InOut"),
])
def test_graph_misuse_is_refused_with_the_reason(binary, build, message):
    g = Graph(binary)
    g.add_task(func_id=lambda args: 0)
    g.add_task(func_id=lambda args: 0)
    with pytest.raises(PTOError) as e:
        build(g)
    assert message in str(e.value)


def test_device_runner_refuses_backends_whose_executor_launches_kernels():
    if "cuda_sim" not in [b.name for b in plugins.list_backends()]:
        pytest.skip("the cuda_sim backend is not installed (pip install -e plugins/pto_cuda)")
    with pytest.raises(PTOError, match="launches its kernels through its own executor"):
        DeviceRunner("cuda_sim").init()
    with pytest.raises(PTOError, match="init\\(\\) must be called first"):
        DeviceRunner("arm64").run(Graph())
