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
  CHECK(vesimStreamSynchronize((VESIMstream)(uintptr_t)0x1234) == VESIM_ERROR_INVALID_STREAM);
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
  double t0 = now_s();
  for (int i = 0; i < 50; i++) OK(vesimMemcpyHtoDAsync(a, b, 8, s));
  OK(vesimStreamSynchronize(s));
  double off = now_s() - t0;
  OK(vesimSetLatencyModel(1));
  t0 = now_s();
  for (int i = 0; i < 50; i++) OK(vesimMemcpyHtoDAsync(a, b, 8, s));
  OK(vesimStreamSynchronize(s));
  double on = now_s() - t0;
  OK(vesimSetLatencyModel(0));
  CHECK(on >= 50 * 12e-6); /* 12 us per small copy */
  CHECK(on > off);
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
