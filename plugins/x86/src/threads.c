/* threads.c — a small pthread pool that splits one range over the cores (see x86.h). One job at
 * a time: a second host thread, or a task that itself calls ud_x86_parallel, runs its range
 * inline, so nothing ever waits on itself. Also the one thread that runs OpenMP kernels (below). */
#define _GNU_SOURCE
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "x86.h"

#define UD_MAX_THREADS 64
#define UD_SPIN 200       /* sched_yield rounds before sleeping, ~50-100 µs */
#define UD_CHUNKS 4       /* chunks per thread */
#define UD_OMP_IDLE_NS 5000000 /* the OpenMP thread gives its team back after 5 ms without work */

/* where threads sleep on a counter: see await */
typedef struct {
  pthread_mutex_t m;
  pthread_cond_t cv;
  int sleepers;
} Waiters;

static struct {
  pthread_once_t once;
  pthread_mutex_t busy; /* held by the thread that owns the current job */
  Waiters w;
  int nthreads;
  uint64_t jobs;  /* jobs started: workers wait for it to change */
  uint64_t claim; /* (job << 32) | the next chunk to claim */
  uint64_t done;  /* chunks of the current job finished */
  ud_x86_task fn;
  void* ctx;
  int64_t n, chunk;
} g_pool = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER,
            {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0}, 1, 0, 0, 0, NULL, NULL, 0, 0};

static _Thread_local int t_in_task;

/* Waits until (*counter == value) == equal, or for at most timeout_ns when that is >= 0; returns
 * whether the condition holds. It spins (`spin` yields) first and sleeps only after that: waking a
 * sleeping thread takes a futex and, on a virtual machine, an idle vCPU's wake-up — tens of µs,
 * as long as a 1M-element add. Sleepers are counted (sequentially consistent with the counters'
 * updates) so that `bump` skips the mutex when nobody sleeps. */
static int await(Waiters* w, const uint64_t* counter, uint64_t value, int equal, int spin,
                 int64_t timeout_ns) {
  for (int i = 0; i < spin; i++) {
    if ((__atomic_load_n(counter, __ATOMIC_SEQ_CST) == value) == equal) return 1;
    sched_yield();
  }
  struct timespec end;
  clock_gettime(CLOCK_MONOTONIC, &end);
  if (timeout_ns >= 0) {
    end.tv_sec += (end.tv_nsec + timeout_ns) / 1000000000;
    end.tv_nsec = (end.tv_nsec + timeout_ns) % 1000000000;
  }
  int met, timed_out = 0;
  pthread_mutex_lock(&w->m);
  __atomic_add_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
  while (!(met = (__atomic_load_n(counter, __ATOMIC_SEQ_CST) == value) == equal) && !timed_out) {
    if (timeout_ns < 0)
      pthread_cond_wait(&w->cv, &w->m);
    else
      timed_out = pthread_cond_clockwait(&w->cv, &w->m, CLOCK_MONOTONIC, &end) != 0;
  }
  __atomic_sub_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&w->m);
  return met;
}

static void bump(Waiters* w, uint64_t* counter, uint64_t by) {
  __atomic_add_fetch(counter, by, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&w->sleepers, __ATOMIC_SEQ_CST) == 0) return;
  pthread_mutex_lock(&w->m);
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->m);
}

/* Runs chunks of job `job` while some are left; returns how many. Chunks are claimed one at a
 * time, so a thread the OS has descheduled (a loaded machine) leaves its share to the others
 * instead of making them wait. The job's fields are read before the claim: a thread that reads
 * a later job's fields sees its claim fail, as the counter has moved on. */
static uint64_t work(uint64_t job) {
  uint64_t ran = 0, c = __atomic_load_n(&g_pool.claim, __ATOMIC_ACQUIRE);
  for (;;) {
    const int64_t n = g_pool.n, chunk = g_pool.chunk, at = (int64_t)(c & 0xffffffffu) * chunk;
    const ud_x86_task fn = g_pool.fn;
    void* ctx = g_pool.ctx;
    if (c >> 32 != (job & 0xffffffffu) || at >= n) return ran;
    if (__atomic_compare_exchange_n(&g_pool.claim, &c, c + 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) /* else c is the counter's new value */
      fn(ctx, at, at + chunk < n ? at + chunk : n), ran++, c++;
  }
}

static void* worker(void* unused __attribute__((unused))) {
  pthread_setname_np(pthread_self(), "ud_x86_pool");
  t_in_task = 1;
  for (uint64_t job = 0;; job = __atomic_load_n(&g_pool.jobs, __ATOMIC_SEQ_CST)) {
    const uint64_t ran = work(job);
    if (ran) bump(&g_pool.w, &g_pool.done, ran);
    await(&g_pool.w, &g_pool.jobs, job, 0, UD_SPIN, -1);
  }
  return NULL;
}

/* A forked child has none of the workers: it runs every range inline. */
static void after_fork_child(void) {
  pthread_mutex_init(&g_pool.busy, NULL);
  pthread_mutex_init(&g_pool.w.m, NULL);
  g_pool.nthreads = 1;
}

static void pool_init(void) {
  pthread_atfork(NULL, NULL, after_fork_child);
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  const char* env = getenv("UNIDEV_X86_THREADS");
  if (env && atoi(env) > 0) n = atoi(env);
  if (n > UD_MAX_THREADS) n = UD_MAX_THREADS;
  pthread_t th; /* workers; the caller is the first thread */
  while (g_pool.nthreads < n && pthread_create(&th, NULL, worker, NULL) == 0)
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
  /* The claim counter moves to the new job before its fields change: a worker still in the
   * previous job (its claims used up) could otherwise claim a chunk of this job with the old
   * job's counter, run it twice and overcount `done`, which the caller then waits on forever. */
  const uint64_t job = g_pool.jobs + 1;
  __atomic_store_n(&g_pool.claim, (job & 0xffffffffu) << 32, __ATOMIC_SEQ_CST);
  int64_t chunk = (n + UD_CHUNKS * threads - 1) / (UD_CHUNKS * threads);
  g_pool.chunk = chunk = chunk < grain ? grain : chunk;
  g_pool.fn = fn;
  g_pool.ctx = ctx;
  g_pool.n = n;
  __atomic_store_n(&g_pool.done, 0, __ATOMIC_SEQ_CST);
  bump(&g_pool.w, &g_pool.jobs, 1);
  t_in_task = 1;
  const uint64_t ran = work(job);
  t_in_task = 0;
  if (ran) __atomic_add_fetch(&g_pool.done, ran, __ATOMIC_SEQ_CST);
  await(&g_pool.w, &g_pool.done, (uint64_t)((n + chunk - 1) / chunk), 1, UD_SPIN, -1);
  pthread_mutex_unlock(&g_pool.busy);
}

/* ---- the OpenMP thread ----
 * oneDNN and the portable conv algorithms parallelize with OpenMP, and in a torch process that
 * is torch's own libgomp (oneDNN's libgomp.so.1 resolves to the copy torch loaded). A parallel
 * region started on a thread gives that thread an OpenMP team for the rest of its life, and
 * once libgomp manages more threads than there are cores it makes every team — torch's too —
 * spin 100 rounds instead of 300000 before sleeping between regions: each of torch's parallel
 * regions then pays a futex wake-up, and torch's CPU training step was 45-65 % slower for the
 * rest of the process after one backward on this device (torch runs a device's backward on its
 * own autograd thread; TF runs kernels on its executor threads). So OpenMP kernels called from
 * any thread but the process's main one (whose team is the framework's own, when it has one)
 * run on this one thread, which hands its team back (omp_pause_resource) after UD_OMP_IDLE_NS
 * without work. UNIDEV_X86_OMP_THREAD=0 runs them all on the calling thread instead. */
static struct {
  pthread_once_t once;
  pthread_mutex_t busy; /* held by the caller whose kernel runs */
  Waiters w;
  int started;             /* 0: kernels run on the caller (no thread, or a forked child) */
  uint64_t posted, finished;
  UD_KernelFn fn;
  const UD_KernelArgs* args;
  UD_Error* result;
} g_omp = {PTHREAD_ONCE_INIT, PTHREAD_MUTEX_INITIALIZER,
           {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0}, 0, 0, 0, NULL, NULL, NULL};

static _Thread_local int t_on_omp;

static void* omp_main(void* unused __attribute__((unused))) {
  pthread_setname_np(pthread_self(), "ud_x86_omp"); /* its OpenMP workers inherit the name */
  t_on_omp = 1;
  int team = 0; /* whether this thread may hold an OpenMP team */
  for (uint64_t seen = 0;;) {
    if (!await(&g_omp.w, &g_omp.posted, seen, 0, UD_SPIN, team ? UD_OMP_IDLE_NS : -1)) {
      omp_pause_resource(omp_pause_soft, omp_get_initial_device());
      team = 0;
      continue;
    }
    seen = __atomic_load_n(&g_omp.posted, __ATOMIC_SEQ_CST);
    g_omp.result = g_omp.fn(g_omp.args);
    team = 1;
    bump(&g_omp.w, &g_omp.finished, 1);
  }
  return NULL;
}

static void omp_after_fork_child(void) {
  pthread_mutex_init(&g_omp.busy, NULL);
  pthread_mutex_init(&g_omp.w.m, NULL);
  g_omp.started = 0;
}

static void omp_init(void) {
  const char* env = getenv("UNIDEV_X86_OMP_THREAD");
  if (env && strcmp(env, "0") == 0) return;
  pthread_atfork(NULL, NULL, omp_after_fork_child);
  pthread_t th;
  if (pthread_create(&th, NULL, omp_main, NULL) == 0) pthread_detach(th), g_omp.started = 1;
}

UD_Error* ud_x86_omp_run(UD_KernelFn fn, const UD_KernelArgs* args) {
  pthread_once(&g_omp.once, omp_init);
  if (t_on_omp || !g_omp.started || gettid() == getpid()) return fn(args);
  pthread_mutex_lock(&g_omp.busy);
  g_omp.fn = fn;
  g_omp.args = args;
  const uint64_t finished = g_omp.finished + 1; /* only the OpenMP thread moves it, under busy */
  bump(&g_omp.w, &g_omp.posted, 1);
  /* sleep at once: spinning, the caller would be one runnable thread more than the cores the
   * kernel's OpenMP team occupies, and delay that team's barriers */
  await(&g_omp.w, &g_omp.finished, finished, 1, 0, -1);
  UD_Error* result = g_omp.result;
  pthread_mutex_unlock(&g_omp.busy);
  return result;
}
