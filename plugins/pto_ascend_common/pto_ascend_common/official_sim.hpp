// Host glue between PTO's generated ABI wrappers (pto_abi_wrappers.cpp) and the official
// PTO-ISA library's CPU simulator (-D__CPU_SIM). The wrappers call three functions of the
// CPU-check header's pto_sim namespace; this file implements them over the official
// NPUMemoryModel. It is force-included (-include) ahead of the kernel files, which compile
// unchanged against the official <pto/pto-inst.hpp>.
#ifndef PTO_ASCEND_OFFICIAL_SIM_HPP
#define PTO_ASCEND_OFFICIAL_SIM_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <pto/pto-inst.hpp>

#ifndef PTO_OFFICIAL_SIM_ARCH
#error "define PTO_OFFICIAL_SIM_ARCH as A2A3 or A5 (a pto::NPUArch value)"
#endif

namespace pto_sim {

// Every runtime worker thread is one AI core with buffers of its own. The official model
// would initialise a thread lazily for its default architecture (A2/A3); here each thread is
// initialised for the target before its first kernel.
inline void reset_error() {
    pto::NPUMemoryModel& m = pto::NPUMemoryModel::Instance();
    if (!m.IsInitialized() || m.GetArch() != pto::NPUArch::PTO_OFFICIAL_SIM_ARCH)
        m.Initialize(pto::NPUArch::PTO_OFFICIAL_SIM_ARCH);
}

// The official simulator does not record errors: a violated constraint prints
// "[PTO][CA] ..." and aborts the process (the harness runs it in a child process).
inline const std::string& error() {
    static const std::string none;
    return none;
}

// Global-memory workspace of this thread's kernels, at least `bytes` long.
inline unsigned char* workspace(std::size_t bytes) {
    static thread_local std::vector<unsigned char> ws;
    if (ws.size() < bytes) ws.resize(bytes);
    return ws.data();
}

}  // namespace pto_sim

namespace pto {

// TQUANT's int8 form with a tmp tile (A2/A3's call, docs/isa/TQUANT.md: "The tmp-aware
// overload ... exists for A2/A3") is declared for every build, but the CPU code implements only
// the form without tmp, whose codes are the same: the A2/A3 kernels reach it through this.
template <QuantType Q, typename D, typename S, typename P, typename T>
inline void TQUANT_IMPL(D& dst, S& src, P& scale, T& /*tmp*/, P* offset) {
    TQUANT_IMPL<Q, D, S, P>(dst, src, scale, offset);
}

}  // namespace pto

#endif  // PTO_ASCEND_OFFICIAL_SIM_HPP
