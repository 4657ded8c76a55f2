"""Choosing a kernel's configuration (tile shape, warps, stages) with the performance model.

:func:`rank` orders candidate configurations by the model's predicted time and drops those the
model rejects (a tile that does not fit in shared memory, say). :func:`choose` picks one and
remembers it on disk, keyed by kernel and architecture, the way an autotuner caches a measured
choice:

* without a device (``measure=None``) the model's best is taken: nothing runs;
* with one, only the model's ``top`` candidates are timed (``measure(config) -> seconds``), in
  the model's order, and the fastest measured is taken. A measured choice is never replaced by
  a model choice; a model choice is replaced by the first measured one.

>>> rank([{"t": 64}, {"t": 128}, {"t": 256}], lambda c: {64: 3.0, 128: 1.0, 256: 2.0}[c["t"]])
[({'t': 128}, 1.0), ({'t': 256}, 2.0), ({'t': 64}, 3.0)]

The CUDA backend's predictor is :func:`model_predictor`: it builds the module a configuration
describes and returns the run's predicted time from :func:`pto_cuda.perf.report.perf_report`.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from pto_core.errors import PTOError
from pto_core.ir import Module
from pto_core.options import CompileOptions

Config = Mapping[str, Any]


@dataclass(frozen=True)
class Choice:
    config: Config
    us: float                 # predicted (source "model") or measured (source "measured")
    source: str               # "model" | "measured" | "cache"
    ranked: tuple = ()        # (config, predicted us) in the model's order; empty from cache


def rank(candidates: Sequence[Config], predict: Callable[[Config], float]
         ) -> list[tuple[Config, float]]:
    """Candidates with their predicted time, fastest first; a candidate whose prediction
    raises :class:`PTOError` (it cannot be built) is left out."""
    scored = []
    for i, c in enumerate(candidates):
        try:
            scored.append((predict(c), i, c))
        except PTOError:
            continue
    scored.sort(key=lambda t: (t[0], t[1]))
    return [(c, us) for us, _, c in scored]


def default_cache() -> Path:
    from pto_core.codegen.driver import build_root
    return build_root() / "cuda" / "tune.json"


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _store(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def choose(key: str, arch: str, candidates: Sequence[Config],
           predict: Callable[[Config], float], *,
           measure: Callable[[Config], float] | None = None, top: int = 3,
           cache: Path | None = None) -> Choice:
    """The configuration of kernel ``key`` on ``arch`` (see the module doc)."""
    path = cache or default_cache()
    slot = f"{key}|{arch}"
    data = _load(path)
    hit = data.get(slot)
    if hit and (measure is None or hit.get("source") == "measured"):
        return Choice(hit["config"], float(hit["us"]), "cache")
    ranked = rank(candidates, predict)
    if not ranked:
        raise PTOError(f"no candidate configuration of {key} can be built for {arch}")
    if measure is None:
        best, us, source = ranked[0][0], ranked[0][1], "model"
    else:
        timed = [(measure(c) * 1e6, i, c) for i, (c, _) in enumerate(ranked[:max(1, top)])]
        us, _, best = min(timed, key=lambda t: (t[0], t[1]))
        source = "measured"
    data[slot] = {"config": dict(best), "us": us, "source": source}
    _store(path, data)
    return Choice(dict(best), us, source, tuple(ranked))


def module_key(module: Module) -> str:
    """A kernel key for :func:`choose`: the hash of the module's `.pto` text."""
    from pto_core.asm import print_module
    return hashlib.sha256(print_module(module).encode()).hexdigest()[:24]


def model_predictor(build: Callable[[Config], Module], scalars: Mapping[str, Any] |
                    Callable[[Config], Mapping[str, Any]], arch: str,
                    device: str | None = None) -> Callable[[Config], float]:
    """``predict(config)``: the predicted microseconds of the run of ``build(config)`` with
    ``scalars`` (or ``scalars(config)``); a configuration ``build`` cannot make, or whose
    kernel does not fit the device, raises :class:`PTOError`."""
    from .report import perf_report

    def predict(config: Config) -> float:
        sc = scalars(config) if callable(scalars) else scalars
        settings = {"arch": arch, "device": device, "threads": config.get("threads")}
        report = perf_report(build(config), CompileOptions(), sc,
                             {k: v for k, v in settings.items() if v is not None})
        return report.run.predicted_us
    return predict
