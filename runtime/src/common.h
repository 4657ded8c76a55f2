/* common.h - helpers shared by the engines of the pto_runtime.h API (common.c; not installed). */
#ifndef PTO_RT_COMMON_H
#define PTO_RT_COMMON_H

#include "pto_runtime.h"

#include <stdio.h>
#include <time.h>

#pragma GCC visibility push(hidden)

/* The calling thread's pto_last_error text: set it from a format and return `code`; clear it;
 * the buffer itself (RT_ERROR_CAP bytes), for a message written elsewhere. */
#define RT_ERROR_CAP 512
int   rt_fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void  rt_clear_error(void);
char* rt_error_buffer(void);

/* A call made by a task of the runtime's own run, on the thread that runs it (its kernel, its
 * executor): PTO_ESTATE with the message naming `call` - one that builds the graph (NULL) or
 * pto_runtime_run. The orchestrating thread builds and runs the graph; a task may build and
 * run another runtime. */
int   rt_fail_from_task(const char* call) __attribute__((cold, noinline));

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t rt_now_ns(void);
/* Clock `clock` now plus ns (ns >= 0): a pthread_cond_timedwait deadline. */
struct timespec rt_deadline(clockid_t clock, int64_t ns);
/* The deadline of c->timeout_ms, or of PTO_TIMEOUT (seconds) when it is 0, into *ns (0 = none);
 * PTO_EINVAL (with the message set) for a bad PTO_TIMEOUT. */
int rt_resolve_timeout(const PTORuntimeConfig* c, int64_t* ns);
/* cfg.heap_bytes == 0: PTO_HEAP_BYTES from the environment, if set (bytes; a bad value is PTO_EINVAL). */
int rt_resolve_heap_bytes(PTORuntimeConfig* c);

/* How many of a task's `num_args` arguments a call reads: every argument takes a slot, so none
 * after the one past PTO_MAX_ARGS (which fails the task), whatever the count says. */
static inline int32_t rt_args_read(int32_t num_args) {
    return num_args > PTO_MAX_ARGS + 1 ? PTO_MAX_ARGS + 1 : num_args;
}

/* *p, an array of *cap elements of `elem` bytes, holds at least `need` (realloc, the capacity
 * doubled from 64); PTO_ENOMEM past 2^30 elements - its int32 counts and capacity, and the sums
 * callers form of them, stay far from overflowing - or when realloc fails (*p is then kept). */
int rt_grow_slow(void** p, int32_t* cap, int64_t need, size_t elem);
static inline int rt_grow(void** p, int32_t* cap, int64_t need, size_t elem) {
    return __builtin_expect(need <= *cap, 1) ? PTO_OK : rt_grow_slow(p, cap, need, elem);
}

/* pto_submitter_task's own checks, shared by the engines: the argument and predecessor lists,
 * and every ticket among the predecessors (PTO_TICKET(k) < 0) one of the `queued` before it.
 * PTO_OK, or the error with the message set. */
int rt_submitter_task_check(const char* func_name, const PTOTaskArg* args, int32_t num_args, const int32_t* preds,
                            int32_t npred, int64_t queued);

/* PTO_OK when `path` (named by environment variable `var`) can be written: an existing file
 * must be writable, else its directory; PTO_EIO with the message set otherwise. Nothing is
 * created: a run that cannot leave its trace fails when it starts, not at the end. */
int rt_check_writable(const char* var, const char* path);
/* The tiled tensors an engine registered, by tensor (data, shape, row stride, element size) and
 * tiling: an open-addressing table of `cap` keys (a power of two, at least twice the records;
 * zeroed: empty), freed by rt_tiles_index_free. */
typedef struct RTTileKey {
    const void* data;              /* NULL: an empty key */
    int64_t     rows, cols, ld, tile_rows, tile_cols;
    int32_t     elem_size;
    int32_t     record;            /* the engine's record (the handle's index) */
} RTTileKey;
typedef struct RTTileIndex {
    RTTileKey* keys;
    int32_t    cap;
} RTTileIndex;
void rt_tiles_index_free(RTTileIndex* index);
/* The record of x with this tiling, registered before (keyed by rt_tiles_key), or -1. */
int32_t rt_tiles_find(const RTTileIndex* index, const PTOTensor* x, int64_t tile_rows, int64_t tile_cols);
/* pto_tensor_tiles' checks, one for every engine, for x not found by rt_tiles_find: tile_rows x
 * tile_cols tiles that divide x, whose whole region the engine's `check` accepts, and room for
 * one more record in *tiles (*cap records of `size` bytes, n in use; grown by doubling, at most
 * 65,535) and for its key in *index. PTO_OK, or the error with its message. The engine fills
 * record n, then keys it (rt_tiles_key): a registration that fails between leaves no key. */
int rt_tiles_reserve(const PTOTensor* x, int64_t tile_rows, int64_t tile_cols,
                     int (*check)(const PTOTensor*, int64_t, int64_t, int64_t, int64_t), void** tiles,
                     int32_t n, int32_t* cap, size_t size, RTTileIndex* index);
/* x's tiling keyed as `record` (filled), in the room rt_tiles_reserve made. */
void rt_tiles_key(RTTileIndex* index, const PTOTensor* x, int64_t tile_rows, int64_t tile_cols, int32_t record);
/* Why `call` refused tile (i, j) of handle h for task `func_name`, one message for every engine:
 * PTO_EINVAL where h is not one of the runtime's (ntr < 0), else PTO_EBOUNDS (outside the ntr x
 * ntc tiles); the message set. */
int rt_tile_fail(const char* call, const char* func_name, int64_t h, int64_t i, int64_t j, int64_t ntr, int64_t ntc);
/* pto_task_add_tile's kind for task func_name: 1 a tile kind (slots and access), 0 PTO_ARG_INPUT/
 * OUTPUT/INOUT (the access alone), or PTO_EINVAL with its message. */
int rt_tile_add_kind(const char* func_name, int32_t kind);
/* A building call that returns a handle (pto_submitter_open, pto_temp_tensor: NULL, no code) refused:
 * pto_last_error says why, naming `call` - `code`, what the engine's building check gave
 * (PTO_ESHUTDOWN, a halted run's code; PTO_ESTATE, from a task or after the run, comes with the
 * check's own message, kept), or PTO_ENOMEM. */
void rt_refused(const char* call, int code);
/* A range of `tiles` submitted tile by tile takes a task id per tile: PTO_OK when that many are
 * left after next_id (ids end at INT32_MAX), else PTO_ENOMEM with the message naming the range -
 * at once, not after 2^31 submissions (a range of INT64_MAX tiles would never end). */
int rt_range_ids_check(const char* func_name, int64_t tiles, int32_t next_id);
/* JSON output: a quoted, escaped string; microseconds with nanosecond digits from integer ns. */
void rt_json_string(FILE* f, const char* s);
void rt_json_us(FILE* f, int64_t ns);
/* Large blocks kept across runtimes: a runtime's window, queues and pools are allocated at
 * every creation, and at these sizes malloc maps fresh pages (a page fault each on first touch)
 * and unmaps them at free. rt_block_free keeps up to RT_BLOCKS_KEPT blocks of at least
 * RT_BLOCK_MIN bytes (RT_BLOCKS_MAX_BYTES in all) for the next rt_block_alloc of the same size,
 * so a process that creates runtimes of one shape in turn stops faulting; the library's destructor
 * frees them. Blocks are 64-byte aligned, zeroed when `zero` is set, and may be realloc'd
 * (then freed with their new size). RT_BLOCKS_KEPT is well above what one runtime gives back: a
 * 2^20-slot window's dependency pool alone is 64 chunks, which took every place when there were
 * 64, so its tensor-map pool and per-slot arrays were mapped and faulted again by the next one. */
#define RT_BLOCK_MIN   (64 * 1024)
#define RT_BLOCKS_KEPT 256
#define RT_BLOCKS_MAX_BYTES ((size_t)64 << 20)
void* rt_block_alloc(size_t bytes, int zero);
/* Blocks whose content the next user relies on: rt_block_give keeps a block under a non-zero
 * `tag` (what the memory holds), and rt_block_take hands out a block of `bytes` without zeroing
 * it, with *kept = 1 when it is one given back under the same tag (its content is what its last
 * user left in it), 0 for any other memory. */
void* rt_block_take(size_t bytes, int tag, int* kept);
void  rt_block_give(void* p, size_t bytes, int tag);
#define RT_TAG_WINDOW   1   /* a task window: no slot RUNNING, every lock free */
#define RT_TAG_OVERFLOW 2   /* a window's overflow pointers: all NULL */
void  rt_block_free(void* p, size_t bytes);
/* Transparent huge pages for the whole 2 MB pages inside a fresh block of at least 4 MB, before
 * its first touch: a block that is read all over (a large task window, whose consumers a
 * completion visits anywhere in it) then needs a TLB entry per 2 MB, not per 4 KB. A hint: where
 * the kernel has THP off, nothing changes. */
void  rt_block_huge(void* p, size_t bytes);
/* realloc through the kept blocks: `p` holds `old` bytes (NULL: none); NULL on failure (p stays). */
void* rt_block_grow(void* p, size_t old, size_t bytes);

#pragma GCC visibility pop

#endif /* PTO_RT_COMMON_H */
