/* The aicf runtime: loads a folder written by `aicfc MODEL -o OUT` (plan.yaml, weights.bin,
 * libmodel.so) and runs it. C API; every function that can fail returns NULL or a non-zero
 * status and leaves a message for aicf_last_error(). The runtime validates the manifest
 * (schema version, buffer sizes and offsets inside the arena and weights.bin, kernel symbols
 * present in libmodel.so, and that the plan's argument sizes equal those libmodel.so was
 * compiled for), so a tampered plan or truncated weights file is an error, never an
 * out-of-bounds access. Not thread-safe per model: run one model object from one thread. */
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
  const char *dtype; /* "f32", "f16", "bf16", "i64", "i32", "i8", "bool" */
  int rank;
  int64_t shape[AICF_MAX_RANK];
  size_t bytes;
} aicf_tensor_info;

/* Opens OUT; NULL on error (see aicf_last_error). */
aicf_model *aicf_open(const char *dir);
void aicf_close(aicf_model *m);

/* The last error of this thread, or "" when none. */
const char *aicf_last_error(void);

int aicf_num_inputs(const aicf_model *m);
int aicf_num_outputs(const aicf_model *m);
/* 0 on success. */
int aicf_input_info(const aicf_model *m, int i, aicf_tensor_info *out);
int aicf_output_info(const aicf_model *m, int i, aicf_tensor_info *out);

/* Threads used by the kernels (OpenMP); 0 on success. */
int aicf_set_num_threads(aicf_model *m, int n);

/* Runs the plan. inputs[i] / outputs[i] point to host buffers of exactly the byte sizes given
 * by aicf_input_info / aicf_output_info, in their order. 0 on success. */
int aicf_run(aicf_model *m, const void *const *inputs, void *const *outputs);

/* Steps of the plan, for profiling: kind (logical opcode) and kind_id (kernel symbol). */
int aicf_num_steps(const aicf_model *m);
const char *aicf_step_kind(const aicf_model *m, int step);
const char *aicf_step_symbol(const aicf_model *m, int step);
/* Like aicf_run, also writing each step's wall time in seconds to step_seconds[step]. */
int aicf_run_profiled(aicf_model *m, const void *const *inputs, void *const *outputs,
                      double *step_seconds);

#ifdef __cplusplus
}
#endif

#endif /* AICF_RUNTIME_H */
