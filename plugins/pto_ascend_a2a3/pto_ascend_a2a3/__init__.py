"""PTO backend ``ascend_a2a3``: see :mod:`pto_ascend_a2a3.plugin`."""
