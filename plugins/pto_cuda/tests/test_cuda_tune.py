"""The tuner: candidates -> build a variant -> time it -> cache the fastest, keyed by kernel hash
and architecture. Timings here come from a fake timer (the search and the cache are what is
under test, not the simulator's speed); the variants themselves are really built and run on
``cuda_sim`` and checked against numpy."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

from pto_core.codegen.driver import build_module, optimise
from pto_core.errors import PTOError
from pto_core.options import CompileOptions
from pto_cuda import tune
from pto_cuda.tune import BLOCK_SIZE, BlockSize, KernelInfo, TuneCache

ROOT = Path(__file__).resolve().parents[3]


def softmax_module(cols: int = 256):
    spec = importlib.util.spec_from_file_location("pto_bench_softmax", ROOT / "bench" / "_softmax.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.fused_softmax_module(cols, 8, "tune_softmax", "softmax")


def kernel_of(module, arch: str = "sm_90") -> KernelInfo:
    optimised, _ = optimise(module, CompileOptions())
    return KernelInfo(optimised.functions["softmax_tile"], optimised, arch)


def threads_in(build_dir: Path, kernel: str = "softmax_tile") -> int:
    text = (build_dir / "gen" / f"{kernel}.cu").read_text()
    return int(re.search(r"PTO_CUDA_KERNEL\(\w+, \d+, (\d+), \d+\)", text).group(1))


@pytest.fixture
def no_model():
    tune.use_model(None)
    yield
    tune.use_model(None)


FAKE_SECONDS = {256: 2e-3, 64: 3e-3, 128: 1e-3, 512: 0.5e-3}


def test_tuning_on_the_simulator_builds_each_variant_and_caches_the_fastest(tmp_path, monkeypatch,
                                                                           no_model):
    monkeypatch.setenv("PTO_BUILD_DIR", str(tmp_path))
    module = softmax_module()
    tiles = 4
    x = np.random.default_rng(5).standard_normal((8 * tiles, 256)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    checked: list[np.ndarray] = []
    timed: list[int] = []

    def check(out):
        checked.append(out["y"])
        np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-7)
        if len(checked) == 2:                 # as if the second variant computed nonsense
            raise AssertionError("wrong softmax")

    def measure(variant):
        assert threads_in(variant.build_dir) == variant.config.threads   # really that variant
        timed.append(variant.config.threads)
        return FAKE_SECONDS[variant.config.threads]

    before = build_module("cuda_sim", module)                 # untuned: the emitter's default
    assert threads_in(before) == 256
    args = dict(arch="sm_90", budget=3, check=check, measure=measure)
    tensors, scalars = {"x": x, "y": np.zeros_like(x)}, {"num_tiles": tiles}
    choice = tune.tune_module("cuda_sim", module, tensors, scalars, **args)["softmax_tile"]
    # three candidates, the default first, in the space's order (512 would be faster, unseen);
    # the second was rejected by the check
    assert len(checked) == 3 and timed == [256, 128]
    assert (choice.config, choice.source) == (BlockSize(128), "measured")
    assert [(c.threads, t is None) for c, t, _ in choice.timings] == [(256, False), (64, True),
                                                                     (128, False)]

    files = list((tmp_path / "tune" / "sm_90").glob("*.json"))
    assert len(files) == 1
    saved = json.loads(files[0].read_text())
    assert saved["config"] == {"threads": 128} and saved["source"] == "measured"
    assert "wrong softmax" in saved["timings"][1][2]

    # a second tuning run finds the choice in the cache and times nothing
    again = tune.tune_module("cuda_sim", module, tensors, scalars, **args)["softmax_tile"]
    assert (again.config, again.source, len(checked)) == (BlockSize(128), "cache", 3)
    # ... and a later build of the same module uses it (the launch key follows the cache)
    assert build_module("cuda_sim", module) == before and threads_in(before) == 128
    # another architecture has no choice yet
    assert tune.choose(kernel_of(module, "sm_80")).source == "default"


def test_the_model_orders_the_candidates_and_its_choice_is_cached_without_a_device(tmp_path,
                                                                                   no_model):
    cache = TuneCache(tmp_path)
    kernel = kernel_of(softmax_module())
    assert tune.choose(kernel, cache=cache) == tune.Choice(BlockSize(256), "default")
    assert not list(tmp_path.rglob("*.json"))                 # a default is not cached
    seen = []

    def model(k, candidates):
        seen.append((k.name, k.arch, [c.threads for c in candidates]))
        return sorted(candidates, key=lambda c: -c.threads)

    tune.use_model(model)
    assert tune.choose(kernel, cache=cache) == tune.Choice(BlockSize(512), "model")
    assert seen == [("softmax_tile", "sm_90", [256, 64, 128, 512])]
    tune.use_model(None)
    assert tune.choose(kernel, cache=cache).config == BlockSize(512)    # cached like a measured one

    # with a device, the model only orders what is timed, and a measurement replaces its pick
    tune.use_model(model)
    order = []
    choice = tune.tune(kernel, lambda c: order.append(c.threads) or FAKE_SECONDS[c.threads],
                       cache=cache, budget=2)
    assert order == [512, 256] and (choice.config, choice.source) == (BlockSize(512), "measured")
    tune.use_model(None)
    assert tune.choose(kernel, cache=cache).source == "cache"


def test_failing_candidates_are_skipped_and_recorded(tmp_path, no_model):
    cache = TuneCache(tmp_path)
    kernel = kernel_of(softmax_module())

    def timer(c):
        if c.threads == 128:
            raise PTOError("too many registers")
        return FAKE_SECONDS[c.threads]
    choice = tune.tune(kernel, timer, cache=cache, budget=4)
    assert choice.config == BlockSize(512)
    errors = {c.threads: err for c, t, err in choice.timings if t is None}
    assert errors == {128: "PTOError: too many registers"}
    with pytest.raises(PTOError, match="every candidate of kernel 'softmax_tile' failed"):
        tune.tune(kernel, lambda c: 1 / 0, cache=TuneCache(tmp_path / "other"))
    with pytest.raises(PTOError, match="budget must be at least 1"):
        tune.tune(kernel, timer, cache=cache, budget=0)


def test_a_model_that_invents_a_candidate_is_an_error(tmp_path, no_model):
    tune.use_model(lambda k, c: [BlockSize(96)])
    with pytest.raises(PTOError, match="not candidates of kernel 'softmax_tile'"):
        tune.choose(kernel_of(softmax_module()), cache=TuneCache(tmp_path))


def test_unreadable_or_outdated_cache_entries_count_as_absent(tmp_path, no_model):
    cache = TuneCache(tmp_path)
    kernel = kernel_of(softmax_module())
    tune.tune(kernel, lambda c: FAKE_SECONDS[c.threads], cache=cache, budget=3)
    [path] = list(tmp_path.rglob("*.json"))
    assert tune.choose(kernel, cache=cache).config == BlockSize(128)
    path.write_text("{not json")
    assert tune.choose(kernel, cache=cache).source == "default"
    path.write_text(json.dumps({"config": {"threads": 96}, "source": "measured"}))
    assert tune.choose(kernel, cache=cache).source == "default"       # no longer a candidate


def test_the_key_is_the_kernel_and_the_architecture(tmp_path, no_model):
    cache = TuneCache(tmp_path)
    small, wide = kernel_of(softmax_module(256)), kernel_of(softmax_module(512))
    cands = BLOCK_SIZE.candidates(small)
    assert tune.kernel_hash(small, BLOCK_SIZE, cands) == tune.kernel_hash(kernel_of(softmax_module(256)), BLOCK_SIZE, cands)
    assert tune.kernel_hash(small, BLOCK_SIZE, cands) != tune.kernel_hash(wide, BLOCK_SIZE, cands)
    tune.tune(small, lambda c: FAKE_SECONDS[c.threads], cache=cache, budget=3)
    assert tune.choose(small, cache=cache).source == "cache"
    assert tune.choose(wide, cache=cache).source == "default"
    assert cache.path("sm_90", "x") != cache.path("sm_80", "x")
    assert cache.path("../../etc", "x").parent.parent == tmp_path        # no escape by arch


def test_configurations_fixed_in_the_options_win(tmp_path, no_model):
    cache = TuneCache(tmp_path)
    kernel = kernel_of(softmax_module())
    tune.tune(kernel, lambda c: FAKE_SECONDS[c.threads], cache=cache, budget=3)
    opts = tune.with_configs(CompileOptions(), {"softmax_tile": BlockSize(64)})
    assert tune.config_for(kernel.function, kernel.module, opts, "sm_90", cache=cache) == BlockSize(64)
    assert tune.config_for(kernel.function, kernel.module, CompileOptions(), "sm_90",
                           cache=cache) == BlockSize(128)
    opts = tune.with_configs(opts, {"other": BlockSize(32)})
    assert tune.explicit_configs(opts) == {"softmax_tile": BlockSize(64), "other": BlockSize(32)}
