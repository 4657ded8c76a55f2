"""Backend ``ascend_a5``: the shared Ascend backend bound to the A5 architecture record.

>>> [b.name for b in plugin.backends]
['ascend_a5']
"""

from pto_core.backend import Plugin

from pto_ascend_common import A5, ascend_backend

#: the registered plugin object (entry point ``pto_ascend_a5.plugin:plugin``)
plugin = Plugin(ascend_backend(A5))
