"""PTO backend ``ascend_a5``: see :mod:`pto_ascend_a5.plugin`."""
