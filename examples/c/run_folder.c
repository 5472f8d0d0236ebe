/* run_folder: loads a folder compiled by aicfc, runs it on .npy inputs and prints the outputs,
 * using only the installed runtime (libaicf_runtime, <aicf_runtime.h>).
 *
 *   run_folder FOLDER NAME=FILE.npy... [--threads N] [--save DIR] [--reference DIR [--tol T]]
 *
 * Every input of the folder needs a NAME=FILE.npy of its dtype. A folder compiled for ranges of
 * dims (aicfc --dim) takes any shape inside them: the .npy's shape is set on the input first.
 * --save writes each output as DIR/NAME.npy; --reference compares each output with
 * DIR/NAME.npy (floats: |got - want| <= T * (1 + |want|), T = 1e-4 by default; other dtypes
 * exactly) and fails on a mismatch. Exit status: 0 success, 1 bad arguments or files, 2 the
 * runtime refused the folder or the run, 3 an output differs from its reference.
 *
 * Build against an installed aicf (cmake --install build --prefix P):
 *   cc run_folder.c -I../common $(PKG_CONFIG_PATH=P/lib/pkgconfig pkg-config --cflags --libs aicf)
 */
#include <aicf_runtime.h>

#include "npy_io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(int code, const char *what, const char *detail) {
  fprintf(stderr, "run_folder: error: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  return code;
}

/* Element i of a float output as a double (f32, f64; 0 for other dtypes). */
static double floatAt(const char *dtype, const void *data, size_t i) {
  if (strcmp(dtype, "f32") == 0)
    return ((const float *)data)[i];
  if (strcmp(dtype, "f64") == 0)
    return ((const double *)data)[i];
  return 0;
}

static void printOutput(const aicf_tensor_info *info, const void *data) {
  printf("%s %s [", info->name, info->dtype);
  for (int d = 0; d < info->rank; ++d)
    printf("%s%lld", d ? ", " : "", (long long)info->shape[d]);
  printf("]:");
  size_t elem = npy_dtype_size(info->dtype), count = elem ? info->bytes / elem : 0;
  for (size_t i = 0; i < count && i < 8; ++i) {
    const char *t = info->dtype;
    if (strcmp(t, "f32") == 0 || strcmp(t, "f64") == 0)
      printf(" %.6g", floatAt(t, data, i));
    else if (strcmp(t, "i64") == 0)
      printf(" %lld", (long long)((const int64_t *)data)[i]);
    else if (strcmp(t, "i32") == 0)
      printf(" %d", ((const int32_t *)data)[i]);
    else if (strcmp(t, "i16") == 0)
      printf(" %d", ((const int16_t *)data)[i]);
    else if (strcmp(t, "i8") == 0)
      printf(" %d", ((const int8_t *)data)[i]);
    else if (strcmp(t, "u64") == 0)
      printf(" %llu", (unsigned long long)((const uint64_t *)data)[i]);
    else if (strcmp(t, "u32") == 0)
      printf(" %u", ((const uint32_t *)data)[i]);
    else if (strcmp(t, "u16") == 0)
      printf(" %u", ((const uint16_t *)data)[i]);
    else if (strcmp(t, "u8") == 0 || strcmp(t, "bool") == 0)
      printf(" %u", ((const uint8_t *)data)[i]);
    else /* f16, bf16: the bits */
      printf(" 0x%04x", ((const uint16_t *)data)[i]);
  }
  printf("%s\n", count > 8 ? " ..." : "");
}

/* 0 when the output matches DIR/NAME.npy, 3 when it differs, 1 when the file cannot be read. */
static int compareOutput(const aicf_tensor_info *info, const void *data, const char *dir,
                         double tol) {
  char path[4096], err[4400];
  snprintf(path, sizeof path, "%s/%s.npy", dir, info->name);
  npy_array want;
  if (npy_read(path, &want, err, sizeof err) != 0)
    return fail(1, "reference", err);
  int rc = 0;
  if (strcmp(want.dtype, info->dtype) != 0 || want.bytes != info->bytes) {
    fprintf(stderr, "run_folder: %s: reference %s is %s of %zu bytes, the output %s of %zu\n",
            info->name, path, want.dtype, want.bytes, info->dtype, info->bytes);
    rc = 3;
  } else if (strcmp(info->dtype, "f32") == 0 || strcmp(info->dtype, "f64") == 0) {
    size_t count = info->bytes / npy_dtype_size(info->dtype), bad = 0;
    double worst = 0;
    for (size_t i = 0; i < count; ++i) {
      double g = floatAt(info->dtype, data, i), w = floatAt(info->dtype, want.data, i);
      double e = fabs(g - w);
      if (!(e <= tol * (1 + fabs(w))))
        ++bad;
      if (e > worst || e != e)
        worst = e;
    }
    printf("%s: max abs err %.3g against %s (%zu of %zu elements outside tolerance)\n",
           info->name, worst, path, bad, count);
    rc = bad ? 3 : 0;
  } else if (memcmp(data, want.data, info->bytes) != 0) {
    fprintf(stderr, "run_folder: %s differs from %s\n", info->name, path);
    rc = 3;
  }
  npy_free(&want);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0) {
    fprintf(stderr, "usage: %s FOLDER NAME=FILE.npy... [--threads N] [--save DIR] "
                    "[--reference DIR [--tol T]]\n",
            argv[0]);
    return 1;
  }
  const char *folder = argv[1], *saveDir = NULL, *refDir = NULL;
  int threads = 0;
  double tol = 1e-4;
  /* The NAME=FILE.npy arguments, matched to the folder's inputs once it is open. */
  const char *pairs[64];
  int numPairs = 0;
  for (int a = 2; a < argc; ++a) {
    const char *arg = argv[a];
    if ((strcmp(arg, "--threads") == 0 || strcmp(arg, "--save") == 0 ||
         strcmp(arg, "--reference") == 0 || strcmp(arg, "--tol") == 0) &&
        a + 1 == argc)
      return fail(1, arg, "needs a value");
    if (strcmp(arg, "--threads") == 0)
      threads = atoi(argv[++a]);
    else if (strcmp(arg, "--save") == 0)
      saveDir = argv[++a];
    else if (strcmp(arg, "--reference") == 0)
      refDir = argv[++a];
    else if (strcmp(arg, "--tol") == 0)
      tol = atof(argv[++a]);
    else if (strchr(arg, '=') && numPairs < 64)
      pairs[numPairs++] = arg;
    else
      return fail(1, "unexpected argument", arg);
  }

  aicf_model *m = aicf_open(folder);
  if (!m)
    return fail(2, aicf_last_error(), NULL);
  int rc = 0, mismatch = 0, nin = aicf_num_inputs(m), nout = aicf_num_outputs(m);
  npy_array *ins = calloc((size_t)nin + 1, sizeof *ins);
  const void **inPtrs = calloc((size_t)nin + 1, sizeof *inPtrs);
  void **outPtrs = calloc((size_t)nout + 1, sizeof *outPtrs);
  char err[4400];
  if (threads && aicf_set_num_threads(m, threads) != 0) {
    rc = fail(1, "--threads", aicf_last_error());
    goto done;
  }
  for (int i = 0; i < nin && !rc; ++i) {
    aicf_tensor_info info;
    aicf_input_info(m, i, &info);
    size_t nameLen = strlen(info.name);
    const char *file = NULL;
    for (int p = 0; p < numPairs; ++p)
      if (strncmp(pairs[p], info.name, nameLen) == 0 && pairs[p][nameLen] == '=')
        file = pairs[p] + nameLen + 1;
    if (!file) {
      fprintf(stderr, "run_folder: error: input '%s' needs %s=FILE.npy\n", info.name, info.name);
      rc = 1;
      break;
    }
    if (npy_read(file, &ins[i], err, sizeof err) != 0) {
      rc = fail(1, "input", err);
      break;
    }
    if (strcmp(ins[i].dtype, info.dtype) != 0) {
      fprintf(stderr, "run_folder: error: %s is %s, input '%s' is %s\n", file, ins[i].dtype,
              info.name, info.dtype);
      rc = 1;
      break;
    }
    /* Sets the file's shape (a static folder accepts only its own; the runtime says so). */
    if (aicf_set_input_shape(m, i, ins[i].rank, ins[i].shape) != 0) {
      rc = fail(1, file, aicf_last_error());
      break;
    }
    aicf_input_info(m, i, &info);
    if (info.bytes != ins[i].bytes) {
      rc = fail(1, file, "its size differs from the input's");
      break;
    }
    inPtrs[i] = ins[i].data;
  }
  for (int o = 0; o < nout && !rc; ++o) {
    aicf_tensor_info info;
    if (aicf_output_info(m, o, &info) != 0) {
      rc = fail(2, aicf_last_error(), NULL);
      break;
    }
    outPtrs[o] = malloc(info.bytes ? info.bytes : 1);
    if (!outPtrs[o])
      rc = fail(2, "out of memory", info.name);
  }
  if (!rc && aicf_run(m, inPtrs, outPtrs) != 0)
    rc = fail(2, aicf_last_error(), NULL);
  for (int o = 0; o < nout && !rc; ++o) {
    aicf_tensor_info info;
    aicf_output_info(m, o, &info);
    printOutput(&info, outPtrs[o]);
    if (saveDir) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s.npy", saveDir, info.name);
      if (npy_write(path, info.dtype, info.rank, info.shape, outPtrs[o], info.bytes, err,
                    sizeof err) != 0)
        rc = fail(1, "--save", err);
    }
    if (refDir && !rc) {
      int c = compareOutput(&info, outPtrs[o], refDir, tol);
      if (c == 3)
        mismatch = 1; /* keep comparing the other outputs; report them all */
      else
        rc = c;
    }
  }
  if (!rc && mismatch)
    rc = 3;
done:
  for (int i = 0; i < nin; ++i)
    npy_free(&ins[i]);
  for (int o = 0; o < nout; ++o)
    free(outPtrs[o]);
  free(ins);
  free(inPtrs);
  free(outPtrs);
  aicf_close(m);
  return rc;
}
