/* A plain C user of the aicf runtime, linked with -laicf_runtime only (no OpenMP): opens compiled
 * folders, runs each on a stored input with a pool of 4 threads, compares with the stored
 * reference output, and closes them, in the patterns a server uses (one after another, the same
 * folder twice at once, two folders at once, closed in either order). aicf_close must stop the
 * model's pool before unloading its libmodel.so: after each close the program sleeps, so that a
 * worker left running in unmapped code faults before exit (the OpenMP build once did), and a
 * worker that never stops hangs the close.
 *
 * usage: aicf_c_api_test FOLDER INPUT.npy REFERENCE.npy [FOLDER INPUT.npy REFERENCE.npy]...
 * Each folder has one f32 input and one f32 output. Prints "ok" and exits 0 on success. */
#include "runtime/aicf_runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  const char *dir;
  float *input, *want;
  size_t inBytes, outBytes;
} Case;

static void die(const char *what, const char *detail) {
  fprintf(stderr, "FAIL: %s: %s\n", what, detail);
  exit(1);
}

/* Reads a little-endian f32 .npy file (format 1.0 or 2.0); returns its data, *bytes its size. */
static float *readNpy(const char *path, size_t *bytes) {
  FILE *f = fopen(path, "rb");
  if (!f)
    die("cannot open", path);
  unsigned char head[12];
  if (fread(head, 1, 10, f) != 10 || memcmp(head, "\x93NUMPY", 6) != 0)
    die("not a .npy file", path);
  size_t headerLen = head[8] | (size_t)head[9] << 8, start = 10;
  if (head[6] >= 2) {
    if (fread(head + 10, 1, 2, f) != 2)
      die("truncated .npy header", path);
    headerLen |= (size_t)head[10] << 16 | (size_t)head[11] << 24;
    start = 12;
  }
  char *header = calloc(1, headerLen + 1);
  if (fread(header, 1, headerLen, f) != headerLen || !strstr(header, "'<f4'") ||
      !strstr(header, "'fortran_order': False"))
    die("not a C-order f32 .npy file", path);
  free(header);
  fseek(f, 0, SEEK_END);
  long end = ftell(f);
  *bytes = (size_t)end - start - headerLen;
  float *data = malloc(*bytes ? *bytes : 1);
  fseek(f, (long)(start + headerLen), SEEK_SET);
  if (fread(data, 1, *bytes, f) != *bytes)
    die("cannot read", path);
  fclose(f);
  return data;
}

static aicf_model *openChecked(const Case *c) {
  aicf_model *m = aicf_open(c->dir);
  if (!m)
    die("aicf_open", aicf_last_error());
  aicf_tensor_info in, out;
  if (aicf_num_inputs(m) != 1 || aicf_num_outputs(m) != 1 || aicf_input_info(m, 0, &in) != 0 ||
      aicf_output_info(m, 0, &out) != 0 || strcmp(in.dtype, "f32") != 0 ||
      strcmp(out.dtype, "f32") != 0)
    die(c->dir, "expected one f32 input and one f32 output");
  if (in.bytes != c->inBytes || out.bytes != c->outBytes)
    die(c->dir, "the .npy sizes differ from the folder's tensors");
  if (aicf_set_num_threads(m, 4) != 0)
    die("aicf_set_num_threads", aicf_last_error());
  return m;
}

/* Runs m and compares with the reference: |got - want| <= 1e-4 + 1e-4 * |want|. */
static void runChecked(aicf_model *m, const Case *c) {
  float *got = calloc(1, c->outBytes);
  const void *ins[1] = {c->input};
  void *outs[1] = {got};
  if (aicf_run(m, ins, outs) != 0)
    die("aicf_run", aicf_last_error());
  for (size_t i = 0; i < c->outBytes / sizeof(float); ++i)
    if (!(fabsf(got[i] - c->want[i]) <= 1e-4f + 1e-4f * fabsf(c->want[i]))) {
      fprintf(stderr, "FAIL: %s: element %zu is %g, expected %g\n", c->dir, i, got[i], c->want[i]);
      exit(1);
    }
  free(got);
}

static void closeAndWait(aicf_model *m) {
  aicf_close(m);
  usleep(100 * 1000);
}

int main(int argc, char **argv) {
  if (argc < 4 || (argc - 1) % 3 != 0) {
    fprintf(stderr, "usage: %s FOLDER INPUT.npy REFERENCE.npy [...]\n", argv[0]);
    return 2;
  }
  int n = (argc - 1) / 3;
  Case *cases = calloc((size_t)n, sizeof(Case));
  for (int i = 0; i < n; ++i) {
    cases[i].dir = argv[1 + 3 * i];
    cases[i].input = readNpy(argv[2 + 3 * i], &cases[i].inBytes);
    cases[i].want = readNpy(argv[3 + 3 * i], &cases[i].outBytes);
  }
  /* One after another, twice over: the second round loads every library again. */
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < n; ++i) {
      aicf_model *m = openChecked(&cases[i]);
      runChecked(m, &cases[i]);
      closeAndWait(m);
    }
  /* The same folder open twice at once (dlopen shares one libmodel.so), closed in turn. */
  aicf_model *a = openChecked(&cases[0]), *b = openChecked(&cases[0]);
  runChecked(a, &cases[0]);
  runChecked(b, &cases[0]);
  closeAndWait(a);
  runChecked(b, &cases[0]);
  closeAndWait(b);
  /* Two folders open at once, closed in the order they were opened. */
  if (n >= 2) {
    a = openChecked(&cases[0]);
    b = openChecked(&cases[1]);
    runChecked(a, &cases[0]);
    runChecked(b, &cases[1]);
    closeAndWait(a);
    runChecked(b, &cases[1]);
    closeAndWait(b);
  }
  for (int i = 0; i < n; ++i) {
    free(cases[i].input);
    free(cases[i].want);
  }
  free(cases);
  printf("ok\n");
  return 0;
}
