/* copy_bw.c — the copy bandwidth of this machine on N threads at a given buffer size: the
 * ceiling of any elementwise kernel there. benchmarks/_machine.py builds it like fma_peak.c and
 * runs it in the same run as the framework benchmarks; standalone:
 * `copy_bw THREADS BYTES [SECONDS]`. Each thread copies its own slice of one source into one
 * destination buffer (BYTES each) with the widest vector loads and stores in rounds until the time is up
 * (glibc's memcpy picks `rep movsb` at these sizes, half as fast on this VM's AMD CPU as a vector
 * loop, so it would understate what a kernel can reach); the rate counts bytes read + written,
 * as benchmarks/run.py's copy rows do. */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double g_seconds;
static size_t g_slice;
static char *g_src, *g_dst;
static volatile int g_stop;

#if defined(__AVX512F__)
typedef __m512 vec;
#define LOAD _mm512_load_ps
#define STORE _mm512_store_ps
#elif defined(__AVX__)
typedef __m256 vec;
#define LOAD _mm256_load_ps
#define STORE _mm256_store_ps
#else
typedef __m128 vec;
#define LOAD _mm_load_ps
#define STORE _mm_store_ps
#endif

static void copy(char* dst, const char* src, size_t n) {
  float* d = (float*)dst;
  const float* s = (const float*)src;
  const size_t step = sizeof(vec) / sizeof(float);
  for (size_t i = 0; i < n / sizeof(float); i += 4 * step) {
    const vec a = LOAD(s + i), b = LOAD(s + i + step), c = LOAD(s + i + 2 * step),
              e = LOAD(s + i + 3 * step);
    STORE(d + i, a), STORE(d + i + step, b), STORE(d + i + 2 * step, c);
    STORE(d + i + 3 * step, e);
  }
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static pthread_barrier_t g_barrier;
static double g_best = 1e30;

/* Rounds: every thread copies its slice between two barriers; thread 0 times the round. The
 * best round counts (as numpy/torch timings elsewhere take the best), so other processes
 * taking a core for a while on this shared machine do not lower the figure. */
static void* run(void* arg) {
  const long id = (long)arg;
  const size_t off = (size_t)id * g_slice;
  copy(g_dst + off, g_src + off, g_slice); /* warm: caches and TLB */
  const double t0 = now();
  for (int stop = 0; !stop;) {
    pthread_barrier_wait(&g_barrier);
    const double r0 = now();
    copy(g_dst + off, g_src + off, g_slice);
    pthread_barrier_wait(&g_barrier);
    if (id == 0) {
      const double r1 = now();
      if (r1 - r0 < g_best) g_best = r1 - r0;
      stop = r1 - t0 >= g_seconds;
      g_stop = stop;
    }
    pthread_barrier_wait(&g_barrier);
    stop = g_stop;
  }
  return NULL;
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 1;
  const size_t bytes = argc > 2 ? (size_t)atoll(argv[2]) : (size_t)4 << 20;
  g_seconds = argc > 3 ? atof(argv[3]) : 0.2;
  if (threads < 1 || threads > 256 || bytes < 4096)
    return fprintf(stderr, "usage: copy_bw THREADS BYTES [SECONDS]\n"), 2;
  g_slice = bytes / (size_t)threads / 256 * 256; /* whole unrolled vector groups */
  g_src = aligned_alloc(64, g_slice * (size_t)threads);
  g_dst = aligned_alloc(64, g_slice * (size_t)threads);
  if (!g_src || !g_dst) return fprintf(stderr, "copy_bw: out of memory\n"), 1;
  memset(g_src, 1, g_slice * (size_t)threads); /* fault every page in before timing */
  memset(g_dst, 0, g_slice * (size_t)threads);
  pthread_barrier_init(&g_barrier, NULL, (unsigned)threads);
  pthread_t th[256];
  for (long i = 0; i < threads; i++) pthread_create(&th[i], NULL, run, (void*)i);
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
  const double total = 2.0 * (double)g_slice * threads / g_best; /* bytes/s */
  printf("%.1f GB/s copy, %d threads, %zu bytes\n", total / 1e9, threads, bytes);
  return 0;
}
