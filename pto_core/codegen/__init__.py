"""Code generation shared by the backends.

* :mod:`pto_core.codegen.cstyle` — the C-family kernel renderer that backends subclass;
* :mod:`pto_core.codegen.driver` — turns a module into files (kernels through the backend hooks,
  the orchestration C, the runtime binding) and launches a built module.
"""
