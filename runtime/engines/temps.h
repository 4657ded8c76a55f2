/* temps.h - runtime-owned intermediates (pto_temp_tensor, scopes) for an engine other than ours.
 *
 * The engine keeps its own submission paths; before one sees a task's arguments, the TEMP_*
 * kinds are rewritten into plain ones: every TEMP_OUTPUT region gets a buffer of its own (a
 * tensor of rows x cols elements, ld = cols), and a TEMP_INPUT / TEMP_INOUT region becomes the
 * matching region of the buffer of the newest visible write that holds it - the renaming
 * heap.c does for our runtime, so the engine sees ordinary RAW dependencies between buffers.
 * Buffers live until the runtime is destroyed (the engine still holds handles on them until
 * then); peak_temp_bytes is therefore every buffer of the run, not a window's worth. */
#ifndef PTO_ENGINE_TEMPS_H
#define PTO_ENGINE_TEMPS_H

#include "pto_runtime.h"

/* Rewrite args[0..n) into out[0..n): TEMP_* kinds become INPUT/OUTPUT/INOUT of a buffer; other
 * kinds are copied. `task_name` names the task in errors. Returns PTO_OK or a negative code
 * (rt_fail says why). */
int engine_temps_translate(PTORuntime* rt, const char* task_name, const PTOTaskArg* args,
                           int32_t n, PTOTaskArg* out);
/* true when some argument of args[0..n) is a TEMP_* kind */
int engine_temps_any(const PTOTaskArg* args, int32_t n);
void engine_temps_stats(PTORuntime* rt, PTORuntimeStats* s);
/* The engine's: PTO_OK while rt takes tasks, else its code (PTO_ESHUTDOWN, PTO_ESTATE after the
 * run, a halted run's) - the intermediates' calls refuse what the engine's task calls refuse. */
int engine_check_building(PTORuntime* rt);
/* Free every buffer of rt's intermediates (after the engine let go of them). */
void engine_temps_free(PTORuntime* rt);

#endif
