"""Backend ``ascend_a2a3``: the shared Ascend backend bound to the A2A3 architecture record.

>>> [b.name for b in plugin.pto_backends()]
['ascend_a2a3']
"""

from pto_ascend_common import A2A3, AscendBackend

#: the registered plugin object (entry point ``pto_ascend_a2a3.plugin:plugin``)
plugin = AscendBackend(A2A3)
