/* cuda_kernels.c - a kernel named to the StarPU engine as a CUDA kernel (pto_starpu_cuda_kernel)
 * beside a host kernel, for the engine tests: on a StarPU without CUDA its tasks are refused,
 * naming what is missing, while the host kernel's tasks still run as CPU codelets. Each step
 * prints one line "what: rc=CODE error=pto_last_error()". */
#include "common.h"

#include <stdio.h>

#include "pto_starpu.h"

static float g_data[4 * 16];
static int g_launches;

static int32_t add_one(const int64_t* args) {
    float* p = pto_arg_ptr(args[0]);
    for (int j = 0; j < 16; j++) p[j] += 1.0f;
    return 0;
}

static int32_t on_device(const int64_t* args) { (void)args; return 0; }

static int launch_on_device(void* ctx, const int64_t* args, void* stream) {
    (void)ctx; (void)args; (void)stream;
    g_launches++;
    return 0;
}

static int32_t no_executor(void* ctx, int32_t task, const char* name, PTOKernelFunc fn, const int64_t* args,
                           int32_t nargs, int32_t worker) {
    (void)ctx; (void)task; (void)name; (void)fn; (void)args; (void)nargs; (void)worker;
    return 0;
}

static void say(const char* what, int rc) { printf("%s: rc=%d error=%s\n", what, rc, rc ? pto_last_error() : ""); }

/* Returns the run's code; *sum gets the sum of the tensor after it, *launches the launcher's calls. */
int cuda_kernels_run(double* sum, int* launches) {
    PTORuntime* rt;
    int rc = make_runtime(&rt, 2);
    if (rc < 0) return rc;
    say("name", pto_starpu_cuda_kernel(rt, on_device, launch_on_device, NULL));
    pto_runtime_set_executor(rt, no_executor, NULL);
    say("executor", PTO_EINVAL);
    say("complete_n", pto_task_complete_n(rt, NULL, 0, 0));
    PTOTensor x = {g_data, 4, 16, 16, (int32_t)sizeof(float), "x"};
    for (int i = 0; i < 4; i++) {
        PTOTaskArg a[1] = {{PTO_ARG_INOUT, &x, i, 0, 1, 16, 0}};
        rc = pto_task_submit_v(rt, "add_one", add_one, 0, PTO_WORKER_ANY, a, 1);
        if (rc < 0) say("host task", rc);
    }
    PTOTaskArg d[1] = {{PTO_ARG_INOUT, &x, 0, 0, 1, 16, 0}};
    say("device task", pto_task_submit_v(rt, "scale_on_gpu", on_device, 0, PTO_WORKER_ANY, d, 1));
    say("name late", pto_starpu_cuda_kernel(rt, add_one, launch_on_device, NULL));
    rc = pto_runtime_run(rt);
    say("run", rc);
    pto_runtime_destroy(rt);
    *sum = 0;
    for (int i = 0; i < 4 * 16; i++) *sum += g_data[i];
    *launches = g_launches;
    return rc;
}
