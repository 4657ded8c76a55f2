/* submitters.h - pto_submitter_* (several submitting threads, pto_runtime.h) for an engine other
 * than ours.
 *
 * submitters.c keeps each thread's queue and batches, with the semantics pto_runtime.h gives them;
 * the engine supplies how one queued task enters its graph and the lock that serialises the
 * entries, so the engine's own tables (tensors, regions, task ids) see one writer at a time. A
 * batch enters whole under the lock, in queue order, exactly as that thread calling
 * pto_task_submit_v (plus its predecessors) would have. */
#ifndef PTO_ENGINE_SUBMITTERS_H
#define PTO_ENGINE_SUBMITTERS_H

#include <pthread.h>

#include "pto_runtime.h"

/* The lock every batch enters under. */
pthread_mutex_t* engine_submit_lock(PTORuntime* rt);
/* A submitter opens (delta 1) or closes (-1): PTO_OK, or why the engine refuses it (rt_fail). */
int engine_submitter_count(PTORuntime* rt, int delta);
/* One task, the lock held: pto_task_submit_v that also starts only after tasks preds[0..npred)
 * (ids already in the graph). Returns its id or a negative error (rt_fail says why). */
int32_t engine_submit_after(PTORuntime* rt, const char* func_name, PTOKernelFunc func_ptr, int32_t buffer_bytes,
                            int32_t worker_type, const PTOTaskArg* args, int32_t num_args, const int32_t* preds,
                            int32_t npred);

#endif
