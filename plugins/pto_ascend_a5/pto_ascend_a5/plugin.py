"""Backend ``ascend_a5``: the shared Ascend backend bound to the A5 architecture record.

>>> [b.name for b in plugin.pto_backends()]
['ascend_a5']
"""

from pto_ascend_common import A5, AscendBackend

#: the registered plugin object (entry point ``pto_ascend_a5.plugin:plugin``)
plugin = AscendBackend(A5)
