/* The aicf runtime: loads a folder written by `aicfc MODEL -o OUT` (plan.yaml, weights.bin,
 * libmodel.so) and runs it. C API; every function that can fail returns NULL or a non-zero
 * status and leaves a message for aicf_last_error(). The runtime validates the manifest
 * (schema version; every number range-checked with overflow-free arithmetic: shapes against
 * byte counts, buffer offsets 64-byte aligned and inside the arena and weights.bin, weights.bin
 * exactly the plan's size, step buffers known and never an input as a step's output; kernel
 * symbols present in libmodel.so, and the plan's argument sizes equal to those libmodel.so was
 * compiled for), so a tampered plan or truncated weights file is an error, never an
 * out-of-bounds access. A cpu plan lists the instruction-set extensions its kernels may use
 * (target.isa, from aicfc's --cpu-arch); aicf_open refuses it on a CPU lacking one ("folder OUT
 * needs avx512f, which this CPU lacks ...") before loading libmodel.so. Plans without the list
 * (older aicfc) are not checked. The OpenMP runtime that libmodel.so loads stays loaded after
 * aicf_close (its idle worker threads live on), so closing a model is safe in a program that
 * does not itself link OpenMP. Not thread-safe per model: run one model object from one thread.
 * A cpu plan's weights.bin is mapped read-only and shared through the page cache by every
 * process and model object that opens the folder; AICF_WEIGHTS=copy reads it into private huge
 * pages instead (any other value than map or copy fails aicf_open).
 *
 * Plans compiled with --target cuda:sm_XX (plan.yaml target.kind: cuda) run on CUDA device 0, or
 * the one aicf_open_device names. The runtime loads libcudart itself (dlopen libcudart.so, .so.13,
 * .so.12, or the path AICF_CUDART_LIBRARY gives), so it needs neither
 * the toolkit to build nor a GPU to run cpu plans; aicf_open of a cuda plan fails with
 * "no CUDA runtime library (libcudart.so) found" or "no CUDA device available (cudaErrorX)" when
 * the machine cannot run it. At open, one device allocation holds weights (uploaded once), the
 * arena and a staging buffer per input and output; the launchers aicf_launch_<kind_id> in
 * libmodel.so are validated like the cpu kernels. Runs go through a CUDA Graph captured on the
 * first run (and recaptured when aicf_run_device is given other pointers); see
 * aicf_set_cuda_graph. */
#ifndef AICF_RUNTIME_H
#define AICF_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aicf_model aicf_model;

#define AICF_MAX_RANK 8

typedef struct {
  const char *name;  /* graph input / output name */
  const char *dtype; /* "f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "u64", "u32",
                       "u16", "u8", "bool" */
  int rank;
  int64_t shape[AICF_MAX_RANK];
  size_t bytes;
} aicf_tensor_info;

/* Opens OUT; NULL on error (see aicf_last_error). A cuda plan runs on CUDA device 0. */
aicf_model *aicf_open(const char *dir);
/* Opens OUT for CUDA device `device` (0, 1, ...: cudaSetDevice's numbering), so that one process
 * can hold models on several GPUs; the runtime makes the model's device current before each of
 * its calls. An index the machine lacks fails ("CUDA device 2 requested; this machine has 2
 * (devices 0-1)"); a cpu plan takes device 0 only. aicf_open(dir) is aicf_open_device(dir, 0). */
aicf_model *aicf_open_device(const char *dir, int device);
void aicf_close(aicf_model *m);

/* The last error of this thread, or "" when none. */
const char *aicf_last_error(void);

int aicf_num_inputs(const aicf_model *m);
int aicf_num_outputs(const aicf_model *m);
/* 0 on success. */
int aicf_input_info(const aicf_model *m, int i, aicf_tensor_info *out);
int aicf_output_info(const aicf_model *m, int i, aicf_tensor_info *out);
/* Outputs whose length is known only at run time (a folder whose plan.yaml has a dim with
 * set_by: NonZero, Compress, NonMaxSuppression, Unique, TopK with a run-time k): their memory is
 * reserved at a bound (the model's, or aicfc --max NAME=N). Before a run, aicf_output_info
 * reports them at the bound; after it, at the length the run produced (the data is packed at that
 * shape, row-major), until the next run or aicf_set_input_shape. The buffer passed to aicf_run
 * must hold aicf_output_capacity bytes (the size at the bounds, for the input shapes set; equal
 * to aicf_output_info's bytes for every other output). A length above its bound fails the run
 * ("length NAME is N, above its bound B") and writes nothing past any buffer. 0 on success. */
int aicf_output_capacity(const aicf_model *m, int i, size_t *bytes);

/* Symbolic dims (a folder compiled with aicfc --dim NAME=MIN..MAX[@OPT]): the folder runs every
 * input shape whose dims lie in those ranges. aicf_num_dims is 0 for a static folder. */
typedef struct {
  const char *name;
  int64_t min, max, opt;
  int64_t value; /* the value the shapes set (aicf_set_input_shape) give; opt until then */
} aicf_dim_desc;
int aicf_num_dims(const aicf_model *m);
int aicf_dim_info(const aicf_model *m, int i, aicf_dim_desc *out);

/* Sets input i's shape for the next runs (rank as aicf_input_info reports). Its static dims
 * must be as compiled; the symbolic ones are checked when the dims are derived: by
 * aicf_output_info and aicf_run, from all inputs' shapes together (a dim outside its range, or
 * two inputs disagreeing on a dim, is an error naming the input and dim, and nothing runs).
 * aicf_input_info then reports the shape set and its byte size; aicf_output_info the outputs'
 * shapes and sizes that follow. The memory was reserved at open for the dims' maxima: no run
 * allocates. A static folder accepts only its own shapes. 0 on success. */
int aicf_set_input_shape(aicf_model *m, int i, int rank, const int64_t *shape);

/* cpu plans: the threads that run the model's steps, the calling thread included (the model's
 * own pool; default: the environment's AICF_NUM_THREADS when set, which aicf_open checks is a
 * whole number from 1 to AICF_MAX_THREADS, else the machine's hardware threads), 1 to
 * AICF_MAX_THREADS; 0 on success, 1
 * (with a message) for a count outside that range. Takes effect at the next aicf_run; not to be
 * called while a run of the same model is in flight. No effect on cuda plans. */
#define AICF_MAX_THREADS 1024
int aicf_set_num_threads(aicf_model *m, int n);

/* cpu plans: enabled != 0 pins the pool's workers, worker i to the i-th CPU the process may run
 * on after the first (the calling thread is left as it is); 0 (the default) lets the OS place
 * them. Takes effect at the next aicf_run. 0 on success. No effect on cuda plans. */
int aicf_set_thread_affinity(aicf_model *m, int enabled);

/* cpu plans: enabled != 0 (the default) lets the pool choose its team by measurement: when its
 * workers keep stalling steps (descheduled by the OS while they hold a step's last chunks, as on
 * a machine shared with busy processes), or when runs are so short (under ~0.2 ms) that trying
 * costs next to nothing, a few runs use half the workers, and whichever team ran faster is kept
 * for a while, then checked again. 0 always uses all the threads set. Takes
 * effect at the next aicf_run. 0 on success. No effect on cuda plans. */
int aicf_set_adaptive_threads(aicf_model *m, int enabled);

/* cuda plans: enabled != 0 (the default) captures the steps into a CUDA Graph on the first run
 * and replays it afterwards; 0 launches every step on each run (and drops a captured graph).
 * No effect on cpu plans. 0 on success. */
int aicf_set_cuda_graph(aicf_model *m, int enabled);

/* Runs the plan. inputs[i] / outputs[i] point to host buffers of exactly the byte sizes given
 * by aicf_input_info / aicf_output_info (for the shapes set), in their order. On a cuda plan the
 * inputs are copied to the device, the steps run, the outputs are copied back, and the call returns
 * when done. 0 on success. */
int aicf_run(aicf_model *m, const void *const *inputs, void *const *outputs);

/* cuda plans only: runs the plan on device buffers d_inputs[i] / d_outputs[i] (sizes as for
 * aicf_run) without any copy, enqueued on `stream` (a cudaStream_t; NULL is the legacy default
 * stream). Returns once the work is enqueued: synchronize the stream before reading outputs,
 * and keep the buffers alive until then. The CUDA Graph is captured for one set of pointers;
 * passing other pointers recaptures it. On a cpu plan it fails with "aicf_run_device needs a
 * cuda plan". 0 on success. */
int aicf_run_device(aicf_model *m, const void *const *d_inputs, void *const *d_outputs,
                    void *stream);

/* Steps of the plan, for profiling: kind (logical opcode) and kind_id (kernel symbol). */
int aicf_num_steps(const aicf_model *m);
const char *aicf_step_kind(const aicf_model *m, int step);
const char *aicf_step_symbol(const aicf_model *m, int step);
/* Like aicf_run, also writing each step's wall time in seconds to step_seconds[step] (on a
 * cuda plan the steps are launched one by one, each waited for; no CUDA Graph). */
int aicf_run_profiled(aicf_model *m, const void *const *inputs, void *const *outputs,
                      double *step_seconds);

#ifdef __cplusplus
}
#endif

#endif /* AICF_RUNTIME_H */
