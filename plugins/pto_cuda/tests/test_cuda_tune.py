"""The tuner: candidates (the emitter's KernelConfig knobs) -> build a variant -> time it ->
cache the fastest, keyed by kernel hash and architecture; without a device the performance
model's choice. Timings here come from a fake timer (the search and the cache are what is
under test, not the simulator's speed); the variants themselves are really built and run on
``cuda_sim`` and checked against numpy."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

from pto_core.driver import build_module, optimise
from pto_core.errors import PTOError
from pto_core.options import CompileOptions
from pto_cuda import tune
from pto_cuda.config import KernelConfig
from pto_cuda.tune import KERNEL_CONFIGS, KernelInfo, TuneCache

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

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
    """No performance model for the test (the candidates keep the space's order); the one
    installed before comes back after it."""
    previous = tune.use_model(None)
    yield
    tune.use_model(previous)


def cfg(warps: int) -> KernelConfig:
    """A candidate of the softmax kernel on sm_90: ``warps`` warps, 4 stages (unused: no K loop)."""
    return KernelConfig(warps, None, 4)


#: seconds by warps (the space lists 8 - the default - then 4 and 16)
FAKE_SECONDS = {8: 2e-3, 4: 1e-3, 16: 1.5e-3}


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
        assert threads_in(variant.build_dir) == 32 * variant.config.warps   # really that variant
        timed.append(variant.config.warps)
        return FAKE_SECONDS[variant.config.warps]

    before = build_module("cuda_sim", module)                 # untuned: the emitter's default
    assert threads_in(before) == 256
    args = dict(arch="sm_90", budget=3, check=check, measure=measure)
    tensors, scalars = {"x": x, "y": np.zeros_like(x)}, {"num_tiles": tiles}
    choice = tune.tune_module("cuda_sim", module, tensors, scalars, **args)["softmax_tile"]
    # three candidates, the default first, in the space's order; the second (the fastest by
    # the fake timer) was rejected by the check, so it is not chosen
    assert len(checked) == 3 and timed == [8, 16]
    assert (choice.config, choice.source) == (cfg(16), "measured")
    assert [(c.warps, t is None) for c, t, _ in choice.timings] == [(8, False), (4, True),
                                                                   (16, False)]

    files = list((tmp_path / "tune" / "sm_90").glob("*.json"))
    assert len(files) == 1
    saved = json.loads(files[0].read_text())
    assert saved["config"] == {"warps": 16, "warp_m": None, "stages": 4}
    assert saved["source"] == "measured" and "wrong softmax" in saved["timings"][1][2]

    # a second tuning run finds the choice in the cache and times nothing
    again = tune.tune_module("cuda_sim", module, tensors, scalars, **args)["softmax_tile"]
    assert (again.config, again.source, len(checked)) == (cfg(16), "cache", 3)
    # ... and a later build of the same module uses it (the launch key follows the cache)
    assert build_module("cuda_sim", module) == before and threads_in(before) == 512
    # another architecture has no choice yet
    assert tune.choose(kernel_of(module, "sm_80")).source == "default"


def test_the_model_orders_the_candidates_and_its_choice_is_cached_without_a_device(tmp_path,
                                                                                   no_model):
    cache = TuneCache(tmp_path)
    kernel = kernel_of(softmax_module())
    assert tune.choose(kernel, cache=cache) == tune.Choice(cfg(8), "default")
    assert not list(tmp_path.rglob("*.json"))                 # a default is not cached
    seen = []

    def model(k, candidates):
        seen.append((k.name, k.arch, [c.warps for c in candidates]))
        return sorted(candidates, key=lambda c: -c.warps)

    tune.use_model(model)
    assert tune.choose(kernel, cache=cache) == tune.Choice(cfg(16), "model")
    assert seen == [("softmax_tile", "sm_90", [8, 4, 16])]
    tune.use_model(None)
    assert tune.choose(kernel, cache=cache).config == cfg(16)    # cached like a measured one

    # with a device, the model only orders what is timed, and a measurement replaces its pick
    tune.use_model(model)
    order = []
    choice = tune.tune(kernel, lambda c: order.append(c.warps) or FAKE_SECONDS[c.warps],
                       cache=cache, budget=2)
    assert order == [16, 8] and (choice.config, choice.source) == (cfg(16), "measured")
    tune.use_model(None)
    assert tune.choose(kernel, cache=cache).source == "cache"


def test_the_performance_model_is_the_default_and_picks_when_nothing_is_timed(tmp_path):
    """Code generation asks the installed model: by default the performance model, which ranks
    the candidates by predicted time (pto_cuda.perf.tuning.model_order)."""
    from pto_cuda.perf.tuning import model_order
    assert tune.has_model()
    cache = TuneCache(tmp_path)
    kernel = kernel_of(softmax_module())
    ranked = model_order(kernel, KERNEL_CONFIGS.candidates(kernel))
    assert sorted(ranked, key=str) == sorted(KERNEL_CONFIGS.candidates(kernel), key=str)
    choice = tune.choose(kernel, cache=cache)
    assert (choice.config, choice.source) == (ranked[0], "model")
    [path] = list(tmp_path.rglob("*.json"))
    assert json.loads(path.read_text())["source"] == "model"
    assert tune.config_for(kernel.function, kernel.module, CompileOptions(), "sm_90",
                           cache=cache) == ranked[0]


def test_failing_candidates_are_skipped_and_recorded(tmp_path, no_model):
    cache = TuneCache(tmp_path)
    kernel = kernel_of(softmax_module())

    def timer(c):
        if c.warps == 4:
            raise PTOError("too many registers")
        return FAKE_SECONDS[c.warps]
    choice = tune.tune(kernel, timer, cache=cache, budget=4)
    assert choice.config == cfg(16)
    errors = {c.warps: err for c, t, err in choice.timings if t is None}
    assert errors == {4: "PTOError: too many registers"}
    with pytest.raises(PTOError, match="every candidate of kernel 'softmax_tile' failed"):
        tune.tune(kernel, lambda c: 1 / 0, cache=TuneCache(tmp_path / "other"))
    with pytest.raises(PTOError, match="budget must be at least 1"):
        tune.tune(kernel, timer, cache=cache, budget=0)


def test_a_model_that_invents_a_candidate_is_an_error(tmp_path, no_model):
    tune.use_model(lambda k, c: [KernelConfig(2)])
    with pytest.raises(PTOError, match="not candidates of kernel 'softmax_tile'"):
        tune.choose(kernel_of(softmax_module()), cache=TuneCache(tmp_path))


def test_unreadable_or_outdated_cache_entries_count_as_absent(tmp_path, no_model):
    cache = TuneCache(tmp_path)
    kernel = kernel_of(softmax_module())
    tune.tune(kernel, lambda c: FAKE_SECONDS[c.warps], cache=cache, budget=3)
    [path] = list(tmp_path.rglob("*.json"))
    assert tune.choose(kernel, cache=cache).config == cfg(4)
    path.write_text("{not json")
    assert tune.choose(kernel, cache=cache).source == "default"
    path.write_text(json.dumps({"config": {"warps": 2, "warp_m": None, "stages": 4},
                                "source": "measured"}))
    assert tune.choose(kernel, cache=cache).source == "default"       # no longer a candidate


def test_the_key_is_the_kernel_and_the_architecture(tmp_path, no_model):
    cache = TuneCache(tmp_path)
    small, wide = kernel_of(softmax_module(256)), kernel_of(softmax_module(512))
    cands = KERNEL_CONFIGS.candidates(small)
    assert tune.kernel_hash(small, KERNEL_CONFIGS, cands) == \
        tune.kernel_hash(kernel_of(softmax_module(256)), KERNEL_CONFIGS, cands)
    assert tune.kernel_hash(small, KERNEL_CONFIGS, cands) != \
        tune.kernel_hash(wide, KERNEL_CONFIGS, cands)
    # the program's names or the C names code generation sees: one kernel, one key
    fn = small.function
    assert fn.params[0].name.startswith("pto_v_")
    user = kernel_of(softmax_module(256))
    assert tune.kernel_hash(KernelInfo(fn, small.module, "sm_90"), KERNEL_CONFIGS, cands) == \
        tune.kernel_hash(user, KERNEL_CONFIGS, cands)
    tune.tune(small, lambda c: FAKE_SECONDS[c.warps], cache=cache, budget=3)
    assert tune.choose(small, cache=cache).source == "cache"
    assert tune.choose(wide, cache=cache).source == "default"
    assert cache.path("sm_90", "x") != cache.path("sm_80", "x")
    assert cache.path("../../etc", "x").parent.parent == tmp_path        # no escape by arch


def test_configurations_fixed_in_the_options_win(tmp_path, no_model):
    """One function decides: cuda_config.<kernel> over cuda_config, threads sets the warps,
    the tuner's kernel_configs where neither is given, then the cache."""
    cache = TuneCache(tmp_path)
    kernel = kernel_of(softmax_module())
    fn, m = kernel.function, kernel.module

    def config(*extra):
        return tune.config_for(fn, m, CompileOptions(extra=extra), "sm_90", cache=cache)
    tune.tune(kernel, lambda c: FAKE_SECONDS[c.warps], cache=cache, budget=3)
    assert config() == cfg(4)                                      # the cached choice
    opts = tune.with_configs(CompileOptions(), {"softmax_tile": cfg(16)})
    assert tune.config_for(fn, m, opts, "sm_90", cache=cache) == cfg(16)
    assert config(("cuda_config", "stages=2")) == KernelConfig(None, None, 2)
    assert config(("cuda_config", "warps=2"), ("cuda_config.softmax_tile", "warps=1")) == \
        KernelConfig(1, None, 4)
    assert config(("threads", 128)) == cfg(4)
    assert config(("threads", 64), ("cuda_config", "stages=3")) == KernelConfig(2, None, 3)
    with pytest.raises(PTOError, match="softmax_tile.*cuda_config.*warps"):
        config(("cuda_config", "warps=3"))
    opts = tune.with_configs(opts, {"other": cfg(2)})
    assert tune.explicit_configs(opts) == {"softmax_tile": cfg(16), "other": cfg(2)}
