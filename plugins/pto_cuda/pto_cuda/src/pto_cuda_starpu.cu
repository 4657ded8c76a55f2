/*
 * pto_cuda_starpu.cu - the cuda backend's kernels on the StarPU engine (engine "starpu",
 * runtime/engines/starpu.c). The binding of a program built for that engine names each of its
 * kernels to the engine (pto_starpu_cuda_kernel), which runs their tasks as StarPU CUDA
 * codelets: one task at a time through the kernel's batch launcher (pto_cuda_kernel.h), on the
 * stream StarPU gives the codelet, with StarPU's device copies of the task's regions. The
 * executor of pto_cuda_exec.cu is linked (its kernel registry) but never attached.
 */
#include "pto_cuda_exec.h"
#include "pto_cuda_kernel.h"
#include "pto_starpu.h"

/* One task of the kernel `ctx` (its PTOCudaKernelDesc) on `stream`: 0 or the cudaError_t. */
static int launch_task(void* ctx, const int64_t* args, void* stream) {
    const PTOCudaKernelDesc* d = static_cast<const PTOCudaKernelDesc*>(ctx);
    return d->launch(args, 1, static_cast<cudaStream_t>(stream));
}

extern "C" int pto_cuda_starpu_attach(PTORuntime* rt, const PTOKernelFunc* kernels, int32_t n) {
    for (int32_t k = 0; k < n; ++k) {
        if (!kernels[k]) continue;
        const PTOCudaKernelDesc* d = pto_cuda_lookup(reinterpret_cast<PTOCudaAbiFn>(kernels[k]));
        if (!d) return PTO_EINVAL;     /* not a kernel of the cuda backend */
        const int rc = pto_starpu_cuda_kernel(rt, kernels[k], launch_task, const_cast<PTOCudaKernelDesc*>(d));
        if (rc) return rc;
    }
    return PTO_OK;
}
