"""Seed 003's BGEMM written with the ``PTO`` kernel DSL: ``C[b] = A[b] @ B[b]`` per batch.

The two kernels are PTO-AS text from :class:`pto_core.PTO`, added with
``PTOModule.add_incore_function(name, asm, PTO_WORKER_CUBE)``. ``gemm_tile`` is the seed's
kernel as written (``C = A @ B`` on three 16 x 16 tensor views); ``gemm_acc`` adds into ``C``
(``C += A @ B``), so an output tile is a chain of ``k_tiles`` tasks. The orchestration is
built with ``PTOFunctionBuilder`` and calls the kernels by their view names ``A``, ``B`` and
``C``. Batches are stacked along rows, as in ``examples/bgemm.py``.

    pto run examples/bgemm_ptoas.py --set batch=2 --set k_tiles=4 --check
    pto convert examples/bgemm_ptoas.py -o bgemm.ptoas
"""

from pto_core import (PTO, PTO_WORKER_CUBE, ElementType, MemorySpace, PTOFunctionBuilder,
                      PTOModule)

TILE = 16
I32 = ElementType.I32
GM = MemorySpace.GLOBAL


def gemm_tile_asm(tile: int = TILE, accumulate: bool = False) -> str:
    """The PTO-AS text of one tile product (``accumulate``: ``C += A @ B``)."""
    tile_m = tile_k = tile_n = tile
    pto = PTO("gemm_acc" if accumulate else "gemm_tile")
    pto.prologue()

    # Declare tensor views
    A = pto.tensor(shape=(tile_m, tile_k), dtype="float32", arg=0)
    B = pto.tensor(shape=(tile_k, tile_n), dtype="float32", arg=1)
    C = pto.tensor(shape=(tile_m, tile_n), dtype="float32", arg=2)

    if accumulate:
        pto.comment("C += A @ B")
        pto.gemm_acc(C, C, A, B)
    else:
        pto.comment("C = A @ B")
        pto.gemm(C, A, B)

    pto.epilogue()
    return pto.build()


def build_module(tile: int = TILE) -> PTOModule:
    module = PTOModule("bgemm_ptoas")
    module.add_incore_function("gemm_tile", gemm_tile_asm(tile), PTO_WORKER_CUBE)
    module.add_incore_function("gemm_acc", gemm_tile_asm(tile, accumulate=True),
                               PTO_WORKER_CUBE)
    (PTOFunctionBuilder("bgemm", module=module).not_in_core()
     .memref("A", GM).memref("B", GM).memref("C", GM)
     .scalar("batch", I32).scalar("m_tiles", I32).scalar("n_tiles", I32).scalar("k_tiles", I32)
     .scalar("a_row", I32).scalar("b_row", I32).scalar("b_base", I32)
     .for_loop("bi", 0, "batch", 1)
        .for_loop("i", 0, "m_tiles", 1)
            # row tile of A and C: bi*m_tiles + i; first row tile of B[bi]: bi*k_tiles
            .scalar_mul("a_row", "bi", "m_tiles").scalar_add("a_row", "a_row", "i")
            .scalar_mul("b_base", "bi", "k_tiles")
            .for_loop("j", 0, "n_tiles", 1)
                .call("gemm_tile", {"A": ("A", "a_row", 0), "B": ("B", "b_base", "j"),
                                    "C": ("C", "a_row", "j")})
                .for_loop("k", 1, "k_tiles", 1)
                    .scalar_add("b_row", "b_base", "k")
                    .call("gemm_acc", {"A": ("A", "a_row", "k"), "B": ("B", "b_row", "j"),
                                       "C": ("C", "a_row", "j")})
                .end_for()
            .end_for()
        .end_for()
     .end_for()
     .build())
    module.set_entry("bgemm")
    return module


#: what `pto run` uses when no --set is given
DEFAULTS = {"batch": 2, "m_tiles": 2, "n_tiles": 2, "k_tiles": 3}
#: the tensors a caller provides (C starts zeroed)
INPUTS = ("A", "B")


def numpy_reference(A, B, batch):
    """Plain numpy: one matrix product per batch, stacked along rows."""
    import numpy as np
    a = A.astype(np.float32).reshape(batch, -1, A.shape[1])
    b = B.astype(np.float32).reshape(batch, -1, B.shape[1])
    return {"C": np.concatenate([a[i] @ b[i] for i in range(batch)], axis=0)}


if __name__ == "__main__":
    print(gemm_tile_asm(), end="")
