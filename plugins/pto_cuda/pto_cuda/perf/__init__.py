"""The CUDA backend's performance model: a card per kernel without a GPU.

* :mod:`.devices`   -- the device table (H100 SXM, A100);
* :mod:`.resources` -- registers, spills and shared memory from ptxas, the SASS from cuobjdump;
* :mod:`.occupancy` -- resident blocks per SM by the CUDA rules, and the limiting resource;
* :mod:`.plan`      -- the executor's launches (which tasks share a grid);
* :mod:`.model`     -- the estimate of one launch and its bound;
* :mod:`.report`    -- the cards of a run (``pto perf --target cuda``);
* :mod:`.tuning`    -- ordering candidate configurations by the model.

The model, its formulas and what it does not see: docs/performance-model.md.
"""
