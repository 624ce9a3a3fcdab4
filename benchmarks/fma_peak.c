/* fma_peak.c — the FP32 FMA throughput of this CPU on N threads: the ceiling that any sgemm or
 * convolution can reach here. benchmarks/run.py compiles it with `cc -O2 -march=native` and runs
 * it in the same process run as the kernels; standalone: `fma_peak THREADS [SECONDS]`.
 * Each thread keeps 12 independent accumulator chains of the widest vector FMA (enough to cover
 * the FMA latency of two pipes) on registers only, so nothing but the FMA units is measured. */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__AVX512F__)
typedef __m512 vec;
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define LANES 16
#elif defined(__FMA__)
typedef __m256 vec;
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define LANES 8
#else
#error "fma_peak needs a CPU with FMA (compile with -march=native)"
#endif
#define CHAINS 12
#define ROUNDS 100000L /* FMAs per chain between clock checks */

static double g_seconds;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void* run(void* out) {
  vec acc[CHAINS];
  const vec m = SET1(0.999999f), a = SET1(1e-7f);
  for (int j = 0; j < CHAINS; j++) acc[j] = SET1((float)j);
  long rounds = 0;
  const double t0 = now();
  do {
    for (long i = 0; i < ROUNDS; i++)
#pragma GCC unroll 12
      for (int j = 0; j < CHAINS; j++) acc[j] = FMA(acc[j], m, a);
    rounds += ROUNDS;
  } while (now() - t0 < g_seconds);
  const double dt = now() - t0;
  float sink = 0; /* keep the chains alive */
  for (int j = 0; j < CHAINS; j++) sink += ((float*)&acc[j])[0];
  ((double*)out)[0] = 2.0 * CHAINS * LANES * (double)rounds / dt; /* FLOP/s */
  ((double*)out)[1] = sink;
  return NULL;
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 1;
  g_seconds = argc > 2 ? atof(argv[2]) : 0.3;
  if (threads < 1 || threads > 256) return fprintf(stderr, "usage: fma_peak THREADS [S]\n"), 2;
  pthread_t th[256];
  double res[256][2];
  for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, run, res[i]);
  double total = 0;
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL), total += res[i][0];
  printf("%.1f GFLOP/s FP32 FMA peak, %d threads, %d-bit vectors\n", total / 1e9, threads,
         LANES * 32);
  return 0;
}
