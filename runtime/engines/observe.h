/* observe.h - PTO_TRACE / PTO_STATS for the StarPU engines (observe.c).
 *
 * With either variable set when the runtime is created, the engine records when each task ran
 * on which worker and, on StarPU-MPI, every data message StarPU-MPI posts (through the MPI
 * profiling interface: the engine's MPI_Isend / MPI_Irecv / MPI_Test / MPI_Wait call PMPI_*),
 * and asks StarPU-MPI to count the bytes it sends (STARPU_COMM_STATS). At shutdown every rank
 * hands its records to rank 0, which writes one Chrome trace (a process per rank, a lane per
 * worker, transfer slices with arrows from sender to receiver) and the statistics JSON that
 * pto_core.trace.load_runtime_stats reads. */
#ifndef PTO_ENGINE_OBSERVE_H
#define PTO_ENGINE_OBSERVE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct EngObs EngObs;

/* A registered region, as the trace names the transfers of it. */
typedef struct ObsRegion {
    const void* base;                  /* its first element in this process */
    int64_t tag;                       /* its handle's tag (the same on every rank) */
    const char* tensor;
    int64_t r0, c0, rows, cols;
} ObsRegion;

/* Read PTO_TRACE / PTO_STATS; *out stays NULL when neither is set. On StarPU-MPI it is called
 * on every rank after MPI started and before StarPU-MPI does: every rank observes when any rank
 * asks (only rank 0's files are written), and `shared_clock` says all ranks read one clock (one
 * node); otherwise rank times are aligned at a barrier. PTO_EIO (message set) for a file that
 * cannot be written. */
int obs_open(EngObs** out, int rank, int nranks, int nworkers, bool shared_clock);
/* Task `id` is called `name` (every task, on every rank, as it is submitted). */
int obs_name(EngObs* o, int32_t id, const char* name);
/* Task `id` ran on `worker` over [start_ns, end_ns) (the worker's own thread). */
void obs_task(EngObs* o, int worker, int32_t id, int64_t start_ns, int64_t end_ns);
/* After the last task and transfer, before StarPU shuts down; every rank calls it. Rank 0
 * writes the files; a file that cannot be written is reported on stderr, the run stands. */
void obs_finish(EngObs* o, const ObsRegion* regions, int64_t nregions);
void obs_free(EngObs* o);

#endif
