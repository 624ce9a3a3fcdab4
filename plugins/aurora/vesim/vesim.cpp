// vesim.cpp — the emulated Vector Engine: devices, allocation tables, stream workers, copies,
// kernel launches with crash containment, latency model, statistics and profiler.
#include "vesim.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "vesim_device.h"

namespace {

constexpr int kCoresPerDevice = 8;
constexpr uint32_t kMaxIndex = (1u << VESIM_PTR_INDEX_BITS) - 1;
constexpr uint64_t kMaxOffset = (UINT64_C(1) << VESIM_PTR_OFFSET_BITS) - 1;
constexpr uint64_t kMmapThreshold = 1u << 20;

thread_local std::string tl_detail;
thread_local uint64_t tl_error_id = 0;  // the stream error tl_detail describes (0: none)
thread_local sigjmp_buf* tl_jmp = nullptr;
thread_local volatile sig_atomic_t tl_signal = 0;

VESIMresult fail(VESIMresult code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
VESIMresult fail(VESIMresult code, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  tl_detail = buf;
  tl_error_id = 0;
  return code;
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// ---- crash containment: a fault inside guarded device code jumps back to its guard ----------

struct sigaction g_old_actions[65];
const int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};

void on_fault(int sig, siginfo_t* info, void*) {
  if (tl_jmp) {
    tl_signal = sig;
    siglongjmp(*tl_jmp, 1);
  }
  // Not device code: put the previous handler back; a faulting instruction runs again and
  // takes the process's normal path (default action, or Python's faulthandler); a signal that
  // was sent rather than caused is sent again.
  sigaction(sig, &g_old_actions[sig], nullptr);
  if (info && info->si_code <= 0) raise(sig);
}

void install_fault_handlers() {
  for (int sig : kSignals) {
    struct sigaction cur;
    sigaction(sig, nullptr, &cur);
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_fault) continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, &g_old_actions[sig]);
  }
}

// ---- devices, allocations ------------------------------------------------------------------

// Bytes [lo, hi) of an allocation that failed work was to write: reading them is an error
// (`message` names the failed task and what went wrong) until a write without gaps covers them.
struct Poison {
  uint64_t lo, hi;
  VESIMresult code;
  std::shared_ptr<const std::string> message;
};

// RESERVED: the host handed out the pointer, the device has not allocated yet; LIVE: backed;
// FREEING: the host asked for the free, the device has not reached it (still usable until then).
struct Alloc {
  enum State { RESERVED, LIVE, FREEING } state = RESERVED;
  bool backed = false;
  void* base = nullptr;
  uint64_t size = 0;
  std::vector<Poison> poison;  // disjoint ranges
};

// The host counts calls, the stream workers count kernels: on separate cache lines, so that a
// launch does not wait for the line the worker just wrote.
struct Stats {
  std::atomic<uint64_t> api_calls{0}, copies_htod{0}, copies_dtoh{0}, copies_dtod{0}, packed{0},
      bytes_htod{0}, bytes_dtoh{0}, bytes_dtod{0}, allocs{0}, frees{0};
  alignas(64) std::atomic<uint64_t> kernels{0}, kernel_errors{0};
};

// A parallel region. Shared with the helpers, so that one that wakes up after the region is
// over (every chunk taken) finds nothing left to do instead of a dangling job.
struct Job {
  VESIMrange_fn fn = nullptr;
  void* arg = nullptr;
  int64_t n = 0, chunk = 0, chunks = 0;
  std::atomic<int64_t> next{0}, done{0};
  std::atomic<int> crashed{0};
};

// The device's cores: helper threads (at most host cores - 1) plus the calling stream worker.
// The worker never waits for a helper to arrive, only for chunks a helper has started: on a host
// with fewer free cores than the VE has, a region then costs what its work costs.
struct Pool {
  std::mutex run_mu;  // one parallel region at a time per device
  std::mutex mu;
  std::condition_variable cv, done_cv;
  std::atomic<uint64_t> generation{0};
  bool stop = false;
  std::shared_ptr<Job> job;
  std::vector<std::thread> threads;
};

// How long a thread that runs out of work polls before it sleeps on a condition variable:
// a futex wake-up costs several microseconds, as much as a small kernel.
constexpr uint64_t kSpinNs = 30000;

// Polls `ready` (yielding the core) for up to `ns`; true once it holds.
template <class F>
bool spin_for(F&& ready, uint64_t ns = kSpinNs) {
  uint64_t until = 0;
  for (int i = 0;; i++) {
    if (ready()) return true;
    if ((i & 15) == 15) {
      uint64_t t = now_ns();
      if (!until) until = t + ns;
      else if (t > until) return false;
    }
    std::this_thread::yield();
  }
}

struct Device;
struct Context;

// A kernel launch with small arguments carries them inline: no allocation per launch. What
// the worker reads of such a launch (and up to 16 bytes of arguments) is in the first cache line.
struct alignas(64) Task {
  VESIMprof_kind kind;
  const char* name = nullptr;
  uint64_t bytes = 0;
  uint64_t latency_ns = 0;
  VESIMkernel kernel = nullptr;
  alignas(16) char args[64];
  std::function<VESIMresult(VESIMkernel_ctx*)> run;
  bool marker = false;  // a callback from vesimStreamAddMarker
};

}  // namespace

struct VESIMkernel_ctx {
  // A range the task writes (vesimDevResolveOut): poisoned if the task fails, cleared of poison
  // if it succeeds and writes every byte of it (`dense`).
  struct Write {
    VESIMdeviceptr ptr;
    uint64_t bytes;
    bool dense;
  };
  static constexpr int kInlineWrites = 6;

  VESIMkernel_ctx(Device* d, VESIMstream s, int c) : dev(d), stream(s), cores(c) {}
  Device* dev;
  VESIMstream stream;
  int cores;
  VESIMresult error = VESIM_SUCCESS;
  std::string message;
  std::vector<std::pair<void*, uint64_t>> scratch;  // blocks and their capacities
  int nwrites = 0;
  Write writes[kInlineWrites];  // the first ones; the rest in more_writes (no allocation per task)
  std::vector<Write> more_writes;

  void add_write(VESIMdeviceptr p, uint64_t bytes, bool dense) {
    if (nwrites < kInlineWrites) writes[nwrites] = {p, bytes, dense};
    else more_writes.push_back({p, bytes, dense});
    nwrites++;
  }
  const Write& write(int i) const { return i < kInlineWrites ? writes[i] : more_writes[size_t(i - kInlineWrites)]; }
};

// A stream's tasks wait in a ring: host threads (serialized by `mu`) fill slot queued % kRing
// and publish `queued`; the worker takes the slots in order without a lock and publishes
// `finished`. Each side writes its own cache lines, and the locks and condition variables of
// `wake_mu` are only for the slow paths (a sleeping worker, a waiting host, errors): on a host
// with few cores a launch costs what it writes, not the lines it would take from the worker.
constexpr uint64_t kRing = 1024;

struct VESIMstream_st {
  Device* dev;
  Context* ctx;
  int cores;
  std::mutex mu;
  uint64_t space_until = 0;  // under mu: queued may grow to this without a look at `finished`
  std::vector<Task> ring = std::vector<Task>(kRing);
  alignas(64) std::atomic<uint64_t> queued{0};    // tasks ever enqueued
  alignas(64) std::atomic<uint64_t> finished{0};  // tasks ever completed
  std::atomic<uint64_t> marking{0};  // 1 + the index of the last marker whose function started
  alignas(64) std::mutex wake_mu;
  std::condition_variable cv_work, cv_done;
  std::atomic<bool> sleeping{false};  // the worker waits on cv_work: a launch must notify
  std::atomic<int> waiters{0};        // host threads wait on cv_done: the worker must notify
  bool stop = false;                  // the fields below are under wake_mu
  VESIMresult error = VESIM_SUCCESS;  // the first failure since it was last taken
  uint64_t error_id = 0;              // unique across streams, for vesimStreamClearError
  std::string error_message;
  std::thread worker;
  // The worker's last resolved allocations, valid while the device's free_gen stays: a kernel
  // resolves every tensor, and the table's lock and look-up cost as much as a small kernel.
  struct Resolved {
    uint32_t index = 0;
    char* base = nullptr;
    uint64_t size = 0;
  };
  alignas(64) Resolved resolved[4];
  uint64_t resolved_gen = 0;
  unsigned resolved_next = 0;
  // Kernel scratch blocks kept by the worker for the next kernels (only it touches them): a
  // fresh block of a few MiB per call costs its page faults, as much as a convolution's work.
  std::vector<std::pair<void*, uint64_t>> scratch_cache;
  uint64_t scratch_cached = 0;
};

struct VESIMcontext_st {
  Device* dev;
  VESIMcontext_mode mode;
  std::vector<VESIMstream> streams;
};

namespace {

struct Context : VESIMcontext_st {};

struct Device {
  int id = 0;
  uint64_t memory = 0;
  std::mutex mu;
  std::unordered_map<uint32_t, Alloc> allocs;
  uint32_t next_index = 1;
  uint64_t used = 0, peak = 0;
  std::atomic<uint64_t> free_gen{0};  // moves (under mu) whenever an allocation is released
  // Poisoned ranges in all allocations (changed under mu): while 0, reads skip the poison check,
  // so the look-up costs only failed work and what follows it.
  std::atomic<uint64_t> poisoned{0};
  Stats stats;
  Pool pool;
  VESIMcontext ctx = nullptr;
};

std::mutex g_mu;  // init state, contexts, the stream registry
int g_refcount = 0;
std::vector<Device*> g_devices;
std::set<VESIMstream> g_streams;
std::atomic<int> g_latency{0};
std::atomic<uint64_t> g_error_ids{0};
std::mutex g_prof_mu;
std::atomic<VESIMprofiler_callback> g_prof_fn{nullptr};
void* g_prof_user = nullptr;

// VESIM_PROFILE=1: a table of device time per task name (and of the parallel regions' helper
// use) on stderr at exit, for finding where an application's device time goes.
std::atomic<bool> g_summary{false};
std::atomic<uint64_t> g_regions{0}, g_region_ns{0}, g_helper_ns{0}, g_wait_ns{0};
struct SumRow { uint64_t n = 0, ns = 0, cpu_ns = 0; };
std::mutex g_sum_mu;
std::map<std::string, SumRow>* g_sum = nullptr;  // never freed: printed from atexit

uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// cpu_ns: the worker's CPU time in the task and the helpers' in its regions' chunks, which on
// a loaded host says more than the wall time
void summary_record(VESIMprof_kind kind, const char* name, uint64_t ns, uint64_t cpu_ns) {
  static const char* kinds[] = {"kernel", "htod", "dtoh", "dtod", "memset", "packed", "alloc",
                                "free", "callback"};
  std::lock_guard<std::mutex> lock(g_sum_mu);
  SumRow& row = (*g_sum)[name ? name : kinds[kind]];
  row.n++;
  row.ns += ns;
  row.cpu_ns += cpu_ns;
}

void summary_print() {
  std::lock_guard<std::mutex> lock(g_sum_mu);
  std::vector<std::pair<std::string, SumRow>> rows(g_sum->begin(), g_sum->end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.ns > b.second.ns; });
  uint64_t total = 0, cpu = 0;
  for (auto& r : rows) total += r.second.ns, cpu += r.second.cpu_ns;
  fprintf(stderr, "vesim profile: %.3f ms device time (%.3f ms CPU) in %zu task names\n",
          total / 1e6, cpu / 1e6, rows.size());
  for (auto& r : rows)
    fprintf(stderr, "  %-28s %7llu calls %9.3f ms %8.2f us/call %5.1f%%  CPU %8.2f us/call\n",
            r.first.c_str(), (unsigned long long)r.second.n, r.second.ns / 1e6,
            r.second.ns / 1e3 / double(r.second.n), 100.0 * double(r.second.ns) / double(total ? total : 1),
            r.second.cpu_ns / 1e3 / double(r.second.n));
  fprintf(stderr, "  regions %llu: %.3f ms on the worker, helpers' CPU %.3f ms, worker waited %.3f ms\n",
          (unsigned long long)g_regions.load(), g_region_ns.load() / 1e6, g_helper_ns.load() / 1e6,
          g_wait_ns.load() / 1e6);
}

bool initialized() { return g_refcount > 0; }

uint64_t parse_bytes(const char* s, uint64_t fallback) {
  if (!s || !*s) return fallback;
  char* end = nullptr;
  double v = strtod(s, &end);
  if (end == s || v <= 0) return fallback;
  switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1024.0 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    case 't': case 'T': v *= 1024.0 * 1024 * 1024 * 1024; break;
    default: break;
  }
  return uint64_t(v);
}

Device* device_of(int device) {
  if (device < 0 || device >= int(g_devices.size())) return nullptr;
  return g_devices[size_t(device)];
}

// Every launch validates its stream: first in a lock-free copy of the first live streams,
// rebuilt under g_mu whenever a stream comes or goes (streams_changed), then in g_streams.
constexpr int kFastStreams = 32;
std::atomic<VESIMstream> g_fast_streams[kFastStreams];
std::atomic<int> g_fast_count{0};

void streams_changed() {
  int n = 0;
  for (auto it = g_streams.begin(); it != g_streams.end() && n < kFastStreams; ++it, n++)
    g_fast_streams[n].store(*it, std::memory_order_relaxed);
  g_fast_count.store(initialized() ? n : 0, std::memory_order_release);
}

bool stream_valid(VESIMstream s) {
  for (int i = 0, n = g_fast_count.load(std::memory_order_acquire); i < n; i++)
    if (s && g_fast_streams[i].load(std::memory_order_relaxed) == s) return true;
  std::lock_guard<std::mutex> lock(g_mu);
  return initialized() && g_streams.count(s) > 0;
}

VESIMresult record_error(VESIMkernel_ctx* k, VESIMresult code, const std::string& msg) {
  if (k->error == VESIM_SUCCESS) {
    k->error = code;
    k->message = msg;
  }
  return code;
}

// Removes [lo, hi) from the allocation's poisoned ranges (d->mu held).
void poison_cut(Device* d, Alloc& a, uint64_t lo, uint64_t hi) {
  std::vector<Poison> kept;
  for (const Poison& p : a.poison) {
    if (p.hi <= lo || p.lo >= hi) {
      kept.push_back(p);
      continue;
    }
    if (p.lo < lo) kept.push_back({p.lo, lo, p.code, p.message});
    if (p.hi > hi) kept.push_back({hi, p.hi, p.code, p.message});
  }
  d->poisoned += kept.size();
  d->poisoned -= a.poison.size();
  a.poison.swap(kept);
}

// Drops the poison of an allocation being released (d->mu held).
void poison_drop(Device* d, Alloc& a) {
  d->poisoned -= a.poison.size();
  a.poison.clear();
}

// After a task: a failure poisons every range it was to write; a success lifts the poison of the
// ranges it wrote without gaps. Only failures and writes into poisoned memory take the lock.
void settle_writes(const VESIMkernel_ctx& k, VESIMresult r,
                   const std::shared_ptr<const std::string>& message) {
  Device* d = k.dev;
  if (!k.nwrites || (r == VESIM_SUCCESS && d->poisoned.load(std::memory_order_acquire) == 0))
    return;
  std::lock_guard<std::mutex> lock(d->mu);
  for (int i = 0; i < k.nwrites; i++) {
    const VESIMkernel_ctx::Write& w = k.write(i);
    if (VESIM_PTR_DEVICE(w.ptr) != d->id) continue;
    auto it = d->allocs.find(VESIM_PTR_INDEX(w.ptr));
    if (it == d->allocs.end()) continue;
    Alloc& a = it->second;
    uint64_t lo = VESIM_PTR_OFFSET(w.ptr);
    if (lo >= a.size || w.bytes == 0) continue;
    uint64_t hi = w.bytes > a.size - lo ? a.size : lo + w.bytes;  // what lies inside it
    if (r == VESIM_SUCCESS) {
      if (w.dense && !a.poison.empty()) poison_cut(d, a, lo, hi);
      continue;
    }
    if (!a.poison.empty()) poison_cut(d, a, lo, hi);
    a.poison.push_back({lo, hi, k.error, message});
    d->poisoned++;
  }
}

void spin_until(uint64_t deadline) {
  while (now_ns() < deadline) std::this_thread::yield();
}

uint64_t copy_latency(uint64_t bytes) {
  if (!g_latency.load()) return 0;
  return 12000 + bytes / 10;  // 12 us + 10 GB/s
}

uint64_t call_latency() { return g_latency.load() ? 6000 : 0; }

// Runs fn inside a fault guard; a fault becomes KERNEL_CRASHED on k.
VESIMresult run_guarded(VESIMkernel_ctx* k, const std::function<VESIMresult(VESIMkernel_ctx*)>& fn) {
  sigjmp_buf jb;
  sigjmp_buf* volatile prev = tl_jmp;
  // the mask is not saved (a syscall per kernel): on_fault runs with SA_NODEFER and an empty
  // sa_mask, so jumping out of it leaves the thread's mask as it was
  if (sigsetjmp(jb, 0)) {
    tl_jmp = prev;
    char msg[128];
    snprintf(msg, sizeof msg, "device code crashed with signal %d (%s)", int(tl_signal),
             strsignal(int(tl_signal)));
    return record_error(k, VESIM_ERROR_KERNEL_CRASHED, msg);
  }
  tl_jmp = &jb;
  VESIMresult r = fn(k);
  tl_jmp = prev;
  return r;
}

void report(VESIMstream s, const Task& t, uint64_t t0, uint64_t t1, VESIMresult r) {
  VESIMprofiler_callback fn = g_prof_fn.load();
  if (!fn) return;
  VESIMprof_record rec{t.kind, t.name, s->dev->id, s, t.bytes, t0, t1, r};
  void* user;
  {
    std::lock_guard<std::mutex> lock(g_prof_mu);
    user = g_prof_user;
  }
  fn(&rec, user);
}

// Up to this many bytes of scratch stay cached per stream (the largest blocks go first).
constexpr uint64_t kScratchCache = uint64_t(1) << 30;

void scratch_return(VESIMstream s, VESIMkernel_ctx& k) {
  for (auto& b : k.scratch) {
    s->scratch_cache.push_back(b);
    s->scratch_cached += b.second;
  }
  k.scratch.clear();
  auto& c = s->scratch_cache;
  while (s->scratch_cached > kScratchCache || c.size() > 32) {
    auto big = std::max_element(c.begin(), c.end(), [](auto& a, auto& b) { return a.second < b.second; });
    s->scratch_cached -= big->second;
    free(big->first);
    c.erase(big);
  }
}

// Waits until `target` tasks of the stream have completed: polls a while, then sleeps.
void wait_finished(VESIMstream s, uint64_t target) {
  auto reached = [&] { return s->finished.load() >= target; };
  if (spin_for(reached)) return;
  s->waiters++;  // seq_cst, like the worker's store of `finished`: one of us sees the other
  std::unique_lock<std::mutex> lock(s->wake_mu);
  s->cv_done.wait(lock, reached);
  s->waiters--;
}

void worker_main(VESIMstream s) {
  // Someone (Python's faulthandler, a debugger) may replace the fault handlers after vesim
  // installed them: they are checked again after the worker slept and every 1024 kernels, not
  // per kernel (four sigaction calls cost as much as a small kernel).
  bool slept = true;
  unsigned unchecked = 0;
  for (uint64_t next = 0;; next++) {  // `next` == finished
    auto arrived = [&] { return s->queued.load() != next; };
    if (!arrived() && !spin_for(arrived)) {
      std::unique_lock<std::mutex> lock(s->wake_mu);
      s->sleeping = true;  // seq_cst, like enqueue's store of `queued`: one of us sees the other
      slept = slept || !arrived();
      s->cv_work.wait(lock, [&] { return s->stop || arrived(); });
      s->sleeping = false;
      if (!arrived()) return;  // stopped with nothing left to do
    }
    Task& t = s->ring[next % kRing];  // run in place: a kernel's slot is read, not written
    VESIMresult pending = VESIM_SUCCESS;
    if (t.kind == VESIM_PROF_CALLBACK) {  // the callback reads the pending error's details here
      std::lock_guard<std::mutex> lock(s->wake_mu);
      pending = s->error;
      tl_detail = pending ? s->error_message : std::string();
      tl_error_id = pending ? s->error_id : 0;
    }

    const bool summary = g_summary.load(std::memory_order_relaxed);
    const bool timed = t.latency_ns || summary || g_prof_fn.load(std::memory_order_relaxed);
    uint64_t t0 = timed ? now_ns() : 0;
    const uint64_t cpu0 = summary ? thread_cpu_ns() : 0, helpers0 = summary ? g_helper_ns.load() : 0;
    if (t.latency_ns) spin_until(t0 + t.latency_ns);
    if (t.kind == VESIM_PROF_KERNEL && (slept || ++unchecked == 1024)) {
      install_fault_handlers();
      slept = false, unchecked = 0;
    }
    VESIMkernel_ctx k{s->dev, s, s->cores};
    if (t.kind == VESIM_PROF_CALLBACK) k.error = pending;  // the callback's status argument
    if (t.marker) s->marking.store(next + 1, std::memory_order_release);
    VESIMresult r = t.kernel ? run_guarded(&k, [&](VESIMkernel_ctx* c) { return t.kernel(c, t.args); })
                             : run_guarded(&k, t.run);
    if (t.kind == VESIM_PROF_CALLBACK) r = VESIM_SUCCESS;
    if (r != VESIM_SUCCESS && k.error == VESIM_SUCCESS)
      record_error(&k, r, std::string("returned ") + vesimGetErrorName(r));
    scratch_return(s, k);
    if (t.kind == VESIM_PROF_KERNEL) {
      s->dev->stats.kernels++;
      if (r != VESIM_SUCCESS) s->dev->stats.kernel_errors++;
    }
    if (timed) {
      const uint64_t t1 = now_ns();
      if (summary)
        summary_record(t.kind, t.name, t1 - t0, thread_cpu_ns() - cpu0 + g_helper_ns.load() - helpers0);
      report(s, t, t0, t1, r);
    }

    if (r != VESIM_SUCCESS) {
      std::string name = t.name ? t.name : "task";
      bool named = k.message.compare(0, name.size() + 1, name + ":") == 0;
      auto message = std::make_shared<const std::string>(named ? k.message : name + ": " + k.message);
      settle_writes(k, r, message);
      std::lock_guard<std::mutex> lock(s->wake_mu);
      if (s->error == VESIM_SUCCESS) {
        s->error = k.error;
        s->error_id = ++g_error_ids;
        s->error_message = *message;
      }
    } else if (k.nwrites) {
      settle_writes(k, r, nullptr);
    }
    if (!t.kernel) t.run = nullptr;  // its captures go now, not when the slot is reused
    s->finished = next + 1;
    if (s->waiters.load()) {
      std::lock_guard<std::mutex> lock(s->wake_mu);
      s->cv_done.notify_all();
    }
  }
}

VESIMresult enqueue(VESIMstream s, Task&& t) {
  if (!stream_valid(s)) return fail(VESIM_ERROR_INVALID_STREAM, "not a live vesim stream");
  s->dev->stats.api_calls++;
  std::lock_guard<std::mutex> lock(s->mu);
  uint64_t q = s->queued.load(std::memory_order_relaxed);
  if (q == s->space_until) {  // the ring may be full: launches ran kRing tasks ahead
    if (q + 1 > kRing) wait_finished(s, q + 1 - kRing);
    s->space_until = s->finished.load() + kRing;
  }
  s->ring[q % kRing] = std::move(t);
  s->queued = q + 1;
  if (s->sleeping.load()) {
    std::lock_guard<std::mutex> wake(s->wake_mu);
    s->cv_work.notify_one();
  }
  return VESIM_SUCCESS;
}

VESIMstream stream_new(Context* ctx, int cores) {
  auto* s = new VESIMstream_st();
  s->dev = ctx->dev;
  s->ctx = ctx;
  s->cores = cores;
  s->worker = std::thread(worker_main, s);
  g_streams.insert(s);
  streams_changed();
  return s;
}

VESIMresult stream_wait(VESIMstream s, bool take_error) {
  wait_finished(s, s->queued.load());
  std::lock_guard<std::mutex> lock(s->wake_mu);
  VESIMresult r = s->error;
  if (r != VESIM_SUCCESS) {
    tl_detail = s->error_message;
    tl_error_id = s->error_id;
    if (take_error) {
      s->error = VESIM_SUCCESS;
      s->error_id = 0;
      s->error_message.clear();
    }
  }
  return r;
}

// Waits for the stream's work and ends its worker; the caller has already removed it from
// g_streams (and does not hold g_mu, so callbacks on the stream may still call vesim).
void stream_finish(VESIMstream s) {
  stream_wait(s, true);
  {
    std::lock_guard<std::mutex> lock(s->wake_mu);
    s->stop = true;
    s->cv_work.notify_all();
  }
  s->worker.join();
  for (auto& b : s->scratch_cache) free(b.first);
  delete s;
}

// One chunk of a parallel region, under its own fault guard so that a crash on one core leaves
// the region (and the pool's locks) intact.
void run_chunk(Job* job, int64_t c) {
  int64_t b = c * job->chunk, e = std::min(job->n, b + job->chunk);
  sigjmp_buf jb;
  sigjmp_buf* volatile prev = tl_jmp;
  if (sigsetjmp(jb, 0)) {
    tl_jmp = prev;
    job->crashed = int(tl_signal);
    return;
  }
  tl_jmp = &jb;
  job->fn(job->arg, b, e, int(c));
  tl_jmp = prev;
}

void pool_thread(Device* d, uint64_t seen) {
  Pool& p = d->pool;
  for (;;) {
    std::shared_ptr<Job> job;
    spin_for([&] { return p.generation.load(std::memory_order_acquire) != seen; });
    {
      std::unique_lock<std::mutex> lock(p.mu);
      p.cv.wait(lock, [&] { return p.stop || p.generation != seen; });
      if (p.stop) return;
      seen = p.generation;
      job = p.job;
    }
    while (job) {  // none: the region ended before this helper woke up
      int64_t c = job->next.fetch_add(1);
      if (c >= job->chunks) break;
      uint64_t t0 = g_summary.load(std::memory_order_relaxed) ? thread_cpu_ns() : 0;
      run_chunk(job.get(), c);
      if (t0) g_helper_ns += thread_cpu_ns() - t0;
      if (job->done.fetch_add(1) + 1 == job->chunks) {
        std::lock_guard<std::mutex> lock(p.mu);
        p.done_cv.notify_all();
      }
    }
  }
}

VESIMresult memcheck(VESIMdeviceptr p, Device** dev) {
  if (!initialized()) return fail(VESIM_ERROR_NOT_INITIALIZED, "vesimInit was not called");
  Device* d = device_of(VESIM_PTR_DEVICE(p));
  if (!d) return fail(VESIM_ERROR_UNKNOWN_VPTR, "pointer 0x%llx names device %d, which does not "
                      "exist", (unsigned long long)p, VESIM_PTR_DEVICE(p));
  if (VESIM_PTR_INDEX(p) == 0)
    return fail(VESIM_ERROR_UNKNOWN_VPTR, "pointer 0x%llx has allocation index 0",
                (unsigned long long)p);
  *dev = d;
  return VESIM_SUCCESS;
}

// READ: fails on a poisoned byte, with the poisoning failure's code and message; WRITE: records
// a write without gaps (settle_writes), and no poison check; DECLARED: the write was recorded.
enum Access { READ, WRITE, DECLARED };

// Device side: resolve under the allocation table's lock.
VESIMresult resolve(VESIMkernel_ctx* k, VESIMdeviceptr p, uint64_t bytes, const char* what,
                    void** addr, Access access = READ) {
  static char empty_target[64];
  Device* d = k->dev;
  if (access == WRITE) k->add_write(p, bytes, true);
  if (VESIM_PTR_DEVICE(p) != d->id || VESIM_PTR_INDEX(p) == 0) {
    char m[160];
    snprintf(m, sizeof m, "%s: pointer 0x%llx is not an allocation of device %d", what,
             (unsigned long long)p, d->id);
    return record_error(k, VESIM_ERROR_UNKNOWN_VPTR, m);
  }
  // the stream's cache serves its worker only (a kernel's parallel helpers go to the table)
  VESIMstream s = k->stream;
  const bool on_worker = pthread_equal(pthread_self(), s->worker.native_handle());
  const uint32_t index = VESIM_PTR_INDEX(p);
  VESIMstream_st::Resolved* hit = nullptr;
  if (on_worker) {
    uint64_t gen = d->free_gen.load(std::memory_order_acquire);
    if (gen != s->resolved_gen) {
      for (auto& r : s->resolved) r.index = 0;
      s->resolved_gen = gen;
    }
    for (auto& r : s->resolved)
      if (r.index == index) hit = &r;
  }
  VESIMstream_st::Resolved found;
  if (!hit) {
    std::lock_guard<std::mutex> lock(d->mu);
    auto it = d->allocs.find(index);
    if (it == d->allocs.end() || !it->second.backed) {
      char m[160];
      snprintf(m, sizeof m, "%s: pointer 0x%llx (allocation %u) is not allocated (freed, or never "
               "allocated on this stream's timeline)", what, (unsigned long long)p, index);
      return record_error(k, VESIM_ERROR_UNKNOWN_VPTR, m);
    }
    found = {index, static_cast<char*>(it->second.base), it->second.size};
    hit = on_worker ? &(s->resolved[s->resolved_next++ % 4] = found) : &found;
  }
  uint64_t off = VESIM_PTR_OFFSET(p), size = hit->size;
  if (off > size || bytes > size - off) {
    char m[200];
    snprintf(m, sizeof m, "%s: access of %llu bytes at offset %llu of allocation %u leaves its %llu "
             "bytes", what, (unsigned long long)bytes, (unsigned long long)off, VESIM_PTR_INDEX(p),
             (unsigned long long)size);
    return record_error(k, VESIM_ERROR_OUT_OF_BOUNDS, m);
  }
  if (access == READ && bytes && d->poisoned.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(d->mu);
    auto it = d->allocs.find(index);
    if (it != d->allocs.end())
      for (const Poison& q : it->second.poison) {
        if (q.hi <= off || q.lo >= off + bytes) continue;
        char m[200];
        snprintf(m, sizeof m, "%s: bytes [%llu, %llu) of allocation %u hold what failed work was "
                 "to write: ", what, (unsigned long long)std::max(q.lo, off),
                 (unsigned long long)std::min(q.hi, off + bytes), index);
        return record_error(k, q.code, m + *q.message);
      }
  }
  *addr = hit->base ? hit->base + off : empty_target;
  return VESIM_SUCCESS;
}

VESIMresult memset_async(VESIMdeviceptr dst, uint64_t value, int width, size_t count,
                         VESIMstream s) {
  Device* d = nullptr;
  if (VESIMresult r = memcheck(dst, &d)) return r;
  if (count > kMaxOffset) return fail(VESIM_ERROR_INVALID_VALUE, "memset count %zu too big", count);
  Task t{VESIM_PROF_MEMSET, "memset", count * size_t(width), call_latency(), {}};
  t.run = [=](VESIMkernel_ctx* k) {
    void* p;
    if (VESIMresult r = resolve(k, dst, uint64_t(count) * uint64_t(width), "memset", &p, WRITE))
      return r;
    switch (width) {
      case 1: memset(p, int(value & 0xff), count); break;
      case 2: std::fill_n(static_cast<uint16_t*>(p), count, uint16_t(value)); break;
      case 4: std::fill_n(static_cast<uint32_t*>(p), count, uint32_t(value)); break;
      default: std::fill_n(static_cast<uint64_t*>(p), count, value); break;
    }
    return VESIM_SUCCESS;
  };
  return enqueue(s, std::move(t));
}

VESIMstream default_stream(Device* d) {
  std::lock_guard<std::mutex> lock(g_mu);
  return d->ctx ? d->ctx->streams[0] : nullptr;
}

VESIMresult sync_on(VESIMstream s, VESIMresult enq) {
  if (enq) return enq;
  return stream_wait(s, true);
}

}  // namespace

// ================================ public API =================================================

extern "C" {

const char* vesimGetErrorName(VESIMresult r) {
  switch (r) {
    case VESIM_SUCCESS: return "VESIM_SUCCESS";
    case VESIM_ERROR_INVALID_VALUE: return "VESIM_ERROR_INVALID_VALUE";
    case VESIM_ERROR_OUT_OF_MEMORY: return "VESIM_ERROR_OUT_OF_MEMORY";
    case VESIM_ERROR_OUT_OF_BOUNDS: return "VESIM_ERROR_OUT_OF_BOUNDS";
    case VESIM_ERROR_UNKNOWN_VPTR: return "VESIM_ERROR_UNKNOWN_VPTR";
    case VESIM_ERROR_OFFSETTED_VPTR_NOT_ALLOWED: return "VESIM_ERROR_OFFSETTED_VPTR_NOT_ALLOWED";
    case VESIM_ERROR_NOT_INITIALIZED: return "VESIM_ERROR_NOT_INITIALIZED";
    case VESIM_ERROR_INVALID_DEVICE: return "VESIM_ERROR_INVALID_DEVICE";
    case VESIM_ERROR_INVALID_STREAM: return "VESIM_ERROR_INVALID_STREAM";
    case VESIM_ERROR_INVALID_CONTEXT: return "VESIM_ERROR_INVALID_CONTEXT";
    case VESIM_ERROR_CONTEXT_EXISTS: return "VESIM_ERROR_CONTEXT_EXISTS";
    case VESIM_ERROR_NOT_READY: return "VESIM_ERROR_NOT_READY";
    case VESIM_ERROR_KERNEL_FAILED: return "VESIM_ERROR_KERNEL_FAILED";
    case VESIM_ERROR_KERNEL_CRASHED: return "VESIM_ERROR_KERNEL_CRASHED";
    default: return "VESIM_ERROR_UNKNOWN";
  }
}

const char* vesimGetErrorString(VESIMresult r) {
  switch (r) {
    case VESIM_SUCCESS: return "no error";
    case VESIM_ERROR_INVALID_VALUE: return "an argument has an invalid value";
    case VESIM_ERROR_OUT_OF_MEMORY: return "the device is out of memory";
    case VESIM_ERROR_OUT_OF_BOUNDS: return "an access leaves its allocation";
    case VESIM_ERROR_UNKNOWN_VPTR: return "the virtual pointer names no live allocation";
    case VESIM_ERROR_OFFSETTED_VPTR_NOT_ALLOWED: return "an offset pointer cannot be freed";
    case VESIM_ERROR_NOT_INITIALIZED: return "vesimInit has not been called";
    case VESIM_ERROR_INVALID_DEVICE: return "no such device";
    case VESIM_ERROR_INVALID_STREAM: return "not a live stream";
    case VESIM_ERROR_INVALID_CONTEXT: return "the device has no context";
    case VESIM_ERROR_CONTEXT_EXISTS: return "the device already has a context";
    case VESIM_ERROR_NOT_READY: return "the stream still has work";
    case VESIM_ERROR_KERNEL_FAILED: return "a kernel reported an error";
    case VESIM_ERROR_KERNEL_CRASHED: return "a kernel crashed on the device";
    default: return "unknown error";
  }
}

const char* vesimGetLastErrorDetail(void) { return tl_detail.c_str(); }

uint64_t vesimGetLastErrorId(void) { return tl_error_id; }

VESIMresult vesimInit(void) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_refcount++ > 0) return VESIM_SUCCESS;
  const char* nd = getenv("VESIM_DEVICES");
  int n = nd ? atoi(nd) : 1;
  n = std::max(0, std::min(n, 1 << VESIM_PTR_DEVICE_BITS));
  uint64_t mem = parse_bytes(getenv("VESIM_MEMORY"), UINT64_C(48) << 30);
  mem = std::min(mem, kMaxOffset + 1);
  const char* lat = getenv("VESIM_LATENCY");
  g_latency = (lat && strcmp(lat, "veda") == 0) ? 1 : 0;
  const char* prof = getenv("VESIM_PROFILE");
  if (prof && *prof && strcmp(prof, "0") && !g_summary.exchange(true)) {
    g_sum = new std::map<std::string, SumRow>();
    atexit(summary_print);
  }
  for (int i = 0; i < n; i++) {
    auto* d = new Device();
    d->id = i;
    d->memory = mem;
    g_devices.push_back(d);
  }
  // fault handlers come with the first context: a process that only counts devices keeps its own
  return VESIM_SUCCESS;
}

VESIMresult vesimExit(void) {
  std::vector<VESIMstream> streams;
  std::vector<Device*> devices;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!initialized()) return fail(VESIM_ERROR_NOT_INITIALIZED, "vesimExit without vesimInit");
    if (--g_refcount > 0) return VESIM_SUCCESS;
    streams.assign(g_streams.begin(), g_streams.end());
    g_streams.clear();
    streams_changed();
    devices.swap(g_devices);
  }
  for (VESIMstream s : streams) stream_finish(s);
  for (Device* d : devices) {
    delete static_cast<Context*>(d->ctx);
    {
      std::lock_guard<std::mutex> pl(d->pool.mu);
      d->pool.stop = true;
      d->pool.cv.notify_all();
    }
    for (auto& t : d->pool.threads) t.join();
    for (auto& [idx, a] : d->allocs) {
      if (a.size >= kMmapThreshold) munmap(a.base, a.size);
      else free(a.base);
    }
    delete d;
  }
  return VESIM_SUCCESS;
}

VESIMresult vesimDeviceGetCount(int* count) {
  if (!initialized()) return fail(VESIM_ERROR_NOT_INITIALIZED, "vesimInit was not called");
  if (!count) return fail(VESIM_ERROR_INVALID_VALUE, "count is NULL");
  *count = int(g_devices.size());
  return VESIM_SUCCESS;
}

VESIMresult vesimDeviceGetInfo(int device, VESIMdeviceinfo* info) {
  if (!initialized()) return fail(VESIM_ERROR_NOT_INITIALIZED, "vesimInit was not called");
  Device* d = device_of(device);
  if (!d) return fail(VESIM_ERROR_INVALID_DEVICE, "device %d does not exist", device);
  if (!info) return fail(VESIM_ERROR_INVALID_VALUE, "info is NULL");
  snprintf(info->name, sizeof info->name, "SX-Aurora VE 10B (vesim)");
  info->cores = kCoresPerDevice;
  info->vector_length = VESIM_VL;
  info->memory = d->memory;
  return VESIM_SUCCESS;
}

VESIMresult vesimMemGetInfo(int device, uint64_t* free_bytes, uint64_t* total_bytes) {
  if (!initialized()) return fail(VESIM_ERROR_NOT_INITIALIZED, "vesimInit was not called");
  Device* d = device_of(device);
  if (!d) return fail(VESIM_ERROR_INVALID_DEVICE, "device %d does not exist", device);
  std::lock_guard<std::mutex> lock(d->mu);
  if (free_bytes) *free_bytes = d->memory - d->used;
  if (total_bytes) *total_bytes = d->memory;
  return VESIM_SUCCESS;
}

VESIMresult vesimCtxCreate(VESIMcontext* ctx, VESIMcontext_mode mode, int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!initialized()) return fail(VESIM_ERROR_NOT_INITIALIZED, "vesimInit was not called");
  Device* d = device_of(device);
  if (!d) return fail(VESIM_ERROR_INVALID_DEVICE, "device %d does not exist", device);
  if (!ctx) return fail(VESIM_ERROR_INVALID_VALUE, "ctx is NULL");
  if (mode != VESIM_CONTEXT_MODE_OMP && mode != VESIM_CONTEXT_MODE_SCALAR)
    return fail(VESIM_ERROR_INVALID_VALUE, "unknown context mode %d", int(mode));
  if (d->ctx) return fail(VESIM_ERROR_CONTEXT_EXISTS, "device %d already has a context", device);
  install_fault_handlers();
  auto* c = new Context();
  c->dev = d;
  c->mode = mode;
  if (mode == VESIM_CONTEXT_MODE_OMP) {
    c->streams.push_back(stream_new(c, kCoresPerDevice));
  } else {
    for (int i = 0; i < kCoresPerDevice; i++) c->streams.push_back(stream_new(c, 1));
  }
  d->ctx = c;
  *ctx = c;
  return VESIM_SUCCESS;
}

VESIMresult vesimCtxGet(int device, VESIMcontext* ctx) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!initialized()) return fail(VESIM_ERROR_NOT_INITIALIZED, "vesimInit was not called");
  Device* d = device_of(device);
  if (!d) return fail(VESIM_ERROR_INVALID_DEVICE, "device %d does not exist", device);
  if (!d->ctx) return fail(VESIM_ERROR_INVALID_CONTEXT, "device %d has no context", device);
  *ctx = d->ctx;
  return VESIM_SUCCESS;
}

static Device* ctx_device(VESIMcontext ctx) {  // g_mu held
  for (Device* d : g_devices)
    if (d->ctx == ctx && ctx) return d;
  return nullptr;
}

VESIMresult vesimCtxDestroy(VESIMcontext ctx) {
  std::vector<VESIMstream> streams;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    Device* d = ctx_device(ctx);
    if (!d) return fail(VESIM_ERROR_INVALID_CONTEXT, "not a live context");
    // extra streams made with vesimStreamCreate belong to the context too
    for (VESIMstream s : std::set<VESIMstream>(g_streams)) {
      if (s->ctx != ctx) continue;
      streams.push_back(s);
      g_streams.erase(s);
      streams_changed();
    }
    d->ctx = nullptr;
  }
  for (VESIMstream s : streams) stream_finish(s);
  delete static_cast<Context*>(ctx);
  return VESIM_SUCCESS;
}

VESIMresult vesimCtxStreamCount(VESIMcontext ctx, int* count) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!ctx_device(ctx)) return fail(VESIM_ERROR_INVALID_CONTEXT, "not a live context");
  *count = int(ctx->streams.size());
  return VESIM_SUCCESS;
}

VESIMresult vesimCtxGetStream(VESIMcontext ctx, int index, VESIMstream* stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!ctx_device(ctx)) return fail(VESIM_ERROR_INVALID_CONTEXT, "not a live context");
  if (index < 0 || index >= int(ctx->streams.size()))
    return fail(VESIM_ERROR_INVALID_VALUE, "stream index %d, the context has %zu", index,
                ctx->streams.size());
  *stream = ctx->streams[size_t(index)];
  return VESIM_SUCCESS;
}

VESIMresult vesimCtxSynchronize(VESIMcontext ctx) {
  std::vector<VESIMstream> all;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!ctx_device(ctx)) return fail(VESIM_ERROR_INVALID_CONTEXT, "not a live context");
    for (VESIMstream s : g_streams)
      if (s->ctx == ctx) all.push_back(s);
  }
  // every stream's pending failure is taken: all of them are reported, in one error
  VESIMresult first = VESIM_SUCCESS;
  std::string detail;
  int more = 0;
  for (VESIMstream s : all) {
    VESIMresult r = stream_wait(s, true);
    if (!r) continue;
    if (!first) {
      first = r;
      detail = tl_detail;
    } else {
      detail += (more++ ? "; " : "; and on other streams: ") + tl_detail;
    }
  }
  if (first) tl_detail = detail, tl_error_id = 0;
  return first;
}

VESIMresult vesimStreamCreate(VESIMcontext ctx, VESIMstream* stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!ctx_device(ctx)) return fail(VESIM_ERROR_INVALID_CONTEXT, "not a live context");
  if (!stream) return fail(VESIM_ERROR_INVALID_VALUE, "stream is NULL");
  int cores = ctx->mode == VESIM_CONTEXT_MODE_OMP ? kCoresPerDevice : 1;
  *stream = stream_new(static_cast<Context*>(ctx), cores);
  return VESIM_SUCCESS;
}

VESIMresult vesimStreamDestroy(VESIMstream stream) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!initialized() || !g_streams.count(stream))
      return fail(VESIM_ERROR_INVALID_STREAM, "not a live vesim stream");
    for (VESIMstream s : stream->ctx->streams)
      if (s == stream) return fail(VESIM_ERROR_INVALID_STREAM, "a context's own streams are "
                                   "destroyed with the context");
    g_streams.erase(stream);
    streams_changed();
  }
  stream_finish(stream);
  return VESIM_SUCCESS;
}

VESIMresult vesimStreamQuery(VESIMstream stream) {
  if (!stream_valid(stream)) return fail(VESIM_ERROR_INVALID_STREAM, "not a live vesim stream");
  // a task in its last instructions (the callback that just completed an event the host waited
  // for) is given a few microseconds to finish
  uint64_t target = stream->queued.load(std::memory_order_acquire);
  spin_for([&] { return stream->finished.load(std::memory_order_acquire) >= target; }, 5000);
  // idle, or nothing left but a marker whose function has started (its waiter may already be
  // back: the worker can be descheduled for longer than the spin before it counts the marker)
  const uint64_t queued = stream->queued.load(), finished = stream->finished.load();
  return finished == queued || (finished + 1 == queued && stream->marking.load() == queued)
             ? VESIM_SUCCESS : VESIM_ERROR_NOT_READY;
}

VESIMresult vesimStreamSynchronize(VESIMstream stream) {
  if (!stream_valid(stream)) return fail(VESIM_ERROR_INVALID_STREAM, "not a live vesim stream");
  return stream_wait(stream, true);
}

VESIMresult vesimStreamClearError(VESIMstream stream, uint64_t id) {
  if (!stream_valid(stream)) return fail(VESIM_ERROR_INVALID_STREAM, "not a live vesim stream");
  std::lock_guard<std::mutex> lock(stream->wake_mu);
  if (id && stream->error_id == id) {
    stream->error = VESIM_SUCCESS;
    stream->error_id = 0;
    stream->error_message.clear();
  }
  return VESIM_SUCCESS;
}

VESIMresult vesimStreamGetDevice(VESIMstream stream, int* device) {
  if (!stream_valid(stream)) return fail(VESIM_ERROR_INVALID_STREAM, "not a live vesim stream");
  *device = stream->dev->id;
  return VESIM_SUCCESS;
}

static VESIMresult add_callback(VESIMstream stream, VESIMstream_callback fn, void* user, bool marker) {
  if (!fn) return fail(VESIM_ERROR_INVALID_VALUE, "callback is NULL");
  Task t{VESIM_PROF_CALLBACK, marker ? "marker" : "callback", 0, 0, {}};
  t.run = [=](VESIMkernel_ctx* k) {
    fn(k->stream, k->error, user);
    return VESIM_SUCCESS;
  };
  t.marker = marker;
  return enqueue(stream, std::move(t));
}

VESIMresult vesimStreamAddCallback(VESIMstream stream, VESIMstream_callback fn, void* user) {
  return add_callback(stream, fn, user, false);
}

VESIMresult vesimStreamAddMarker(VESIMstream stream, VESIMstream_callback fn, void* user) {
  return add_callback(stream, fn, user, true);
}

VESIMresult vesimMemAllocAsync(VESIMdeviceptr* ptr, size_t size, VESIMstream stream) {
  if (!ptr) return fail(VESIM_ERROR_INVALID_VALUE, "ptr is NULL");
  if (!stream_valid(stream)) return fail(VESIM_ERROR_INVALID_STREAM, "not a live vesim stream");
  Device* d = stream->dev;
  if (size > kMaxOffset)
    return fail(VESIM_ERROR_OUT_OF_MEMORY, "allocation of %zu bytes exceeds the %llu-byte "
                "limit of one allocation", size, (unsigned long long)kMaxOffset);
  uint32_t index;
  {
    std::lock_guard<std::mutex> lock(d->mu);
    if (size > d->memory - d->used)
      return fail(VESIM_ERROR_OUT_OF_MEMORY, "device %d: %zu bytes requested, %llu of %llu free",
                  d->id, size, (unsigned long long)(d->memory - d->used),
                  (unsigned long long)d->memory);
    if (d->allocs.size() >= kMaxIndex)
      return fail(VESIM_ERROR_OUT_OF_MEMORY, "device %d: allocation table full", d->id);
    // Indices advance round-robin so a freed index is reused as late as possible: a stale
    // pointer then meets UNKNOWN_VPTR instead of someone else's memory.
    while (d->allocs.count(d->next_index)) d->next_index = d->next_index % kMaxIndex + 1;
    index = d->next_index;
    d->next_index = d->next_index % kMaxIndex + 1;
    Alloc fresh;
    fresh.size = size;
    d->allocs[index] = fresh;
    d->used += size;
    d->peak = std::max(d->peak, d->used);
  }
  d->stats.allocs++;
  VESIMdeviceptr p = (uint64_t(d->id) << 59) | (uint64_t(index) << VESIM_PTR_OFFSET_BITS);
  Task t{VESIM_PROF_ALLOC, "alloc", size, call_latency(), {}};
  t.run = [d, index, size](VESIMkernel_ctx* k) {
    void* base = nullptr;
    if (size >= kMmapThreshold) {
      base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                  -1, 0);
      if (base == MAP_FAILED) base = nullptr;
    } else if (size > 0) {
      base = aligned_alloc(64, (size + 63) / 64 * 64);
    }
    std::lock_guard<std::mutex> lock(d->mu);
    Alloc& a = d->allocs[index];
    if (size > 0 && !base) {
      d->allocs.erase(index);
      d->used -= size;
      return record_error(k, VESIM_ERROR_OUT_OF_MEMORY, "the host could not back the allocation");
    }
    a.base = base;
    a.size = size;
    a.backed = true;
    if (a.state == Alloc::RESERVED) a.state = Alloc::LIVE;
    return VESIM_SUCCESS;
  };
  if (VESIMresult r = enqueue(stream, std::move(t))) {
    std::lock_guard<std::mutex> lock(d->mu);
    d->allocs.erase(index);
    d->used -= size;
    return r;
  }
  *ptr = p;
  return VESIM_SUCCESS;
}

VESIMresult vesimMemFreeAsync(VESIMdeviceptr ptr, VESIMstream stream) {
  Device* d = nullptr;
  if (VESIMresult r = memcheck(ptr, &d)) return r;
  if (!stream_valid(stream)) return fail(VESIM_ERROR_INVALID_STREAM, "not a live vesim stream");
  if (stream->dev != d)
    return fail(VESIM_ERROR_INVALID_VALUE, "pointer of device %d freed on a stream of device %d",
                d->id, stream->dev->id);
  if (VESIM_PTR_OFFSET(ptr) != 0)
    return fail(VESIM_ERROR_OFFSETTED_VPTR_NOT_ALLOWED, "pointer 0x%llx has offset %llu; free the "
                "pointer the allocation returned", (unsigned long long)ptr,
                (unsigned long long)VESIM_PTR_OFFSET(ptr));
  uint32_t index = VESIM_PTR_INDEX(ptr);
  {
    std::lock_guard<std::mutex> lock(d->mu);
    auto it = d->allocs.find(index);
    if (it == d->allocs.end() || it->second.state == Alloc::FREEING)
      return fail(VESIM_ERROR_UNKNOWN_VPTR, "pointer 0x%llx is not allocated (double free?)",
                  (unsigned long long)ptr);
    it->second.state = Alloc::FREEING;
  }
  d->stats.frees++;
  Task t{VESIM_PROF_FREE, "free", 0, call_latency(), {}};
  t.run = [d, index](VESIMkernel_ctx*) {
    std::lock_guard<std::mutex> lock(d->mu);
    auto it = d->allocs.find(index);
    if (it == d->allocs.end()) return VESIM_SUCCESS;
    if (it->second.size >= kMmapThreshold) munmap(it->second.base, it->second.size);
    else free(it->second.base);
    d->used -= it->second.size;
    poison_drop(d, it->second);
    d->allocs.erase(it);
    d->free_gen++;
    return VESIM_SUCCESS;
  };
  return enqueue(stream, std::move(t));
}

VESIMresult vesimMemAlloc(VESIMdeviceptr* ptr, size_t size, int device) {
  if (!initialized()) return fail(VESIM_ERROR_NOT_INITIALIZED, "vesimInit was not called");
  Device* d = device_of(device);
  if (!d) return fail(VESIM_ERROR_INVALID_DEVICE, "device %d does not exist", device);
  VESIMstream s = default_stream(d);
  if (!s) return fail(VESIM_ERROR_INVALID_CONTEXT, "device %d has no context", device);
  return sync_on(s, vesimMemAllocAsync(ptr, size, s));
}

VESIMresult vesimMemFree(VESIMdeviceptr ptr) {
  Device* d = nullptr;
  if (VESIMresult r = memcheck(ptr, &d)) return r;
  VESIMstream s = default_stream(d);
  if (!s) return fail(VESIM_ERROR_INVALID_CONTEXT, "device %d has no context", d->id);
  return sync_on(s, vesimMemFreeAsync(ptr, s));
}

VESIMresult vesimMemGetAddressRange(VESIMdeviceptr* base, size_t* size, VESIMdeviceptr ptr) {
  Device* d = nullptr;
  if (VESIMresult r = memcheck(ptr, &d)) return r;
  std::lock_guard<std::mutex> lock(d->mu);
  auto it = d->allocs.find(VESIM_PTR_INDEX(ptr));
  if (it == d->allocs.end() || it->second.state == Alloc::FREEING)
    return fail(VESIM_ERROR_UNKNOWN_VPTR, "pointer 0x%llx is not allocated", (unsigned long long)ptr);
  if (base) *base = ptr - VESIM_PTR_OFFSET(ptr);
  if (size) *size = it->second.size;
  return VESIM_SUCCESS;
}

VESIMresult vesimMemcpyHtoDAsync(VESIMdeviceptr dst, const void* src, size_t size, VESIMstream s) {
  Device* d = nullptr;
  if (VESIMresult r = memcheck(dst, &d)) return r;
  if (!src && size) return fail(VESIM_ERROR_INVALID_VALUE, "host source is NULL");
  d->stats.copies_htod++;
  d->stats.bytes_htod += size;
  Task t{VESIM_PROF_MEMCPY_HTOD, "memcpy_htod", size, copy_latency(size), {}};
  t.run = [=](VESIMkernel_ctx* k) {
    void* p;
    if (VESIMresult r = resolve(k, dst, size, "memcpy HtoD destination", &p, WRITE)) return r;
    if (size) memcpy(p, src, size);
    return VESIM_SUCCESS;
  };
  return enqueue(s, std::move(t));
}

VESIMresult vesimMemcpyDtoHAsync(void* dst, VESIMdeviceptr src, size_t size, VESIMstream s) {
  Device* d = nullptr;
  if (VESIMresult r = memcheck(src, &d)) return r;
  if (!dst && size) return fail(VESIM_ERROR_INVALID_VALUE, "host destination is NULL");
  d->stats.copies_dtoh++;
  d->stats.bytes_dtoh += size;
  Task t{VESIM_PROF_MEMCPY_DTOH, "memcpy_dtoh", size, copy_latency(size), {}};
  t.run = [=](VESIMkernel_ctx* k) {
    void* p;
    if (VESIMresult r = resolve(k, src, size, "memcpy DtoH source", &p)) return r;
    if (size) memcpy(dst, p, size);
    return VESIM_SUCCESS;
  };
  return enqueue(s, std::move(t));
}

VESIMresult vesimMemcpyDtoDAsync(VESIMdeviceptr dst, VESIMdeviceptr src, size_t size,
                                 VESIMstream s) {
  Device *d = nullptr, *d2 = nullptr;
  if (VESIMresult r = memcheck(dst, &d)) return r;
  if (VESIMresult r = memcheck(src, &d2)) return r;
  if (d != d2)
    return fail(VESIM_ERROR_INVALID_VALUE, "DtoD across devices (%d -> %d) is not supported",
                d2->id, d->id);
  d->stats.copies_dtod++;
  d->stats.bytes_dtod += size;
  // on-device bandwidth (~1.2 TB/s HBM) is far above PCIe: only the call cost counts
  Task t{VESIM_PROF_MEMCPY_DTOD, "memcpy_dtod", size, call_latency(), {}};
  t.run = [=](VESIMkernel_ctx* k) {
    void *p, *q;
    if (VESIMresult r = resolve(k, dst, size, "memcpy DtoD destination", &p, WRITE)) return r;
    if (VESIMresult r = resolve(k, src, size, "memcpy DtoD source", &q)) return r;
    if (size) memmove(p, q, size);
    return VESIM_SUCCESS;
  };
  return enqueue(s, std::move(t));
}

VESIMresult vesimMemcpyHtoD(VESIMdeviceptr dst, const void* src, size_t size) {
  Device* d = nullptr;
  if (VESIMresult r = memcheck(dst, &d)) return r;
  VESIMstream s = default_stream(d);
  if (!s) return fail(VESIM_ERROR_INVALID_CONTEXT, "device %d has no context", d->id);
  return sync_on(s, vesimMemcpyHtoDAsync(dst, src, size, s));
}

VESIMresult vesimMemcpyDtoH(void* dst, VESIMdeviceptr src, size_t size) {
  Device* d = nullptr;
  if (VESIMresult r = memcheck(src, &d)) return r;
  VESIMstream s = default_stream(d);
  if (!s) return fail(VESIM_ERROR_INVALID_CONTEXT, "device %d has no context", d->id);
  return sync_on(s, vesimMemcpyDtoHAsync(dst, src, size, s));
}

VESIMresult vesimMemcpyDtoD(VESIMdeviceptr dst, VESIMdeviceptr src, size_t size) {
  Device* d = nullptr;
  if (VESIMresult r = memcheck(dst, &d)) return r;
  VESIMstream s = default_stream(d);
  if (!s) return fail(VESIM_ERROR_INVALID_CONTEXT, "device %d has no context", d->id);
  return sync_on(s, vesimMemcpyDtoDAsync(dst, src, size, s));
}

VESIMresult vesimMemsetD8Async(VESIMdeviceptr dst, uint8_t v, size_t n, VESIMstream s) {
  return memset_async(dst, v, 1, n, s);
}
VESIMresult vesimMemsetD16Async(VESIMdeviceptr dst, uint16_t v, size_t n, VESIMstream s) {
  return memset_async(dst, v, 2, n, s);
}
VESIMresult vesimMemsetD32Async(VESIMdeviceptr dst, uint32_t v, size_t n, VESIMstream s) {
  return memset_async(dst, v, 4, n, s);
}
VESIMresult vesimMemsetD64Async(VESIMdeviceptr dst, uint64_t v, size_t n, VESIMstream s) {
  return memset_async(dst, v, 8, n, s);
}
// Synchronous memsets run on the device's first stream and wait for it.
static VESIMresult memset_sync(VESIMdeviceptr dst, uint64_t v, int width, size_t n) {
  Device* d = nullptr;
  if (VESIMresult r = memcheck(dst, &d)) return r;
  VESIMstream s = default_stream(d);
  if (!s) return fail(VESIM_ERROR_INVALID_CONTEXT, "device %d has no context", d->id);
  return sync_on(s, memset_async(dst, v, width, n, s));
}
VESIMresult vesimMemsetD8(VESIMdeviceptr dst, uint8_t v, size_t n) { return memset_sync(dst, v, 1, n); }
VESIMresult vesimMemsetD16(VESIMdeviceptr dst, uint16_t v, size_t n) { return memset_sync(dst, v, 2, n); }
VESIMresult vesimMemsetD32(VESIMdeviceptr dst, uint32_t v, size_t n) { return memset_sync(dst, v, 4, n); }
VESIMresult vesimMemsetD64(VESIMdeviceptr dst, uint64_t v, size_t n) { return memset_sync(dst, v, 8, n); }

VESIMresult vesimMemcpyPackedAsync(const VESIMpacked_copy* copies, size_t count, VESIMstream s) {
  if (!copies && count) return fail(VESIM_ERROR_INVALID_VALUE, "copies is NULL");
  if (!stream_valid(s)) return fail(VESIM_ERROR_INVALID_STREAM, "not a live vesim stream");
  std::vector<VESIMpacked_copy> list(copies, copies + count);
  uint64_t total = 0;
  for (size_t i = 0; i < count; i++) {
    Device* d = nullptr;
    if (VESIMresult r = memcheck(list[i].vptr, &d)) return r;
    if (d != s->dev) return fail(VESIM_ERROR_INVALID_VALUE, "packed copy %zu is on device %d, the "
                                 "stream on %d", i, d->id, s->dev->id);
    if (list[i].kind != VESIM_COPY_HTOD && list[i].kind != VESIM_COPY_DTOH)
      return fail(VESIM_ERROR_INVALID_VALUE, "packed copy %zu has kind %d", i, int(list[i].kind));
    if (!list[i].host && list[i].size) return fail(VESIM_ERROR_INVALID_VALUE, "packed copy %zu has "
                                                   "a NULL host buffer", i);
    total += list[i].size;
  }
  s->dev->stats.packed++;
  Task t{VESIM_PROF_PACKED, "memcpy_packed", total, copy_latency(total), {}};
  t.run = [list](VESIMkernel_ctx* k) {
    for (const VESIMpacked_copy& c : list)  // all of them, in case an earlier one fails
      if (c.kind == VESIM_COPY_HTOD) k->add_write(c.vptr, c.size, true);
    for (size_t i = 0; i < list.size(); i++) {
      const VESIMpacked_copy& c = list[i];
      void* p;
      if (VESIMresult r = resolve(k, c.vptr, c.size, "packed copy", &p,
                                  c.kind == VESIM_COPY_HTOD ? DECLARED : READ))
        return r;
      if (c.kind == VESIM_COPY_HTOD) memcpy(p, c.host, c.size);
      else memcpy(c.host, p, c.size);
    }
    return VESIM_SUCCESS;
  };
  return enqueue(s, std::move(t));
}

VESIMresult vesimLaunchKernelNamed(const char* name, VESIMkernel fn, VESIMstream stream,
                                   const void* args, size_t args_size) {
  if (!fn) return fail(VESIM_ERROR_INVALID_VALUE, "kernel function is NULL");
  if (!args && args_size) return fail(VESIM_ERROR_INVALID_VALUE, "args is NULL");
  Task t{VESIM_PROF_KERNEL, name ? name : "kernel", 0, call_latency(), {}};
  if (args_size <= sizeof t.args) {
    t.kernel = fn;
    if (args_size) memcpy(t.args, args, args_size);
  } else {
    auto pack = std::make_shared<std::vector<char>>(static_cast<const char*>(args),
                                                    static_cast<const char*>(args) + args_size);
    t.run = [fn, pack](VESIMkernel_ctx* k) { return fn(k, pack->data()); };
  }
  return enqueue(stream, std::move(t));
}

VESIMresult vesimLaunchKernel(VESIMkernel fn, VESIMstream stream, const void* args,
                              size_t args_size) {
  return vesimLaunchKernelNamed(nullptr, fn, stream, args, args_size);
}

VESIMresult vesimGetStats(int device, VESIMstats* st) {
  if (!initialized()) return fail(VESIM_ERROR_NOT_INITIALIZED, "vesimInit was not called");
  Device* d = device_of(device);
  if (!d) return fail(VESIM_ERROR_INVALID_DEVICE, "device %d does not exist", device);
  if (!st) return fail(VESIM_ERROR_INVALID_VALUE, "stats is NULL");
  const Stats& s = d->stats;
  st->api_calls = s.api_calls;
  st->kernels = s.kernels;
  st->kernel_errors = s.kernel_errors;
  st->copies_htod = s.copies_htod;
  st->copies_dtoh = s.copies_dtoh;
  st->copies_dtod = s.copies_dtod;
  st->packed_copies = s.packed;
  st->bytes_htod = s.bytes_htod;
  st->bytes_dtoh = s.bytes_dtoh;
  st->bytes_dtod = s.bytes_dtod;
  st->allocs = s.allocs;
  st->frees = s.frees;
  std::lock_guard<std::mutex> lock(d->mu);
  st->mem_used = d->used;
  st->mem_peak = d->peak;
  st->live_allocations = d->allocs.size();
  return VESIM_SUCCESS;
}

VESIMresult vesimResetStats(int device) {
  if (!initialized()) return fail(VESIM_ERROR_NOT_INITIALIZED, "vesimInit was not called");
  Device* d = device_of(device);
  if (!d) return fail(VESIM_ERROR_INVALID_DEVICE, "device %d does not exist", device);
  Stats& s = d->stats;
  for (auto* c : {&s.api_calls, &s.kernels, &s.kernel_errors, &s.copies_htod, &s.copies_dtoh,
                  &s.copies_dtod, &s.packed, &s.bytes_htod, &s.bytes_dtoh, &s.bytes_dtod,
                  &s.allocs, &s.frees})
    *c = 0;
  std::lock_guard<std::mutex> lock(d->mu);
  d->peak = d->used;
  return VESIM_SUCCESS;
}

VESIMresult vesimProfilerSetCallback(VESIMprofiler_callback fn, void* user) {
  std::lock_guard<std::mutex> lock(g_prof_mu);
  g_prof_user = user;
  g_prof_fn = fn;
  return VESIM_SUCCESS;
}

VESIMresult vesimSetLatencyModel(int model) {
  if (model != 0 && model != 1) return fail(VESIM_ERROR_INVALID_VALUE, "latency model %d", model);
  g_latency = model;
  return VESIM_SUCCESS;
}

// ---- device side ----------------------------------------------------------------------------

VESIMresult vesimDevResolve(VESIMkernel_ctx* k, VESIMdeviceptr ptr, uint64_t bytes,
                            const char* what, void** addr) {
  return resolve(k, ptr, bytes, what ? what : "kernel access", addr);
}

VESIMresult vesimDevResolveOut(VESIMkernel_ctx* k, VESIMdeviceptr ptr, uint64_t bytes, int dense,
                               const char* what, void** addr) {
  k->add_write(ptr, bytes, dense != 0);
  return resolve(k, ptr, bytes, what ? what : "kernel output", addr, DECLARED);
}

VESIMresult vesimDevFail(VESIMkernel_ctx* k, VESIMresult code, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return record_error(k, code == VESIM_SUCCESS ? VESIM_ERROR_KERNEL_FAILED : code, buf);
}

int vesimDevCores(const VESIMkernel_ctx* k) { return k->cores; }
int vesimDevDevice(const VESIMkernel_ctx* k) { return k->dev->id; }

void* vesimDevScratch(VESIMkernel_ctx* k, uint64_t bytes) {
  const uint64_t want = (bytes + 63) / 64 * 64 + 64;
  auto& cache = k->stream->scratch_cache;  // the smallest cached block that is large enough
  auto best = cache.end();
  for (auto it = cache.begin(); it != cache.end(); ++it)
    if (it->second >= want && (best == cache.end() || it->second < best->second)) best = it;
  if (best != cache.end()) {
    k->scratch.push_back(*best);
    k->stream->scratch_cached -= best->second;
    cache.erase(best);
    return k->scratch.back().first;
  }
  void* p = aligned_alloc(64, want);
  if (!p) {
    record_error(k, VESIM_ERROR_OUT_OF_MEMORY, "kernel scratch of " + std::to_string(bytes) +
                 " bytes");
    return nullptr;
  }
  k->scratch.push_back({p, want});
  return p;
}

VESIMresult vesimDevParallelFor(VESIMkernel_ctx* k, int64_t n, int64_t grain, VESIMrange_fn body,
                                void* arg) {
  if (n <= 0) return VESIM_SUCCESS;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(k->cores, (n + grain - 1) / grain);
  static const int host_threads = std::max(1, int(std::thread::hardware_concurrency()));
  int helpers = std::min<int>(int(chunks), host_threads) - 1;
  if (helpers <= 0) {
    body(arg, 0, n, 0);
    return VESIM_SUCCESS;
  }
  Device* d = k->dev;
  Pool& p = d->pool;
  std::lock_guard<std::mutex> run(p.run_mu);
  const uint64_t t0 = g_summary.load(std::memory_order_relaxed) ? now_ns() : 0;
  auto job = std::make_shared<Job>();
  job->fn = body;
  job->arg = arg;
  job->n = n;
  job->chunk = (n + chunks - 1) / chunks;
  job->chunks = (n + job->chunk - 1) / job->chunk;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    while (int(p.threads.size()) < host_threads - 1)
      p.threads.emplace_back(pool_thread, d, p.generation.load());
    p.job = job;
    p.generation++;
    p.cv.notify_all();
  }
  // the calling stream worker takes chunks too
  for (;;) {
    int64_t c = job->next.fetch_add(1);
    if (c >= job->chunks) break;
    run_chunk(job.get(), c);
    job->done.fetch_add(1);
  }
  auto all_done = [&] { return job->done.load() == job->chunks; };
  const uint64_t t1 = t0 ? now_ns() : 0;
  if (!spin_for(all_done)) {
    std::unique_lock<std::mutex> lock(p.mu);
    p.done_cv.wait(lock, all_done);
  }
  if (t0) {
    uint64_t t2 = now_ns();
    g_regions++, g_region_ns += t2 - t0, g_wait_ns += t2 - t1;
  }
  {
    std::lock_guard<std::mutex> lock(p.mu);
    p.job.reset();  // `arg` lives on this stack frame: a late helper must not reach it
  }
  if (job->crashed) {
    char m[96];
    snprintf(m, sizeof m, "device code crashed on a core with signal %d", int(job->crashed));
    return record_error(k, VESIM_ERROR_KERNEL_CRASHED, m);
  }
  return VESIM_SUCCESS;
}

}  // extern "C"
