/* threads.c — a small pthread pool that splits one range over the cores (see x86.h). One job at
 * a time: a second host thread, or a task that itself calls ud_x86_parallel, runs its range
 * inline, so nothing ever waits on itself. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "x86.h"

#define UD_MAX_THREADS 64
#define UD_SPIN 200 /* sched_yield rounds, ~50-100 µs */

static struct {
  pthread_once_t once;
  pthread_mutex_t busy; /* held by the thread that owns the current job */
  pthread_mutex_t m;
  pthread_cond_t go, done;
  int nthreads;
  uint64_t generation;
  int pending;
  ud_x86_task fn;
  void* ctx;
  int64_t n, part;
} g_pool = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
            PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, 0, 0, NULL, NULL, 0, 0};

static _Thread_local int t_in_task;

static void run_part(int index) {
  int64_t begin = index * g_pool.part;
  int64_t end = begin + g_pool.part < g_pool.n ? begin + g_pool.part : g_pool.n;
  if (begin < end) g_pool.fn(g_pool.ctx, begin, end);
}

static void* worker(void* arg) {
  int index = (int)(intptr_t)arg;
  t_in_task = 1;
  uint64_t seen = 0;
  for (;;) {
    /* spin briefly before sleeping: a condvar wake-up costs as much as a 1M-element add */
    for (int i = 0; i < UD_SPIN && __atomic_load_n(&g_pool.generation, __ATOMIC_ACQUIRE) == seen;
         i++)
      sched_yield();
    pthread_mutex_lock(&g_pool.m);
    while (g_pool.generation == seen) pthread_cond_wait(&g_pool.go, &g_pool.m);
    seen = g_pool.generation;
    pthread_mutex_unlock(&g_pool.m);
    run_part(index);
    pthread_mutex_lock(&g_pool.m);
    if (--g_pool.pending == 0) pthread_cond_signal(&g_pool.done);
    pthread_mutex_unlock(&g_pool.m);
  }
  return NULL;
}

/* A forked child has none of the workers: it runs every range inline. */
static void after_fork_child(void) {
  pthread_mutex_init(&g_pool.busy, NULL);
  pthread_mutex_init(&g_pool.m, NULL);
  g_pool.nthreads = 1;
}

static void pool_init(void) {
  pthread_atfork(NULL, NULL, after_fork_child);
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  const char* env = getenv("UNIDEV_X86_THREADS");
  if (env && atoi(env) > 0) n = atoi(env);
  if (n > UD_MAX_THREADS) n = UD_MAX_THREADS;
  pthread_t th;  /* workers 1..n-1; the caller is worker 0 */
  while (g_pool.nthreads < n &&
         pthread_create(&th, NULL, worker, (void*)(intptr_t)g_pool.nthreads) == 0)
    pthread_detach(th), g_pool.nthreads++;
}

int ud_x86_threads(void) {
  pthread_once(&g_pool.once, pool_init);
  return g_pool.nthreads;
}

void ud_x86_parallel(int64_t n, int64_t grain, ud_x86_task fn, void* ctx) {
  if (n <= 0) return;
  const int threads = ud_x86_threads();
  if (grain < 1) grain = 1;
  if (n / grain < 2 || threads < 2 || t_in_task || pthread_mutex_trylock(&g_pool.busy) != 0) {
    fn(ctx, 0, n);
    return;
  }
  pthread_mutex_lock(&g_pool.m);
  g_pool.fn = fn;
  g_pool.ctx = ctx;
  g_pool.n = n;
  g_pool.part = (n + threads - 1) / threads;
  g_pool.pending = threads - 1;
  __atomic_add_fetch(&g_pool.generation, 1, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&g_pool.go);
  pthread_mutex_unlock(&g_pool.m);
  t_in_task = 1;
  run_part(0);
  t_in_task = 0;
  pthread_mutex_lock(&g_pool.m);
  while (g_pool.pending > 0) pthread_cond_wait(&g_pool.done, &g_pool.m);
  pthread_mutex_unlock(&g_pool.m);
  pthread_mutex_unlock(&g_pool.busy);
}
