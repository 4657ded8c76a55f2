"""Backend ``ascend_a2a3``: the shared Ascend backend bound to the A2A3 architecture record.

>>> [b.name for b in plugin.backends]
['ascend_a2a3']
"""

from pto_core.backend import Plugin

from pto_ascend_common import A2A3, ascend_backend

#: the registered plugin object (entry point ``pto_ascend_a2a3.plugin:plugin``)
plugin = Plugin(ascend_backend(A2A3))
