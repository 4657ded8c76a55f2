"""Code generation shared by the backends.

* :mod:`pto_core.codegen.cstyle` — the C-family kernel renderer that backends subclass;
* :mod:`pto_core.codegen.orchestration` — orchestration functions as C against the runtime API;
* :mod:`pto_core.codegen.host` — the host program and the runtime binding around them.

The pipeline that runs the passes, these generators, SCons and the launch is
:mod:`pto_core.driver`, one layer above.
"""
