"""What distinguishes one Ascend generation from another, as far as PTO's kernels care.

Each backend plugin (``pto_ascend_a2a3``, ``pto_ascend_a5``) holds one :class:`AscendArch`; the
shared emitter reads only this record, so every hardware difference is written down here once.

>>> A2A3.capacities["UB"], A5.capacities["UB"]
(196608, 262144)
>>> A2A3.cce_arch, A5.cce_arch
('dav-c220', 'dav-c310')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from pto_core.ir import ElementType

KB = 1024
E = ElementType


@dataclass(frozen=True)
class AscendArch:
    """One Ascend NPU generation.

    ``capacities`` are on-chip buffer sizes in bytes (the buffer planner's limits; ``BT`` is
    the bias table of TMATMUL_BIAS, include/pto/common/buffer_limits.hpp's PTO_BIAS_SIZE_BYTES).
    ``matmul_inputs`` maps a TMATMUL input type to the accumulator types the cube unit offers.
    ``acc_to_vec``: the cube result (L0C) can move straight to the vector buffer with TMOV
    (A5); without it cube and vector cores only meet through global memory (A2/A3).
    ``left_col_major``: Left (L0A) tiles use column-major fractal boxes (A5 ``nZ``) rather
    than row-major ones (A2/A3 ``zZ``).
    ``row_reduce_scratch_full``: TROWSUM/TROWMAX/TROWMIN use their scratch tile as a full
    copy of the source (A2/A3); on A5 the register-based reduction ignores it, so a minimal
    one-block scratch is passed.

    ``quant_tmp``: TQUANT's int8 form takes a scratch tile of its source's size and overwrites
    its source (A2/A3's five-stage cast chain, docs/isa/TQUANT.md); A5's does neither.

    ``lacks``: library instructions this generation does not have at all (THISTOGRAM on
    A2/A3); the emitter refuses them, naming the op and the target.

    ``isa_types``: library instruction -> the element types this generation's implementation
    accepts, for instructions that do not take every vector type (the "Implementation checks"
    of docs/isa/<OP>.md); the emitter refuses the others, naming the op and the target. An
    empty tuple: the generation has no vector-tile form of the instruction (TINSERT on A2/A3).
    """

    name: str
    macro: str                       # PTO_NPU_ARCH_* selecting the library's implementation
    cce_arch: str                    # --cce-aicore-arch value for CANN's ccec
    chips: str
    capacities: Mapping[str, int]
    matmul_inputs: Mapping[ElementType, tuple[ElementType, ...]]
    acc_to_vec: bool
    left_col_major: bool
    row_reduce_scratch_full: bool
    quant_tmp: bool = False
    vector_types: tuple[ElementType, ...] = field(
        default=(E.F32, E.F16, E.BF16, E.I32, E.I16, E.I8, E.U8))
    isa_types: Mapping[str, tuple[ElementType, ...]] = field(default_factory=dict)
    lacks: tuple[str, ...] = ()      # library instructions this generation does not have
    #: source types whose TCMP/TCMPS test equality whatever the mode asks (A2/A3 i32)
    compare_eq_only: tuple[ElementType, ...] = ()

    def reduce_types(self, op: str) -> tuple[ElementType, ...]:
        """The source element types reduction ``op`` accepts on this generation: its entry of
        :attr:`isa_types`, or the common four (f32, f16, i32, i16).

        >>> [t.value for t in A2A3.reduce_types("TCOLARGMAX")], len(A5.reduce_types("TROWSUM"))
        (['f32', 'f16'], 4)
        """
        return self.isa_types.get(op, (E.F32, E.F16, E.I32, E.I16))

    @property
    def ub_bytes(self) -> int:
        return self.capacities["UB"]


#: instructions whose element types are the same on every generation ("Implementation checks"
#: of their docs/isa pages)
_EVERY_GENERATION: dict[str, tuple[ElementType, ...]] = {
    # TAXPY.md, TFUSEDMULADD.md, TFUSEDMULADDRELU.md, TMULADDDST.md: half and float
    **{op: (E.F32, E.F16) for op in ("TAXPY", "TFUSEDMULADD", "TFUSEDMULADDRELU", "TMULADDDST")},
    # TPairReduceSum.md, "Implementation checks (A2A3 & A5)": float or half
    "TPAIRREDUCESUM": (E.F32, E.F16),
    # TPARTARGMAX.md, TPARTARGMIN.md: "Supported value types: half, float"
    **{op: (E.F32, E.F16) for op in ("TPARTARGMAX", "TPARTARGMIN")},
    # TPRINT.md, "Supported element type": float, half, int8_t/int16_t/int32_t, uint8_t (and
    # the unsigned 16- and 32-bit types); no bfloat16
    "TPRINT": (E.F32, E.F16, E.I32, E.I16, E.I8, E.U8),
}


#: compares, selects and generators ("Implementation checks" of docs/isa/TCMP.md, TCMPS.md,
#: TSEL.md, TSELS.md, TCI.md, TTRI.md). TCMP writes a uint8_t mask here on both generations:
#: the library implements that form for int32, half and float (A5's uint32_t mask of
#: 32-bit words is not emitted; docs/ascend-fidelity.md)
_MASKS_A2A3 = {"TCMP": (E.F32, E.F16, E.I32), "TCMPS": (E.F32, E.F16, E.I32, E.I16),
               "TSEL": (E.F32, E.F16, E.BF16, E.I32, E.I16),
               "TSELS": (E.F32, E.F16, E.BF16, E.I32, E.I16),
               "TCI": (E.F32, E.F16, E.BF16, E.I32, E.I16), "TTRI": (E.F32, E.F16, E.I32, E.I16)}
_MASKS_A5 = {"TCMP": (E.F32, E.F16, E.I32),
             "TCMPS": (E.F32, E.F16, E.BF16, E.I32, E.I16, E.I8, E.U8),
             "TSEL": (E.F32, E.F16, E.BF16, E.I32, E.I16, E.I8, E.U8),
             "TSELS": (E.F32, E.F16, E.I32, E.I16, E.I8, E.U8),
             "TCI": (E.I32, E.I16),
             # TTRI.md lists int8_t and uint8_t for A5; the official CPU code rejects them
             # (cpu/TTRI.hpp: "TTRI has invalid data type"), so they are not emitted
             "TTRI": (E.F32, E.F16, E.BF16, E.I32, E.I16),
             # TRANDOM.md, "Implementation checks (A5)": int32_t, uint32_t (our i32)
             "TRANDOM": (E.I32,)}


A2A3 = AscendArch(
    name="ascend_a2a3", macro="PTO_NPU_ARCH_A2A3", cce_arch="dav-c220",
    chips="Ascend 910B / 910C (A2/A3)",
    capacities={"UB": 192 * KB, "L1": 512 * KB, "L0A": 64 * KB, "L0B": 64 * KB, "L0C": 128 * KB,
                "BT": 1 * KB},
    matmul_inputs={E.F32: (E.F32,), E.F16: (E.F32,), E.BF16: (E.F32,), E.I8: (E.I32,)},
    acc_to_vec=False, left_col_major=False, row_reduce_scratch_full=True, quant_tmp=True,
    isa_types={**_EVERY_GENERATION,
               "TREM": (E.F32, E.I32), "TREMS": (E.F32, E.I32), "TFMODS": (E.F32,),
               "TMINS": (E.F32, E.F16, E.I32, E.I16), "TADDSC": (E.F32, E.F16, E.I32, E.I16),
               "TSUBSC": (E.F32, E.F16, E.I32, E.I16), "TSUBRELU": (E.F32, E.F16),
               "TLRELU": (E.F32, E.F16), "TPRELU": (E.F32, E.F16),
               "TPOW": (E.F32, E.I32, E.I16, E.I8, E.U8),
               "TPOWS": (E.F32, E.I32, E.I16, E.I8, E.U8),
               # docs/isa/TCOLARGMAX.md, "A2A3 implementation checks": half, float (and
               # unsigned types)
               "TCOLARGMAX": (E.F32, E.F16), "TCOLARGMIN": (E.F32, E.F16),
               # docs/isa/TGATHER.md, "Index-based gather: implementation checks (A2A3)":
               # 2- or 4-byte elements
               "TGATHER": (E.F32, E.F16, E.BF16, E.I32, E.I16),
               # docs/isa/TINSERT.md, "A2A3 implementation checks": "Acc â Mat only"
               "TINSERT": (),
               # docs/isa/TPARTADD.md ... TPARTMIN.md, "A2A3 implementation checks"
               **{op: (E.F32, E.F16, E.I32, E.I16)
                  for op in ("TPARTADD", "TPARTMUL", "TPARTMAX", "TPARTMIN")},
               **_MASKS_A2A3},
    # docs/isa/THISTOGRAM.md: "available on A5 / Kirin9030 / CPU-sim only (not on A2/A3)";
    # docs/isa/TRANDOM.md lists implementation checks for A5 only, and the library has no
    # A2/A3 implementation (include/pto/npu/a2a3 has no TRandom.hpp)
    lacks=("THISTOGRAM", "TRANDOM",
           # docs/isa/TINTERLEAVE.md, TDEINTERLEAVE.md: "Implementation checks (A5)" only (the
           # library has no A2/A3 implementation)
           "TINTERLEAVE", "TDEINTERLEAVE"),
    # docs/isa/TCMP.md, TCMPS.md: "For int32_t input, only CmpMode::EQ is supported"
    compare_eq_only=(E.I32,))

A5 = AscendArch(
    name="ascend_a5", macro="PTO_NPU_ARCH_A5", cce_arch="dav-c310",
    chips="Ascend 950 (A5)",
    capacities={"UB": 256 * KB, "L1": 512 * KB, "L0A": 64 * KB, "L0B": 64 * KB, "L0C": 256 * KB,
                "BT": 4 * KB},
    matmul_inputs={E.F32: (E.F32,), E.F16: (E.F32,), E.BF16: (E.F32,)},
    acc_to_vec=True, left_col_major=True, row_reduce_scratch_full=False,
    isa_types={**_EVERY_GENERATION,
               "TREM": (E.F32, E.F16, E.I32, E.I16), "TREMS": (E.F32, E.F16, E.I32, E.I16),
               "TFMODS": (E.F32, E.F16, E.I32, E.I16), "TADDSC": (E.F32, E.F16, E.I32, E.I16),
               "TSUBSC": (E.F32, E.F16, E.I32, E.I16), "TSUBRELU": (E.F32, E.F16),
               "TLRELU": (E.F32, E.F16), "TPRELU": (E.F32, E.F16),
               # docs/isa/TCOLARGMAX.md, "A5 implementation checks": 8-, 16- and 32-bit
               # sources; TROWARGMAX.md: "On A5 any 2-/4-byte source is accepted"
               **{op: (E.F32, E.F16, E.I32, E.I16, E.I8, E.U8)
                  for op in ("TCOLARGMAX", "TCOLARGMIN")},
               **{op: (E.F32, E.F16, E.BF16, E.I32, E.I16)
                  for op in ("TROWARGMAX", "TROWARGMIN")},
               # docs/isa/TINSERT.md, "A5 implementation checks", Vec â Vec: half, bfloat16,
               # float, int32, int8 (and the 8-bit floats)
               "TINSERT": (E.F32, E.F16, E.BF16, E.I32, E.I8),
               # docs/isa/TPARTADD.md ... TPARTMIN.md, "A5 implementation checks"
               **{op: (E.F32, E.F16, E.BF16, E.I32, E.I16, E.I8, E.U8)
                  for op in ("TPARTADD", "TPARTMUL", "TPARTMAX", "TPARTMIN")},
               **_MASKS_A5})
