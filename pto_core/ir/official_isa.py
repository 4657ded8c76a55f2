"""The instructions of the official PTO-ISA tile library, as data.

The names are the instruction pages of hw-native-sys/pto-isa, folder ``docs/isa/`` (one
``<NAME>.md`` per instruction; translations ``*_zh.md``, ``README.md`` and ``conventions.md``
are not instructions), at commit 3186c381bd49e1164092e67ff1b3564302754e76 (2026-08-21),
the commit whose ``include/`` the Ascend fidelity tests stage. ``scripts/isa_table.py`` compares this list with the instruction
table (:mod:`pto_core.ir.ops`) and writes ``docs/isa.md``.

>>> len(OFFICIAL_ISA), "TADD" in OFFICIAL_ISA
(150, True)
"""

from __future__ import annotations

#: the commit of hw-native-sys/pto-isa the list was read from
SOURCE_COMMIT = "3186c381bd49e1164092e67ff1b3564302754e76"

#: every official instruction, in the order of the library's file names
OFFICIAL_ISA: tuple[str, ...] = (
    "MGATHER", "MSCATTER", "SETFMATRIX", "SET_IMG2COL_PADDING", "SET_IMG2COL_RPT",
    "SET_QUANT_SCALAR", "SET_QUANT_VECTOR", "SYNCALL", "TABS", "TADD", "TADDC", "TADDReluConv",
    "TADDS", "TADDSC", "TALLOC", "TAND", "TANDS", "TASSIGN", "TAXPY", "TAddDeqRelu", "TCI",
    "TCMP", "TCMPS", "TCOLARGMAX", "TCOLARGMIN", "TCOLEXPAND", "TCOLEXPANDADD", "TCOLEXPANDDIV",
    "TCOLEXPANDEXPDIF", "TCOLEXPANDMAX", "TCOLEXPANDMIN", "TCOLEXPANDMUL", "TCOLEXPANDSUB",
    "TCOLMAX", "TCOLMIN", "TCOLPROD", "TCOLSUM", "TCONCAT", "TCVT", "TDEINTERLEAVE", "TDEQUANT",
    "TDIV", "TDIVS", "TEXP", "TEXPANDS", "TEXTRACT", "TEXTRACT_FP", "TFILLPAD",
    "TFILLPAD_EXPAND", "TFILLPAD_INPLACE", "TFMOD", "TFMODS", "TFREE", "TFUSEDMULADD",
    "TFUSEDMULADDRELU", "TGATHER", "TGATHERB", "TGEMV", "TGEMV_ACC", "TGEMV_BIAS", "TGEMV_MX",
    "TGET_SCALE_ADDR", "THISTOGRAM", "TIMG2COL", "TINSERT", "TINSERT_FP", "TINTERLEAVE",
    "TLOAD", "TLOG", "TLRELU", "TMATMUL", "TMATMUL_ACC", "TMATMUL_BIAS", "TMATMUL_MX",
    "TMATMUL_MX_HIF4", "TMAX", "TMAXS", "TMIN", "TMINS", "TMOV", "TMOV_FP", "TMRGSORT", "TMUL",
    "TMULADDDST", "TMULS", "TNEG", "TNOT", "TOR", "TORS", "TPARTADD", "TPARTARGMAX",
    "TPARTARGMIN", "TPARTMAX", "TPARTMIN", "TPARTMUL", "TPOP", "TPOW", "TPOWS", "TPREFETCH",
    "TPREFETCH_ASYNC", "TPRELU", "TPRINT", "TPUSH", "TPairReduceSum", "TQUANT", "TQUANT_DN",
    "TQUANT_HIF4", "TRANDOM", "TRECIP", "TRELU", "TREM", "TREMS", "TRESHAPE", "TROWARGMAX",
    "TROWARGMIN", "TROWEXPAND", "TROWEXPANDADD", "TROWEXPANDDIV", "TROWEXPANDEXPDIF",
    "TROWEXPANDMAX", "TROWEXPANDMIN", "TROWEXPANDMUL", "TROWEXPANDSUB", "TROWMAX", "TROWMIN",
    "TROWPROD", "TROWSUM", "TRSQRT", "TSCATTER", "TSEL", "TSELS", "TSHL", "TSHLS", "TSHR",
    "TSHRS", "TSORT32", "TSQRT", "TSTORE", "TSTORE_FP", "TSUB", "TSUBC", "TSUBRELU", "TSUBS",
    "TSUBSC", "TSUBVIEW", "TSYNC", "TTRANS", "TTRI", "TXOR", "TXORS",
)
