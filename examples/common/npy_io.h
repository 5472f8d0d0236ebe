/* Reading and writing NumPy .npy files (format 1.0 to 3.0, little-endian, C order) for the aicf
 * examples: a small header-only C library, so each example is one file plus this one. dtypes use
 * the aicf runtime's names ("f32", "i64", ...; aicf_tensor_info.dtype).
 *
 * npy_read() returns 0 on success and fills an npy_array; on failure it returns non-zero and
 * writes a message naming the file into err. npy_write() likewise. */
#ifndef AICF_EXAMPLES_NPY_IO_H
#define AICF_EXAMPLES_NPY_IO_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAX_RANK 8

typedef struct {
  char dtype[8]; /* aicf's name: "f32", "i64", "bool", ... */
  int rank;
  int64_t shape[NPY_MAX_RANK];
  size_t bytes;
  void *data; /* malloc'd; free with npy_free */
} npy_array;

/* numpy descr <-> aicf dtype, with the element size. */
static const struct {
  const char *descr, *dtype;
  size_t size;
} npy_types[] = {{"<f8", "f64", 8}, {"<f4", "f32", 4}, {"<f2", "f16", 2}, {"<i8", "i64", 8},
                 {"<i4", "i32", 4}, {"<i2", "i16", 2}, {"|i1", "i8", 1},  {"<u8", "u64", 8},
                 {"<u4", "u32", 4}, {"<u2", "u16", 2}, {"|u1", "u8", 1},  {"|b1", "bool", 1}};

static inline size_t npy_dtype_size(const char *dtype) {
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; ++i)
    if (strcmp(npy_types[i].dtype, dtype) == 0)
      return npy_types[i].size;
  return 0;
}

static inline void npy_free(npy_array *a) {
  free(a->data);
  a->data = NULL;
}

static inline int npy_fail(char *err, size_t errSize, const char *path, const char *what) {
  snprintf(err, errSize, "%s: %s", path, what);
  return 1;
}

/* Parses an open .npy file into out; returns NULL or what is wrong. *header is the caller's to
 * free. */
static inline const char *npy_parse(FILE *f, npy_array *out, char **header) {
  unsigned char pre[12];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0 || pre[6] < 1 || pre[6] > 3)
    return "not a .npy file (format 1.0 to 3.0)";
  size_t headerLen = pre[8] | (size_t)pre[9] << 8;
  if (pre[6] >= 2) {
    if (fread(pre + 10, 1, 2, f) != 2)
      return "truncated header";
    headerLen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  }
  if (headerLen > (1u << 20))
    return "header larger than 1 MiB";
  *header = (char *)calloc(1, headerLen + 1);
  if (!*header || fread(*header, 1, headerLen, f) != headerLen)
    return "truncated header";
  /* {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } */
  const char *d = strstr(*header, "'descr':");
  const char *s = strstr(*header, "'shape':");
  if (!d || !s || !strstr(*header, "'fortran_order': False"))
    return "not a C-order array";
  d = strchr(d + 8, '\'');
  size_t elem = 0;
  for (size_t i = 0; d && i < sizeof npy_types / sizeof npy_types[0]; ++i)
    if (strncmp(d + 1, npy_types[i].descr, 3) == 0 && d[4] == '\'') {
      strcpy(out->dtype, npy_types[i].dtype);
      elem = npy_types[i].size;
    }
  if (!elem)
    return "unsupported dtype (little-endian numbers and bool only)";
  s = strchr(s, '(');
  const char *close = s ? strchr(s, ')') : NULL;
  if (!close)
    return "malformed shape";
  size_t count = 1;
  for (const char *p = s + 1; p < close;) {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p) {
      ++p;
      continue;
    }
    if (v < 0 || v > INT32_MAX || out->rank == NPY_MAX_RANK ||
        (v && count > SIZE_MAX / elem / (size_t)v))
      return "shape out of range";
    out->shape[out->rank++] = v;
    count *= (size_t)v;
    p = end;
  }
  out->bytes = count * elem;
  out->data = malloc(out->bytes ? out->bytes : 1);
  if (!out->data || fread(out->data, 1, out->bytes, f) != out->bytes)
    return "data shorter than its shape";
  return NULL;
}

static inline int npy_read(const char *path, npy_array *out, char *err, size_t errSize) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f)
    return npy_fail(err, errSize, path, "cannot open");
  char *header = NULL;
  const char *problem = npy_parse(f, out, &header);
  free(header);
  fclose(f);
  if (problem) {
    npy_free(out);
    return npy_fail(err, errSize, path, problem);
  }
  return 0;
}

static inline int npy_write(const char *path, const char *dtype, int rank, const int64_t *shape,
                            const void *data, size_t bytes, char *err, size_t errSize) {
  const char *descr = NULL;
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; ++i)
    if (strcmp(npy_types[i].dtype, dtype) == 0)
      descr = npy_types[i].descr;
  if (!descr)
    return npy_fail(err, errSize, path, "dtype has no .npy form");
  char header[512];
  int n =
      snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < rank; ++i)
    n += snprintf(header + n, sizeof header - (size_t)n, "%lld%s", (long long)shape[i],
                  rank == 1 ? "," : (i + 1 < rank ? ", " : ""));
  n += snprintf(header + n, sizeof header - (size_t)n, "), }");
  /* Pad with spaces so the data starts 64-byte aligned; the header ends with '\n'. */
  while ((10 + n + 1) % 64 != 0)
    header[n++] = ' ';
  header[n++] = '\n';
  unsigned char pre[10] = {
      0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff), (unsigned char)(n >> 8)};
  FILE *f = fopen(path, "wb");
  if (!f)
    return npy_fail(err, errSize, path, "cannot create");
  int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)n, f) == (size_t)n &&
           fwrite(data, 1, bytes, f) == bytes;
  ok = (fclose(f) == 0) && ok;
  return ok ? 0 : npy_fail(err, errSize, path, "write failed");
}

#endif /* AICF_EXAMPLES_NPY_IO_H */
