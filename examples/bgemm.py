"""Batched tiled GEMM: ``C[b] = A[b] @ B[b]`` for every batch ``b``.

Batches are stacked along rows: ``A`` is ``(batch*M) x K``, ``B`` is ``(batch*K) x N`` and ``C``
is ``(batch*M) x N``, with ``M = m_tiles*T``, ``N = n_tiles*T``, ``K = k_tiles*T`` for tiles of
``T x T`` (default 32). All four counts are dynamic scalars.

Two InCore kernels multiply one tile pair: ``gemm_first`` writes ``C_tile = A_tile @ B_tile``
and ``gemm_acc`` reads and rewrites ``C_tile += A_tile @ B_tile`` (TMATMUL_ACC). The K loop is an
orchestration loop, so each output tile is a chain of ``k_tiles`` tasks linked through the
``inout`` C tile, while different output tiles are independent: the runtime sees
``batch * m_tiles * n_tiles`` parallel chains. Tile row offsets such as ``b*m_tiles + i`` are
computed with scalar instructions.

    pto run examples/bgemm.py --set batch=2 --set k_tiles=4 --check
"""

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

TILE = 32
F32 = ElementType.F32
I32 = ElementType.I32
GM = MemorySpace.GLOBAL


def _gemm_kernel(m: PTOModule, name: str, tile: int, in_dtype: ElementType, accumulate: bool):
    b = (PTOFunctionBuilder(name, module=m).in_core()
         .memref("a", GM, in_dtype).memref("b", GM, in_dtype).memref("c", GM, F32)
         .tile("ta", tile, tile, in_dtype).tile("tb", tile, tile, in_dtype)
         .tile("tc", tile, tile, F32)
         .load("ta", "a").load("tb", "b"))
    if accumulate:
        b.load("tc", "c").matmul_acc("tc", "tc", "ta", "tb")
    else:
        b.matmul("tc", "ta", "tb")
    return b.store("c", "tc").build()


def build_module(tile: int = TILE, in_dtype: ElementType = F32) -> PTOModule:
    """``in_dtype`` is the type of A and B (f32, f16 or bf16); C is always f32."""
    m = PTOModule("bgemm_module")
    _gemm_kernel(m, "gemm_first", tile, in_dtype, accumulate=False)
    _gemm_kernel(m, "gemm_acc", tile, in_dtype, accumulate=True)
    (PTOFunctionBuilder("bgemm", module=m).not_in_core()
     .memref("A", GM, in_dtype).memref("B", GM, in_dtype).memref("C", GM, F32)
     .scalar("batch", I32).scalar("m_tiles", I32).scalar("n_tiles", I32).scalar("k_tiles", I32)
     .scalar("a_row", I32).scalar("b_row", I32).scalar("b_base", I32)
     .for_loop("bi", 0, "batch", 1)
        .for_loop("i", 0, "m_tiles", 1)
            # row tile of A and C: bi*m_tiles + i; first row tile of B[bi]: bi*k_tiles
            .scalar_mul("a_row", "bi", "m_tiles").scalar_add("a_row", "a_row", "i")
            .scalar_mul("b_base", "bi", "k_tiles")
            .for_loop("j", 0, "n_tiles", 1)
                .call("gemm_first", {"a": ("A", "a_row", 0), "b": ("B", "b_base", "j"),
                                     "c": ("C", "a_row", "j")})
                .for_loop("k", 1, "k_tiles", 1)
                    .scalar_add("b_row", "b_base", "k")
                    .call("gemm_acc", {"a": ("A", "a_row", "k"), "b": ("B", "b_row", "j"),
                                       "c": ("C", "a_row", "j")})
                .end_for()
            .end_for()
        .end_for()
     .end_for()
     .build())
    m.set_entry("bgemm")
    return m


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
    print(build_module())
