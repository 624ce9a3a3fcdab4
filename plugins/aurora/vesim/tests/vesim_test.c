/* vesim_test.c — vesim's own tests: runtime, memory, streams, kernels, errors, statistics.
 *
 * Run with no argument for every test, or with a test name. Exit status 0 when all pass. Set
 * VESIM_DEVICES=2 for the multi-device test (it skips otherwise). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vesim.h"
#include "vesim_device.h"

static int failures = 0;

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s (detail: %s)\n", __FILE__, __LINE__, #cond, \
              vesimGetLastErrorDetail());                                             \
      failures++;                                                                     \
      return;                                                                         \
    }                                                                                 \
  } while (0)

#define OK(call) CHECK((call) == VESIM_SUCCESS)

static VESIMstream stream0(void) {
  VESIMcontext ctx;
  VESIMstream s = NULL;
  if (vesimCtxGet(0, &ctx) != VESIM_SUCCESS) return NULL;
  vesimCtxGetStream(ctx, 0, &s);
  return s;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- kernels ---- */

typedef struct {
  VESIMdeviceptr ptr;
  uint64_t n;
  float add;
} AddArgs;

static VESIMresult k_add(VESIMkernel_ctx* k, void* p) {
  AddArgs* a = (AddArgs*)p;
  float* x;
  VESIMresult r = vesimDevResolve(k, a->ptr, a->n * sizeof(float), "k_add", (void**)&x);
  if (r) return r;
  for (uint64_t i = 0; i < a->n; i++) x[i] += a->add;
  return VESIM_SUCCESS;
}

static VESIMresult k_fail(VESIMkernel_ctx* k, void* p) {
  (void)p;
  return vesimDevFail(k, VESIM_ERROR_INVALID_VALUE, "k_fail: value %d rejected", 42);
}

static VESIMresult k_crash(VESIMkernel_ctx* k, void* p) {
  (void)k;
  (void)p;
  volatile int* bad = (volatile int*)(uintptr_t)16;
  *bad = 1;  /* SIGSEGV on the stream worker */
  return VESIM_SUCCESS;
}

static void crash_body(void* arg, int64_t b, int64_t e, int core) {
  (void)arg;
  (void)b;
  (void)e;
  if (core == 1) *(volatile int*)(uintptr_t)8 = 1;
}

static VESIMresult k_crash_parallel(VESIMkernel_ctx* k, void* p) {
  (void)p;
  return vesimDevParallelFor(k, 1000, 1, crash_body, NULL);
}

static void count_body(void* arg, int64_t b, int64_t e, int core) {
  (void)core;
  atomic_int* hits = (atomic_int*)arg;
  for (int64_t i = b; i < e; i++) atomic_fetch_add(&hits[i], 1);
}

static VESIMresult k_count(VESIMkernel_ctx* k, void* p) {
  atomic_int* hits = *(atomic_int**)p;
  return vesimDevParallelFor(k, 1001, 7, count_body, hits);
}

/* Writes `n` floats of `dst` (declared as an output) with `value`, copied from `src` when set;
 * then fails if `fail` (after writing `written` of them), crashes if `crash`. `stride` 2 writes
 * every other float (not dense). */
typedef struct {
  VESIMdeviceptr dst, src;
  uint64_t n, written;
  float value;
  int fail, crash, stride;
} WriteArgs;

static VESIMresult k_write(VESIMkernel_ctx* k, void* p) {
  WriteArgs* a = (WriteArgs*)p;
  float *y, *x = NULL;
  uint64_t span = a->stride > 1 ? (a->n - 1) * (uint64_t)a->stride + 1 : a->n;
  VESIMresult r = vesimDevResolveOut(k, a->dst, span * sizeof(float), a->stride <= 1, "y",
                                     (void**)&y);
  if (r) return r;
  if (a->src && (r = vesimDevResolve(k, a->src, a->n * sizeof(float), "x", (void**)&x))) return r;
  for (uint64_t i = 0; i < (a->fail ? a->written : a->n); i++)
    y[i * (uint64_t)(a->stride > 1 ? a->stride : 1)] = x ? x[i] : a->value;
  if (a->crash) *(volatile int*)(uintptr_t)16 = 1;
  if (a->fail) return vesimDevFail(k, VESIM_ERROR_INVALID_VALUE, "k_write: target %d rejected", 7);
  return VESIM_SUCCESS;
}

static VESIMresult k_sleep(VESIMkernel_ctx* k, void* p) {
  (void)k;
  usleep(*(unsigned*)p);
  return VESIM_SUCCESS;
}

/* ---- tests ---- */

static void test_errors_named(void) {
  for (int r = 0; r <= VESIM_ERROR_UNKNOWN; r++) {
    CHECK(strncmp(vesimGetErrorName((VESIMresult)r), "VESIM_", 6) == 0);
    CHECK(strlen(vesimGetErrorString((VESIMresult)r)) > 3);
  }
  CHECK(strcmp(vesimGetErrorName(VESIM_ERROR_OUT_OF_BOUNDS), "VESIM_ERROR_OUT_OF_BOUNDS") == 0);
}

static void test_device_info(void) {
  int n;
  VESIMdeviceinfo info;
  OK(vesimDeviceGetCount(&n));
  CHECK(n >= 1);
  OK(vesimDeviceGetInfo(0, &info));
  CHECK(info.cores == 8 && info.vector_length == 256);
  CHECK(strstr(info.name, "vesim") != NULL);
  CHECK(vesimDeviceGetInfo(n, &info) == VESIM_ERROR_INVALID_DEVICE);
  uint64_t fr, total;
  OK(vesimMemGetInfo(0, &fr, &total));
  CHECK(total == info.memory && fr <= total);
}

static void test_contexts(void) {
  VESIMcontext ctx, again;
  int count;
  OK(vesimCtxGet(0, &ctx));
  OK(vesimCtxStreamCount(ctx, &count));
  CHECK(count == 1); /* OMP mode: one stream, all cores */
  CHECK(vesimCtxCreate(&again, VESIM_CONTEXT_MODE_OMP, 0) == VESIM_ERROR_CONTEXT_EXISTS);
  VESIMstream extra;
  OK(vesimStreamCreate(ctx, &extra));
  OK(vesimStreamQuery(extra));
  OK(vesimStreamDestroy(extra));
  CHECK(vesimStreamQuery(extra) == VESIM_ERROR_INVALID_STREAM);
}

static void test_scalar_mode(void) {
  /* destroy the OMP context, make a SCALAR one (a stream per core), then restore */
  VESIMcontext ctx;
  int count;
  OK(vesimCtxGet(0, &ctx));
  OK(vesimCtxDestroy(ctx));
  CHECK(vesimCtxGet(0, &ctx) == VESIM_ERROR_INVALID_CONTEXT);
  OK(vesimCtxCreate(&ctx, VESIM_CONTEXT_MODE_SCALAR, 0));
  OK(vesimCtxStreamCount(ctx, &count));
  CHECK(count == 8);
  VESIMstream s7;
  OK(vesimCtxGetStream(ctx, 7, &s7));
  CHECK(vesimCtxGetStream(ctx, 8, &s7) == VESIM_ERROR_INVALID_VALUE);
  OK(vesimCtxDestroy(ctx));
  OK(vesimCtxCreate(&ctx, VESIM_CONTEXT_MODE_OMP, 0));
}

static void test_pointer_layout(void) {
  VESIMstream s = stream0();
  VESIMdeviceptr a, b;
  OK(vesimMemAllocAsync(&a, 100, s));
  OK(vesimMemAllocAsync(&b, 100, s));
  CHECK(VESIM_PTR_DEVICE(a) == 0 && VESIM_PTR_OFFSET(a) == 0);
  CHECK(VESIM_PTR_INDEX(a) != 0 && VESIM_PTR_INDEX(b) != VESIM_PTR_INDEX(a));
  VESIMdeviceptr base;
  size_t size;
  OK(vesimStreamSynchronize(s));
  OK(vesimMemGetAddressRange(&base, &size, a + 40));
  CHECK(base == a && size == 100);
  OK(vesimMemFreeAsync(a, s));
  OK(vesimMemFreeAsync(b, s));
  OK(vesimStreamSynchronize(s));
}

static void test_copies_roundtrip(void) {
  VESIMstream s = stream0();
  enum { N = 3000 };
  static uint8_t src[N], dst[N];
  for (int i = 0; i < N; i++) src[i] = (uint8_t)(i * 7);
  VESIMdeviceptr a, b;
  OK(vesimMemAllocAsync(&a, N, s));
  OK(vesimMemAllocAsync(&b, N, s));
  OK(vesimMemcpyHtoDAsync(a, src, N, s));
  OK(vesimMemcpyDtoDAsync(b + 1000, a, 2000, s)); /* offset pointers work */
  OK(vesimMemsetD8Async(b, 0xAB, 1000, s));
  OK(vesimMemcpyDtoHAsync(dst, b, N, s));
  OK(vesimStreamSynchronize(s));
  for (int i = 0; i < 1000; i++) CHECK(dst[i] == 0xAB);
  CHECK(memcmp(dst + 1000, src, 2000) == 0);
  /* sync forms, and the wider memsets */
  OK(vesimMemsetD32(a, 0x01020304u, N / 4));
  uint32_t w[4];
  OK(vesimMemcpyDtoH(w, a, sizeof w));
  CHECK(w[0] == 0x01020304u && w[3] == 0x01020304u);
  OK(vesimMemsetD16Async(a, 0xBEEF, 8, s));
  OK(vesimMemsetD64Async(a + 16, 0x1122334455667788ull, 2, s));
  uint16_t h[8];
  uint64_t q[2];
  OK(vesimMemcpyDtoHAsync(h, a, sizeof h, s));
  OK(vesimMemcpyDtoHAsync(q, a + 16, sizeof q, s));
  OK(vesimStreamSynchronize(s));
  CHECK(h[0] == 0xBEEF && h[7] == 0xBEEF);
  CHECK(q[0] == 0x1122334455667788ull && q[1] == 0x1122334455667788ull);
  OK(vesimMemsetD64(a, 7, 1));
  OK(vesimMemsetD16(a + 8, 9, 1));
  OK(vesimMemcpyDtoH(q, a, sizeof q));
  CHECK(q[0] == 7 && (q[1] & 0xFFFF) == 9);
  CHECK(vesimMemsetD8(a, 0, N + 1) == VESIM_ERROR_OUT_OF_BOUNDS);
  OK(vesimMemFree(a));
  OK(vesimMemFree(b));
}

static void test_bounds(void) {
  VESIMstream s = stream0();
  VESIMdeviceptr a;
  char buf[64] = {0};
  OK(vesimMemAllocAsync(&a, 32, s));
  OK(vesimMemcpyHtoDAsync(a + 16, buf, 17, s)); /* one byte past the end: found by the device */
  CHECK(vesimStreamSynchronize(s) == VESIM_ERROR_OUT_OF_BOUNDS);
  CHECK(strstr(vesimGetLastErrorDetail(), "leaves") != NULL);
  OK(vesimStreamSynchronize(s)); /* the error was reported once; the stream still works */
  OK(vesimMemcpyHtoDAsync(a + 16, buf, 16, s));
  OK(vesimMemsetD32Async(a, 0, 9, s));
  CHECK(vesimStreamSynchronize(s) == VESIM_ERROR_OUT_OF_BOUNDS);
  OK(vesimMemFreeAsync(a, s));
  OK(vesimStreamSynchronize(s));
}

static void test_free_errors(void) {
  VESIMstream s = stream0();
  VESIMdeviceptr a;
  char buf[8];
  OK(vesimMemAllocAsync(&a, 64, s));
  CHECK(vesimMemFreeAsync(a + 8, s) == VESIM_ERROR_OFFSETTED_VPTR_NOT_ALLOWED);
  OK(vesimMemFreeAsync(a, s));
  CHECK(vesimMemFreeAsync(a, s) == VESIM_ERROR_UNKNOWN_VPTR); /* double free */
  OK(vesimMemcpyDtoHAsync(buf, a, 8, s));                     /* use after free */
  CHECK(vesimStreamSynchronize(s) == VESIM_ERROR_UNKNOWN_VPTR);
  VESIMdeviceptr never = ((VESIMdeviceptr)4000000 << 37);
  OK(vesimMemcpyDtoHAsync(buf, never, 8, s));
  CHECK(vesimStreamSynchronize(s) == VESIM_ERROR_UNKNOWN_VPTR);
  CHECK(vesimMemcpyDtoHAsync(buf, 0, 8, s) == VESIM_ERROR_UNKNOWN_VPTR); /* index 0 */
}

static void test_out_of_memory(void) {
  VESIMstream s = stream0();
  uint64_t fr, total;
  OK(vesimMemGetInfo(0, &fr, &total));
  VESIMdeviceptr a, b;
  CHECK(vesimMemAllocAsync(&a, fr + 1, s) == VESIM_ERROR_OUT_OF_MEMORY);
  /* the whole memory is reservable: untouched pages cost the host nothing */
  OK(vesimMemAllocAsync(&a, fr, s));
  CHECK(vesimMemAllocAsync(&b, 1, s) == VESIM_ERROR_OUT_OF_MEMORY);
  OK(vesimMemsetD8Async(a + fr - 4096, 1, 4096, s)); /* touch the last page */
  OK(vesimMemFreeAsync(a, s));
  OK(vesimStreamSynchronize(s));
  uint64_t after;
  OK(vesimMemGetInfo(0, &after, &total));
  CHECK(after == fr);
}

static void test_packed(void) {
  VESIMstream s = stream0();
  VESIMdeviceptr a;
  int in[16], out[16];
  for (int i = 0; i < 16; i++) in[i] = i * i;
  OK(vesimMemAllocAsync(&a, 64, s));
  VESIMpacked_copy up[4], down[4];
  for (int i = 0; i < 4; i++) {
    up[i] = (VESIMpacked_copy){VESIM_COPY_HTOD, a + 16 * (uint64_t)i, in + 4 * i, 16};
    down[i] = (VESIMpacked_copy){VESIM_COPY_DTOH, a + 16 * (uint64_t)(3 - i), out + 4 * i, 16};
  }
  VESIMstats before, after;
  OK(vesimGetStats(0, &before));
  OK(vesimMemcpyPackedAsync(up, 4, s));
  OK(vesimMemcpyPackedAsync(down, 4, s));
  OK(vesimStreamSynchronize(s));
  OK(vesimGetStats(0, &after));
  CHECK(after.packed_copies == before.packed_copies + 2);
  for (int i = 0; i < 4; i++) CHECK(memcmp(out + 4 * i, in + 4 * (3 - i), 16) == 0);
  up[1].size = 17 + 48; /* leaves the allocation */
  OK(vesimMemcpyPackedAsync(up, 4, s));
  CHECK(vesimStreamSynchronize(s) == VESIM_ERROR_OUT_OF_BOUNDS);
  OK(vesimMemFreeAsync(a, s));
  OK(vesimStreamSynchronize(s));
}

static void test_kernels(void) {
  VESIMstream s = stream0();
  VESIMdeviceptr a;
  float x[100];
  for (int i = 0; i < 100; i++) x[i] = (float)i;
  OK(vesimMemAllocAsync(&a, sizeof x, s));
  OK(vesimMemcpyHtoDAsync(a, x, sizeof x, s));
  AddArgs args = {a, 100, 0.5f};
  OK(vesimLaunchKernel(k_add, s, &args, sizeof args));
  args.add = 1.0f; /* the pack was copied at launch: this change does not reach the first one */
  OK(vesimLaunchKernelNamed("k_add", k_add, s, &args, sizeof args));
  OK(vesimMemcpyDtoHAsync(x, a, sizeof x, s));
  OK(vesimStreamSynchronize(s));
  for (int i = 0; i < 100; i++) CHECK(x[i] == (float)i + 1.5f);
  args.n = 101; /* bounds-checked on the device */
  OK(vesimLaunchKernel(k_add, s, &args, sizeof args));
  CHECK(vesimStreamSynchronize(s) == VESIM_ERROR_OUT_OF_BOUNDS);
  OK(vesimLaunchKernel(k_fail, s, NULL, 0));
  CHECK(vesimStreamSynchronize(s) == VESIM_ERROR_INVALID_VALUE);
  CHECK(strstr(vesimGetLastErrorDetail(), "value 42 rejected") != NULL);
  OK(vesimMemFreeAsync(a, s));
  OK(vesimStreamSynchronize(s));
}

static void test_crashes(void) {
  VESIMstream s = stream0();
  VESIMstats before, after;
  OK(vesimGetStats(0, &before));
  OK(vesimLaunchKernel(k_crash, s, NULL, 0));
  CHECK(vesimStreamSynchronize(s) == VESIM_ERROR_KERNEL_CRASHED);
  CHECK(strstr(vesimGetLastErrorDetail(), "signal") != NULL);
  OK(vesimLaunchKernel(k_crash_parallel, s, NULL, 0)); /* a crash on a helper core */
  CHECK(vesimStreamSynchronize(s) == VESIM_ERROR_KERNEL_CRASHED);
  /* the stream and its cores keep working */
  static atomic_int hits[1001];
  atomic_int* p = hits;
  OK(vesimLaunchKernel(k_count, s, &p, sizeof p));
  OK(vesimStreamSynchronize(s));
  for (int i = 0; i < 1001; i++) CHECK(atomic_load(&hits[i]) == 1);
  OK(vesimGetStats(0, &after));
  CHECK(after.kernel_errors == before.kernel_errors + 2);
}

static int order[8];
static atomic_int order_n;
static void cb_record(VESIMstream s, VESIMresult status, void* user) {
  (void)s;
  (void)status;
  order[atomic_fetch_add(&order_n, 1)] = (int)(intptr_t)user;
}
static VESIMresult cb_status;
static void cb_status_fn(VESIMstream s, VESIMresult status, void* user) {
  (void)s;
  (void)user;
  cb_status = status;
}

static VESIMresult marker_query = VESIM_ERROR_UNKNOWN;
static void cb_marker_query(VESIMstream s, VESIMresult status, void* user) {
  (void)status;
  (void)user;
  marker_query = vesimStreamQuery(s);
}

static void test_streams(void) {
  VESIMstream s = stream0();
  unsigned us = 50000;
  OK(vesimLaunchKernel(k_sleep, s, &us, sizeof us));
  CHECK(vesimStreamQuery(s) == VESIM_ERROR_NOT_READY);
  for (int i = 0; i < 5; i++) OK(vesimStreamAddCallback(s, cb_record, (void*)(intptr_t)i));
  OK(vesimStreamSynchronize(s));
  OK(vesimStreamQuery(s));
  CHECK(atomic_load(&order_n) == 5);
  for (int i = 0; i < 5; i++) CHECK(order[i] == i); /* FIFO */
  OK(vesimLaunchKernel(k_fail, s, NULL, 0));
  OK(vesimStreamAddCallback(s, cb_status_fn, NULL));
  CHECK(vesimStreamSynchronize(s) == VESIM_ERROR_INVALID_VALUE);
  CHECK(cb_status == VESIM_ERROR_INVALID_VALUE); /* callbacks see the pending error */
  CHECK(vesimStreamAddCallback(s, NULL, NULL) == VESIM_ERROR_INVALID_VALUE);
  OK(vesimLaunchKernel(k_sleep, s, &us, sizeof us));
  OK(vesimStreamAddMarker(s, cb_marker_query, NULL));
  OK(vesimStreamSynchronize(s));
  CHECK(marker_query == VESIM_SUCCESS); /* a started marker, last in its stream, counts as idle */
  CHECK(vesimStreamAddMarker(s, NULL, NULL) == VESIM_ERROR_INVALID_VALUE);
  CHECK(vesimStreamSynchronize((VESIMstream)(uintptr_t)0x1234) == VESIM_ERROR_INVALID_STREAM);
}

/* A failure on stream A is returned by A's next synchronize only: never by B's, never twice. */
static uint64_t cb_error_id;
static char cb_detail[256];
static void cb_take_id(VESIMstream s, VESIMresult status, void* user) {
  (void)s;
  (void)user;
  cb_status = status;
  cb_error_id = vesimGetLastErrorId();
  snprintf(cb_detail, sizeof cb_detail, "%s", vesimGetLastErrorDetail());
}

static void test_stream_errors(void) {
  VESIMcontext ctx;
  VESIMstream a, b;
  VESIMdeviceptr m;
  OK(vesimCtxGet(0, &ctx));
  OK(vesimStreamCreate(ctx, &a));
  OK(vesimStreamCreate(ctx, &b));
  OK(vesimMemAllocAsync(&m, 64, b));
  OK(vesimLaunchKernelNamed("k_fail", k_fail, a, NULL, 0));
  VESIMresult q = vesimStreamQuery(a);
  CHECK(q == VESIM_SUCCESS || q == VESIM_ERROR_NOT_READY); /* a query never takes the error */
  OK(vesimMemsetD8Async(m, 1, 64, b));
  OK(vesimStreamSynchronize(b)); /* B's work is fine, whatever A did */
  OK(vesimStreamSynchronize(b));
  CHECK(vesimStreamSynchronize(a) == VESIM_ERROR_INVALID_VALUE);
  CHECK(strstr(vesimGetLastErrorDetail(), "k_fail: value 42 rejected") != NULL);
  CHECK(vesimGetLastErrorId() != 0);
  OK(vesimStreamSynchronize(a)); /* reported once */
  /* a callback sees the pending error without taking it; clearing by id takes it */
  OK(vesimLaunchKernelNamed("k_fail", k_fail, a, NULL, 0));
  OK(vesimStreamAddCallback(a, cb_take_id, NULL));
  while (vesimStreamQuery(a) == VESIM_ERROR_NOT_READY) usleep(100);
  CHECK(cb_status == VESIM_ERROR_INVALID_VALUE && cb_error_id != 0);
  CHECK(strstr(cb_detail, "value 42") != NULL);
  OK(vesimStreamClearError(a, cb_error_id + 1000)); /* another id: nothing taken */
  OK(vesimStreamClearError(b, cb_error_id));        /* another stream: nothing taken */
  OK(vesimStreamClearError(a, cb_error_id));
  OK(vesimStreamSynchronize(a));
  /* the context's synchronize takes every stream's pending error, all in one detail */
  OK(vesimLaunchKernelNamed("k_fail", k_fail, a, NULL, 0));
  char buf[8];
  OK(vesimMemcpyDtoHAsync(buf, m, 65, b));
  CHECK(vesimCtxSynchronize(ctx) != VESIM_SUCCESS);
  CHECK(strstr(vesimGetLastErrorDetail(), "value 42") != NULL);
  CHECK(strstr(vesimGetLastErrorDetail(), "leaves") != NULL);
  OK(vesimStreamSynchronize(a));
  OK(vesimStreamSynchronize(b));
  OK(vesimMemFreeAsync(m, b));
  OK(vesimStreamDestroy(a));
  OK(vesimStreamDestroy(b));
}

/* What a failed kernel was to write reads back as its failure, on any stream, until rewritten
 * without gaps or freed; reading it in a kernel or a copy fails and poisons that one's output. */
static void test_poison(void) {
  VESIMcontext ctx;
  VESIMstream a, b;
  OK(vesimCtxGet(0, &ctx));
  OK(vesimStreamCreate(ctx, &a));
  OK(vesimStreamCreate(ctx, &b));
  enum { N = 64 };
  float host[2 * N], back[2 * N];
  for (int i = 0; i < 2 * N; i++) host[i] = (float)i;
  VESIMdeviceptr y, z, w;
  OK(vesimMemAllocAsync(&y, 2 * N * sizeof(float), a));
  OK(vesimMemAllocAsync(&z, N * sizeof(float), a));
  OK(vesimMemAllocAsync(&w, N * sizeof(float), a));
  OK(vesimMemcpyHtoDAsync(y, host, sizeof host, a));
  OK(vesimStreamSynchronize(a));
  /* y[0, N) is the failed kernel's output; it wrote 3 values before failing */
  WriteArgs wa = {y, 0, N, 3, 5.0f, 1, 0, 1};
  OK(vesimLaunchKernelNamed("nll_like", k_write, a, &wa, sizeof wa));
  CHECK(vesimStreamSynchronize(a) == VESIM_ERROR_INVALID_VALUE);
  /* reads on another stream: any byte of the output fails, with the original code and message */
  OK(vesimMemcpyDtoHAsync(back, y + 4 * (N - 1), 4, b));
  CHECK(vesimStreamSynchronize(b) == VESIM_ERROR_INVALID_VALUE);
  CHECK(strstr(vesimGetLastErrorDetail(), "nll_like: k_write: target 7 rejected") != NULL);
  CHECK(strstr(vesimGetLastErrorDetail(), "memcpy DtoH source") != NULL);
  OK(vesimMemcpyDtoHAsync(back, y + 4 * N, 4 * N, b)); /* the bytes after it are fine */
  OK(vesimStreamSynchronize(b));
  CHECK(back[0] == (float)N);
  /* a kernel reading it fails and poisons its own output; so does a DtoD copy */
  WriteArgs copy = {z, y, N, 0, 0, 0, 0, 1};
  OK(vesimLaunchKernelNamed("k_copy", k_write, b, &copy, sizeof copy));
  CHECK(vesimStreamSynchronize(b) == VESIM_ERROR_INVALID_VALUE);
  CHECK(strstr(vesimGetLastErrorDetail(), "k_copy: x:") != NULL);
  OK(vesimMemcpyDtoDAsync(w, y + 8, 8, b));
  CHECK(vesimStreamSynchronize(b) == VESIM_ERROR_INVALID_VALUE);
  OK(vesimMemcpyDtoHAsync(back, z, 4, b));
  CHECK(vesimStreamSynchronize(b) == VESIM_ERROR_INVALID_VALUE);
  CHECK(strstr(vesimGetLastErrorDetail(), "target 7 rejected") != NULL);
  OK(vesimMemcpyDtoHAsync(back, w, 4, b));
  CHECK(vesimStreamSynchronize(b) == VESIM_ERROR_INVALID_VALUE);
  /* a strided (gapped) write leaves the poison; a dense one lifts it, a partial one in part */
  WriteArgs strided = {y, 0, N / 2, 0, 1.0f, 0, 0, 2};
  OK(vesimLaunchKernelNamed("k_strided", k_write, a, &strided, sizeof strided));
  OK(vesimStreamSynchronize(a));
  OK(vesimMemcpyDtoHAsync(back, y, 4, a));
  CHECK(vesimStreamSynchronize(a) == VESIM_ERROR_INVALID_VALUE);
  OK(vesimMemcpyHtoDAsync(y + 8, host, 8, a)); /* floats 2 and 3 */
  OK(vesimMemcpyDtoHAsync(back, y + 8, 8, a));
  OK(vesimStreamSynchronize(a));
  OK(vesimMemcpyDtoHAsync(back, y + 4, 8, a)); /* floats 1 and 2: 1 is still poisoned */
  CHECK(vesimStreamSynchronize(a) == VESIM_ERROR_INVALID_VALUE);
  OK(vesimMemsetD32Async(y, 0, N, a)); /* the whole output: readable again */
  OK(vesimMemcpyDtoHAsync(back, y, sizeof back, a));
  OK(vesimStreamSynchronize(a));
  CHECK(back[0] == 0.0f && back[N - 1] == 0.0f && back[N] == (float)N);
  WriteArgs ok = {z, 0, N, 0, 2.0f, 0, 0, 1}; /* a successful kernel rewrites z */
  OK(vesimLaunchKernelNamed("k_ok", k_write, b, &ok, sizeof ok));
  OK(vesimMemcpyDtoHAsync(back, z, N * sizeof(float), b));
  OK(vesimStreamSynchronize(b));
  CHECK(back[0] == 2.0f && back[N - 1] == 2.0f);
  /* a crash poisons too; freeing forgets the poison */
  WriteArgs crash = {w, 0, N, 0, 1.0f, 0, 1, 1};
  OK(vesimLaunchKernelNamed("k_crash_out", k_write, a, &crash, sizeof crash));
  CHECK(vesimStreamSynchronize(a) == VESIM_ERROR_KERNEL_CRASHED);
  OK(vesimMemcpyDtoHAsync(back, w + 16, 4, b));
  CHECK(vesimStreamSynchronize(b) == VESIM_ERROR_KERNEL_CRASHED);
  CHECK(strstr(vesimGetLastErrorDetail(), "k_crash_out") != NULL);
  /* a failed copy poisons its destination (clamped to the allocation) */
  OK(vesimMemcpyHtoDAsync(z + 4 * (N - 2), host, 12, a));
  CHECK(vesimStreamSynchronize(a) == VESIM_ERROR_OUT_OF_BOUNDS);
  OK(vesimMemcpyDtoHAsync(back, z + 4 * (N - 1), 4, a));
  CHECK(vesimStreamSynchronize(a) == VESIM_ERROR_OUT_OF_BOUNDS);
  OK(vesimMemcpyDtoHAsync(back, z, 4, a));
  OK(vesimStreamSynchronize(a));
  OK(vesimMemFreeAsync(y, a));
  OK(vesimMemFreeAsync(z, a));
  OK(vesimMemFreeAsync(w, a));
  OK(vesimStreamSynchronize(a));
  OK(vesimStreamDestroy(a));
  OK(vesimStreamDestroy(b));
}

/* Two threads, each on its own stream: one's kernels always fail, the other's never do. Each
 * sees exactly its own results, however their work interleaves. */
enum { kRounds = 1500 };
typedef struct {
  VESIMstream s;
  int fails, wrong;
} Worker;
static void* failing_thread(void* arg) {
  Worker* w = (Worker*)arg;
  for (int i = 0; i < kRounds; i++) {
    if (vesimLaunchKernelNamed("k_fail", k_fail, w->s, NULL, 0) != VESIM_SUCCESS) w->wrong++;
    VESIMresult r = vesimStreamSynchronize(w->s);
    if (r != VESIM_ERROR_INVALID_VALUE || !strstr(vesimGetLastErrorDetail(), "value 42")) w->wrong++;
    else w->fails++;
  }
  return NULL;
}
static void* clean_thread(void* arg) {
  Worker* w = (Worker*)arg;
  VESIMdeviceptr m;
  if (vesimMemAllocAsync(&m, 4 * 16, w->s) != VESIM_SUCCESS) {
    w->wrong++;
    return NULL;
  }
  for (int i = 0; i < kRounds; i++) {
    float x[16];
    AddArgs add = {m, 16, 1.0f};
    vesimMemsetD32Async(m, 0, 16, w->s);
    vesimLaunchKernel(k_add, w->s, &add, sizeof add);
    vesimMemcpyDtoHAsync(x, m, sizeof x, w->s);
    if (vesimStreamSynchronize(w->s) != VESIM_SUCCESS || x[15] != 1.0f) w->wrong++;
  }
  vesimMemFreeAsync(m, w->s);
  if (vesimStreamSynchronize(w->s) != VESIM_SUCCESS) w->wrong++;
  return NULL;
}
static void test_two_threads_two_streams(void) {
  VESIMcontext ctx;
  OK(vesimCtxGet(0, &ctx));
  Worker bad = {0}, good = {0};
  OK(vesimStreamCreate(ctx, &bad.s));
  OK(vesimStreamCreate(ctx, &good.s));
  pthread_t t1, t2;
  CHECK(pthread_create(&t1, NULL, failing_thread, &bad) == 0);
  CHECK(pthread_create(&t2, NULL, clean_thread, &good) == 0);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  CHECK(bad.wrong == 0 && bad.fails == kRounds);
  CHECK(good.wrong == 0);
  OK(vesimStreamDestroy(bad.s));
  OK(vesimStreamDestroy(good.s));
}

/* Several host threads launch onto one stream while a slow first kernel makes the queue run
 * thousands of tasks ahead (past the stream's ring, so launches wait for room): every kernel
 * runs once, and each thread's kernels run in the order it launched them. */
enum { kProducers = 4, kPerProducer = 3000 };
static int seq_last[kProducers];
static atomic_int seq_ran, seq_out_of_order;
typedef struct {
  int producer, seq;
} SeqArgs;
static VESIMresult k_seq(VESIMkernel_ctx* k, void* p) {
  (void)k;
  SeqArgs* a = (SeqArgs*)p;
  if (seq_last[a->producer] != a->seq - 1) atomic_fetch_add(&seq_out_of_order, 1);
  seq_last[a->producer] = a->seq;
  atomic_fetch_add(&seq_ran, 1);
  return VESIM_SUCCESS;
}
static void* producer(void* arg) {
  VESIMstream s = stream0();
  for (int i = 0; i < kPerProducer; i++) {
    SeqArgs a = {(int)(intptr_t)arg, i};
    if (vesimLaunchKernel(k_seq, s, &a, sizeof a) != VESIM_SUCCESS) return (void*)1;
  }
  return NULL;
}
static void test_many_producers(void) {
  VESIMstream s = stream0();
  unsigned us = 20000;
  OK(vesimLaunchKernel(k_sleep, s, &us, sizeof us));
  for (int i = 0; i < kProducers; i++) seq_last[i] = -1;
  pthread_t t[kProducers];
  for (int i = 0; i < kProducers; i++)
    CHECK(pthread_create(&t[i], NULL, producer, (void*)(intptr_t)i) == 0);
  int failed = 0;
  for (int i = 0; i < kProducers; i++) {
    void* r;
    pthread_join(t[i], &r);
    failed += r != NULL;
  }
  CHECK(failed == 0);
  OK(vesimStreamSynchronize(s));
  OK(vesimStreamQuery(s));
  CHECK(atomic_load(&seq_ran) == kProducers * kPerProducer);
  CHECK(atomic_load(&seq_out_of_order) == 0);
}

static atomic_int prof_kernels, prof_copies;
static void profiler(const VESIMprof_record* r, void* user) {
  (void)user;
  if (r->kind == VESIM_PROF_KERNEL && r->name && strcmp(r->name, "k_add") == 0)
    atomic_fetch_add(&prof_kernels, 1);
  if (r->kind == VESIM_PROF_MEMCPY_HTOD && r->bytes == 400 && r->end_ns >= r->start_ns)
    atomic_fetch_add(&prof_copies, 1);
}

static void test_stats_and_profiler(void) {
  VESIMstream s = stream0();
  OK(vesimResetStats(0));
  OK(vesimProfilerSetCallback(profiler, NULL));
  VESIMdeviceptr a;
  float x[100] = {0};
  OK(vesimMemAllocAsync(&a, sizeof x, s));
  OK(vesimMemcpyHtoDAsync(a, x, sizeof x, s));
  AddArgs args = {a, 100, 1.0f};
  OK(vesimLaunchKernelNamed("k_add", k_add, s, &args, sizeof args));
  OK(vesimStreamSynchronize(s));
  VESIMstats st;
  OK(vesimGetStats(0, &st));
  CHECK(st.allocs == 1 && st.copies_htod == 1 && st.bytes_htod == 400 && st.kernels == 1);
  CHECK(st.mem_used == 400 && st.mem_peak >= 400 && st.live_allocations >= 1);
  CHECK(st.api_calls == 3);
  CHECK(atomic_load(&prof_kernels) == 1 && atomic_load(&prof_copies) == 1);
  OK(vesimProfilerSetCallback(NULL, NULL));
  OK(vesimMemFreeAsync(a, s));
  OK(vesimStreamSynchronize(s));
  OK(vesimGetStats(0, &st));
  CHECK(st.frees == 1 && st.mem_used == 0 && st.mem_peak == 400);
}

static void test_latency_model(void) {
  VESIMstream s = stream0();
  VESIMdeviceptr a;
  char b[8] = {0};
  OK(vesimMemAllocAsync(&a, 8, s));
  OK(vesimStreamSynchronize(s));
  OK(vesimSetLatencyModel(1));
  double t0 = now_s();
  for (int i = 0; i < 50; i++) OK(vesimMemcpyHtoDAsync(a, b, 8, s));
  OK(vesimStreamSynchronize(s));
  double on = now_s() - t0;
  OK(vesimSetLatencyModel(0));
  /* a lower bound only (the model waits at least 12 us per small copy): comparing with a run
   * without the model is a race on a loaded machine */
  CHECK(on >= 50 * 12e-6);
  CHECK(vesimSetLatencyModel(7) == VESIM_ERROR_INVALID_VALUE);
  OK(vesimMemFree(a));
}

static void test_two_devices(void) {
  int n;
  OK(vesimDeviceGetCount(&n));
  if (n < 2) return;
  VESIMcontext c1;
  VESIMstream s1;
  OK(vesimCtxCreate(&c1, VESIM_CONTEXT_MODE_OMP, 1));
  OK(vesimCtxGetStream(c1, 0, &s1));
  VESIMdeviceptr a, b;
  OK(vesimMemAllocAsync(&a, 64, s1));
  OK(vesimMemAlloc(&b, 64, 0));
  CHECK(VESIM_PTR_DEVICE(a) == 1 && VESIM_PTR_DEVICE(b) == 0);
  CHECK(vesimMemcpyDtoDAsync(a, b, 64, s1) == VESIM_ERROR_INVALID_VALUE);
  /* device 0's pointer used on device 1's stream: the device does not know it */
  char buf[64];
  OK(vesimMemcpyDtoHAsync(buf, b, 64, s1));
  CHECK(vesimStreamSynchronize(s1) == VESIM_ERROR_UNKNOWN_VPTR);
  OK(vesimMemFreeAsync(a, s1));
  OK(vesimMemFree(b));
  OK(vesimCtxDestroy(c1));
}

static void test_not_initialized(void) {
  OK(vesimExit());
  int n;
  CHECK(vesimDeviceGetCount(&n) == VESIM_ERROR_NOT_INITIALIZED);
  CHECK(vesimExit() == VESIM_ERROR_NOT_INITIALIZED);
  OK(vesimInit());
  VESIMcontext ctx;
  OK(vesimCtxCreate(&ctx, VESIM_CONTEXT_MODE_OMP, 0));
}

typedef struct {
  const char* name;
  void (*fn)(void);
} Test;

static const Test kTests[] = {
    {"errors_named", test_errors_named},
    {"device_info", test_device_info},
    {"contexts", test_contexts},
    {"scalar_mode", test_scalar_mode},
    {"pointer_layout", test_pointer_layout},
    {"copies_roundtrip", test_copies_roundtrip},
    {"bounds", test_bounds},
    {"free_errors", test_free_errors},
    {"out_of_memory", test_out_of_memory},
    {"packed", test_packed},
    {"kernels", test_kernels},
    {"crashes", test_crashes},
    {"streams", test_streams},
    {"many_producers", test_many_producers},
    {"stream_errors", test_stream_errors},
    {"poison", test_poison},
    {"two_threads_two_streams", test_two_threads_two_streams},
    {"stats_and_profiler", test_stats_and_profiler},
    {"latency_model", test_latency_model},
    {"two_devices", test_two_devices},
    {"not_initialized", test_not_initialized},
};

int main(int argc, char** argv) {
  if (vesimInit() != VESIM_SUCCESS) return 2;
  VESIMcontext ctx;
  if (vesimCtxCreate(&ctx, VESIM_CONTEXT_MODE_OMP, 0) != VESIM_SUCCESS) return 2;
  int ran = 0;
  for (size_t i = 0; i < sizeof kTests / sizeof kTests[0]; i++) {
    if (argc > 1 && strcmp(argv[1], kTests[i].name) != 0) continue;
    int before = failures;
    kTests[i].fn();
    printf("%s %s\n", failures == before ? "PASS" : "FAIL", kTests[i].name);
    ran++;
  }
  vesimExit();
  if (!ran) {
    fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "?");
    return 2;
  }
  return failures ? 1 : 0;
}
