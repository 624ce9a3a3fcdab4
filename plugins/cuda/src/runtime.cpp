/* runtime.cpp — the UD_Api table on the CUDA runtime: devices, stream-ordered memory from the
 * device's pool, async copies, streams and events one to one, CUDA errors, kernel lookup.
 *
 * Errors of enqueued work (unidev.h), as far as CUDA allows. Index faults that our kernels find
 * (nll_loss targets, max_pool2d_backward indices) are written to a fault slot of the launching
 * stream (pinned, mapped), so they are returned by that stream's synchronize, an event recorded
 * on it, or device_synchronize — not by another stream's calls. What CUDA cannot separate: its
 * own asynchronous errors (an illegal address, a launch failure) are sticky for the whole
 * context — after one, every call on every stream of the device fails with it, and the process
 * must start again; and a slot tells which op faulted, not which launch, nor whether it ran
 * before or after an event (an event may report a fault of work after it that already ran).
 * Poison: outputs of launches of the faulting op on that stream since its last synchronize are
 * poisoned when the fault is seen (at a synchronize, or at a read that finds the slot set); a
 * read (memcpy_d2h, a d2d source, a kernel input) of poisoned bytes is refused at once. A read
 * enqueued before the faulting kernel ran is not caught: it returns the computed value. */
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda_plugin.h"
#include "libs.h"

#ifndef UD_CUDA_VERSION
#define UD_CUDA_VERSION "0.1.0"
#endif

struct UD_StreamImpl {
  int32_t device;
  cudaStream_t s;
  int slot;      /* its fault slot (0: shared with the default stream, when all are taken) */
  uint32_t gen;  /* the slot's generation when it was given to this stream */
};
struct UD_EventImpl {
  int32_t device;
  cudaEvent_t e;
  int slot = -1;  /* of the stream it was last recorded on */
  uint32_t gen = 0;
  std::string failure;  /* the fault its synchronize found, returned by every synchronize */
};

namespace udc {
namespace {

/* ---- devices ------------------------------------------------------------------------------ */

int g_count = 0;
char g_reason[256];
std::once_flag g_probe_once;

void probe() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess) {
    g_count = n;
    if (!n) snprintf(g_reason, sizeof g_reason, "cudaGetDeviceCount: no CUDA-capable device");
    return;
  }
  cudaGetLastError();
  int driver = 0;
  cudaDriverGetVersion(&driver);
  if (driver == 0)
    snprintf(g_reason, sizeof g_reason,
             "no CUDA driver (libcuda.so.1 missing): install the NVIDIA driver (r580 or newer)");
  else if (e == cudaErrorInsufficientDriver)
    snprintf(g_reason, sizeof g_reason,
             "the NVIDIA driver supports CUDA %d.%d; this plugin's runtime needs CUDA %d.%d "
             "(driver r580 or newer)", driver / 1000, driver % 1000 / 10, CUDART_VERSION / 1000,
             CUDART_VERSION % 1000 / 10);
  else
    snprintf(g_reason, sizeof g_reason, "cudaGetDeviceCount: %s (%s)", cudaGetErrorName(e),
             cudaGetErrorString(e));
}

constexpr int kSlots = 128; /* fault slots per device: 0 for the default stream, one per stream */

struct Written { /* the output bytes of a launch that may fault */
  int op;
  uint64_t lo, hi;
};
struct Slot { /* host-side state of a fault slot (under g_mu) */
  uint32_t gen = 0;
  bool used = false;
  std::vector<Written> pending; /* launches since the stream's last synchronize */
};

struct DeviceState {
  std::once_flag once;
  UD_Error* init_error = nullptr;
  DeviceFault* fault = nullptr; /* kSlots of them, pinned, mapped */
  DeviceFault* fault_dev = nullptr;
  Slot slots[kSlots];
  cudaMemPool_t pool = nullptr;
  uint64_t total = 0; /* bytes, as UD_DeviceProperties reports them */
};
DeviceState g_dev[64];

UD_Error* device_ok(int32_t device) {
  std::call_once(g_probe_once, probe);
  if (g_count == 0) return ud_kit_error(UD_ERR_UNSUPPORTED, "cuda: no devices: %s", g_reason);
  if (device < 0 || device >= g_count || device >= 64)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "cuda: device %d out of range [0, %d)", device,
                        g_count);
  DeviceState& d = g_dev[device];
  std::call_once(d.once, [&] {
    UD_Error* e = cuda_error(cudaSetDevice(device), "cudaSetDevice");
    if (!e) e = cuda_error(cudaDeviceGetDefaultMemPool(&d.pool, device), "cudaDeviceGetDefaultMemPool");
    if (!e) {
      /* keep freed blocks cached in the pool, like a framework's caching allocator */
      uint64_t keep = UINT64_MAX;
      e = cuda_error(cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrReleaseThreshold, &keep),
                     "cudaMemPoolSetAttribute");
    }
    cudaDeviceProp prop;
    if (!e) e = cuda_error(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    if (!e) d.total = prop.totalGlobalMem;
    if (!e) {
      e = cuda_error(cudaHostAlloc((void**)&d.fault, kSlots * sizeof(DeviceFault),
                                   cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
      if (!e) memset(d.fault, 0, kSlots * sizeof(DeviceFault));
      void* dev = nullptr;
      if (!e) e = cuda_error(cudaHostGetDevicePointer(&dev, d.fault, 0), "cudaHostGetDevicePointer");
      d.fault_dev = (DeviceFault*)dev;
      d.slots[0].used = true;
    }
    d.init_error = e;
  });
  if (d.init_error)
    return ud_kit_error(ud_kit_error_code(d.init_error), "%s", ud_kit_error_message(d.init_error));
  return cuda_error(cudaSetDevice(device), "cudaSetDevice");
}

/* ---- allocations: handles are device pointers; the table refuses foreign or freed ones ------ */

struct Alloc {
  uint64_t size;
  int32_t device;
  uint16_t tag;
};
std::mutex g_mu;
std::map<uint64_t, Alloc> g_allocs; /* by address */
uint64_t g_used[64];
uint16_t g_tag;

UD_Error* check_range(const char* what, uint64_t h, uint64_t size, int32_t device = -1) {
  const uint64_t a = h & kAddrMask;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_allocs.upper_bound(a);
  if (it != g_allocs.begin()) {
    --it;
    uint64_t off = a - it->first;
    if (off <= it->second.size && it->second.tag == h >> 48) {
      if (size > it->second.size - off)
        return ud_kit_error(UD_ERR_OUT_OF_BOUNDS, "%s: %llu bytes at offset %llu overrun the "
                            "%llu-byte allocation", what, (unsigned long long)size,
                            (unsigned long long)off, (unsigned long long)it->second.size);
      if (device >= 0 && it->second.device != device)
        return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: memory of device %d used on device %d",
                            what, it->second.device, device);
      return nullptr;
    }
  }
  return ud_kit_error(UD_ERR_UNKNOWN_HANDLE, "%s: handle 0x%llx is not inside a live allocation "
                      "(freed or never allocated)", what, (unsigned long long)h);
}

/* Which device allocated the live allocation holding `h` (1.1): the registry above, not
 * cudaPointerGetAttributes, which would accept a freed pointer the pool still holds. */
UD_Error* mem_device(UD_Handle h, int32_t* device) {
  if (!device) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "mem_device: device is NULL");
  const uint64_t a = h & kAddrMask;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_allocs.upper_bound(a);
  if (h && it != g_allocs.begin()) {
    --it;
    const uint64_t off = a - it->first;
    if (it->second.tag == h >> 48 && (off < it->second.size || off == 0)) {
      *device = it->second.device;
      return nullptr;
    }
  }
  return ud_kit_error(UD_ERR_UNKNOWN_HANDLE, "mem_device: handle 0x%llx is not inside a live "
                      "cuda allocation (freed or never allocated)", (unsigned long long)h);
}

cudaStream_t cs(UD_Stream s) { return s ? s->s : nullptr; }

/* ---- faults and poison (see the top of the file); everything here under g_mu ---------------- */

struct Poison {
  uint64_t lo, hi; /* device addresses */
  std::string message;
};
std::vector<Poison> g_poison;
std::atomic<int> g_watch{0}; /* poisoned ranges + pending launches: 0 lets calls skip all this */

std::string fault_text(const DeviceFault& f) {
  char m[256];
  snprintf(m, sizeof m, "%s: an index value %lld was outside [0, %lld) (found while running)",
           op_at(f.code - 1).name, (long long)f.value, (long long)f.limit);
  return m;
}

/* Removes [lo, hi) from the poisoned ranges. */
void lift(uint64_t lo, uint64_t hi) {
  if (g_poison.empty()) return;
  std::vector<Poison> kept;
  for (Poison& p : g_poison) {
    if (p.hi <= lo || p.lo >= hi) kept.push_back(p);
    else {
      if (p.lo < lo) kept.push_back({p.lo, lo, p.message});
      if (p.hi > hi) kept.push_back({hi, p.hi, p.message});
    }
  }
  g_watch += (int)kept.size() - (int)g_poison.size();
  g_poison.swap(kept);
}

/* A slot whose fault is set: poisons the outputs of its pending launches of the faulting op. */
void absorb(DeviceState& d, int i) {
  volatile DeviceFault* f = &d.fault[i];
  Slot& sl = d.slots[i];
  if (sl.pending.empty() || !f->code) return; /* host memory first: most slots have nothing */
  DeviceFault copy = {f->code, 0, f->value, f->limit};
  std::string text = fault_text(copy);
  for (const Written& w : sl.pending)
    if (w.op == copy.code - 1) {
      lift(w.lo, w.hi);
      g_poison.push_back({w.lo, w.hi, text});
      g_watch++;
    }
  g_watch -= (int)sl.pending.size();
  sl.pending.clear();
}

void absorb_all() {
  if (!g_watch.load()) return;
  for (int dev = 0; dev < g_count && dev < 64; dev++)
    if (g_dev[dev].fault)
      for (int i = 0; i < kSlots; i++) absorb(g_dev[dev], i);
}

/* The fault of slot `i` (generation `gen`) as an error, cleared. `finished`: the stream's work
 * has all run, so its pending launches without a fault are done with. */
UD_Error* take_fault(int32_t device, int i, uint32_t gen, bool finished, std::string* text = nullptr) {
  if (device < 0 || device >= 64 || !g_dev[device].fault || i < 0) return nullptr;
  DeviceState& d = g_dev[device];
  std::lock_guard<std::mutex> lock(g_mu);
  if (d.slots[i].gen != gen) return nullptr;  /* the stream is gone: its slot serves another */
  absorb(d, i);
  volatile DeviceFault* f = &d.fault[i];
  if (!f->code) {
    if (finished) {
      g_watch -= (int)d.slots[i].pending.size();
      d.slots[i].pending.clear();
    }
    return nullptr;
  }
  DeviceFault copy = {f->code, 0, f->value, f->limit};
  f->code = 0;
  std::string m = fault_text(copy) + "; reported at this synchronization";
  if (text) *text = m;
  return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s", m.c_str());
}

/* NULL, or the error for a read of poisoned bytes in [h, h + n). */
UD_Error* poisoned(const char* what, uint64_t h, uint64_t n) {
  if (!g_watch.load() || !n) return nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  absorb_all();
  const uint64_t lo = h & kAddrMask, hi = lo + n;
  for (const Poison& p : g_poison)
    if (p.lo < hi && lo < p.hi)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: the bytes read hold what failed work was "
                          "to write: %s", what, p.message.c_str());
  return nullptr;
}

/* A write of [h, h + n) without gaps, enqueued: the poison there goes. */
void written(uint64_t h, uint64_t n) {
  if (!g_watch.load() || !n) return;
  std::lock_guard<std::mutex> lock(g_mu);
  lift(h & kAddrMask, (h & kAddrMask) + n);
}

int slot_of(UD_Stream s) { return s ? s->slot : 0; }
uint32_t gen_of(int32_t device, UD_Stream s) {
  return s ? s->gen : g_dev[device].slots[0].gen;
}

thread_local int tl_slot = 0;           /* the slot of the launch run_kernel is making */
thread_local bool tl_fault_used = false; /* the launcher asked for it: the op may fault */

/* ---- the table's functions ------------------------------------------------------------------ */

UD_Error* device_count(int32_t* count, const char** reason) {
  std::call_once(g_probe_once, probe);
  *count = g_count;
  if (reason) *reason = g_count ? nullptr : g_reason;
  return nullptr;
}

UD_Error* device_properties(int32_t device, UD_DeviceProperties* p) {
  UD_KIT_TRY(device_ok(device));
  cudaDeviceProp prop;
  UD_KIT_TRY(cuda_error(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties"));
  snprintf(p->name, sizeof p->name, "%.48s (sm_%d%d)", prop.name, prop.major, prop.minor);
  p->total_memory = g_dev[device].total;
  p->compute_units = prop.multiProcessorCount;
  p->vector_width = 16; /* widest per-thread load (float4) */
  p->host_addressable = 0;
  p->capabilities = UD_CAP_STREAMS | UD_CAP_EVENT_TIMING;
  return nullptr;
}

UD_Error* device_memory_info(int32_t device, uint64_t* free_b, uint64_t* total) {
  UD_KIT_TRY(device_ok(device));
  size_t f = 0, t = 0;
  UD_KIT_TRY(cuda_error(cudaMemGetInfo(&f, &t), "cudaMemGetInfo"));
  (void)t; /* the same total as device_properties reports */
  *total = g_dev[device].total;
  *free_b = f < *total ? f : *total;
  return nullptr;
}

UD_Error* device_synchronize(int32_t device) {
  UD_KIT_TRY(device_ok(device));
  UD_KIT_TRY(cuda_error(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  std::string all; /* every stream's fault, in one error */
  for (int i = 0; i < kSlots; i++) {
    uint32_t gen;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      if (!g_dev[device].slots[i].used) continue;
      gen = g_dev[device].slots[i].gen;
    }
    std::string text;
    if (UD_Error* e = take_fault(device, i, gen, true, &text)) {
      ud_kit_error_destroy(e);
      all += (all.empty() ? "" : "; and on another stream: ") + text;
    }
  }
  if (all.empty()) return nullptr;
  return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s", all.c_str());
}

UD_Error* mem_alloc(int32_t device, UD_Stream s, uint64_t size, UD_Handle* out) {
  UD_KIT_TRY(device_ok(device));
  if (size > g_dev[device].total)
    return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "mem_alloc: %llu bytes exceed device %d's %llu",
                        (unsigned long long)size, device, (unsigned long long)g_dev[device].total);
  void* p = nullptr;
  /* size 0 still gets a unique handle */
  cudaError_t e = cudaMallocFromPoolAsync(&p, size ? size : 1, g_dev[device].pool, cs(s));
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "mem_alloc: %llu bytes on device %d: %s",
                        (unsigned long long)size, device, cudaGetErrorString(e));
  }
  UD_KIT_TRY(cuda_error(e, "mem_alloc: cudaMallocFromPoolAsync"));
  uint64_t a = (uint64_t)(uintptr_t)p;
  if (a > kAddrMask) {
    cudaFreeAsync(p, cs(s));
    return ud_kit_error(UD_ERR_INTERNAL, "mem_alloc: device pointer 0x%llx does not fit 48 bits",
                        (unsigned long long)a);
  }
  std::lock_guard<std::mutex> lock(g_mu);
  uint16_t tag = ++g_tag ? g_tag : ++g_tag; /* never 0, so no handle equals its raw address */
  g_allocs[a] = {size, device, tag};
  lift(a, a + (size ? size : 1)); /* the pool reuses addresses: a new allocation is clean */
  g_used[device] += size;
  *out = a | (uint64_t)tag << 48;
  return nullptr;
}

UD_Error* mem_free(int32_t device, UD_Stream s, UD_Handle h) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_allocs.find(h & kAddrMask);
    if (it == g_allocs.end() || it->second.device != device || it->second.tag != h >> 48)
      return ud_kit_error(UD_ERR_UNKNOWN_HANDLE, "mem_free: 0x%llx is not a live allocation of "
                          "device %d", (unsigned long long)h, device);
    g_used[device] -= it->second.size;
    g_allocs.erase(it);
  }
  UD_KIT_TRY(device_ok(device));
  return cuda_error(cudaFreeAsync(address(h), cs(s)), "mem_free: cudaFreeAsync");
}

UD_Error* memcpy_h2d(UD_Stream s, UD_Handle dst, const void* src, uint64_t n) {
  if (!n) return nullptr;
  UD_KIT_TRY(check_range("memcpy_h2d", dst, n));
  written(dst, n);
  return cuda_error(cudaMemcpyAsync(address(dst), src, n, cudaMemcpyHostToDevice, cs(s)),
                    "memcpy_h2d: cudaMemcpyAsync");
}

UD_Error* memcpy_d2h(UD_Stream s, void* dst, UD_Handle src, uint64_t n) {
  if (!n) return nullptr;
  UD_KIT_TRY(check_range("memcpy_d2h", src, n));
  UD_KIT_TRY(poisoned("memcpy_d2h", src, n));
  return cuda_error(cudaMemcpyAsync(dst, address(src), n, cudaMemcpyDeviceToHost,
                                    cs(s)), "memcpy_d2h: cudaMemcpyAsync");
}

UD_Error* memcpy_d2d(UD_Stream s, UD_Handle dst, UD_Handle src, uint64_t n) {
  if (!n) return nullptr;
  UD_KIT_TRY(check_range("memcpy_d2d (dst)", dst, n));
  UD_KIT_TRY(check_range("memcpy_d2d (src)", src, n));
  UD_KIT_TRY(poisoned("memcpy_d2d (src)", src, n));
  written(dst, n);
  return cuda_error(cudaMemcpyAsync(address(dst), address(src), n,
                                    cudaMemcpyDeviceToDevice, cs(s)), "memcpy_d2d: cudaMemcpyAsync");
}

UD_Error* memset_(UD_Stream s, UD_Handle dst, uint64_t pattern, uint32_t size, uint64_t count) {
  if (size != 1 && size != 2 && size != 4 && size != 8)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "memset: elem_size %u, expected 1, 2, 4 or 8",
                        size);
  if (!count) return nullptr;
  if (count > UINT64_MAX / size)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "memset: count %llu overflows",
                        (unsigned long long)count);
  UD_KIT_TRY(check_range("memset", dst, count * size));
  written(dst, count * size);
  return launch_memset(address(dst), pattern, size, count, cs(s));
}

UD_Error* stream_create(int32_t device, UD_Stream* out) {
  UD_KIT_TRY(device_ok(device));
  cudaStream_t st;
  UD_KIT_TRY(cuda_error(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate"));
  std::lock_guard<std::mutex> lock(g_mu);
  int slot = 0; /* all taken: share the default stream's */
  for (int i = 1; i < kSlots && !slot; i++)
    if (!g_dev[device].slots[i].used) slot = i;
  Slot& sl = g_dev[device].slots[slot];
  if (slot) {
    sl.used = true;
    sl.gen++;
    g_dev[device].fault[slot].code = 0;
  }
  *out = new UD_StreamImpl{device, st, slot, sl.gen};
  return nullptr;
}

UD_Error* stream_destroy(UD_Stream s) {
  if (!s) return nullptr;
  UD_Error* e = cuda_error(cudaStreamSynchronize(s->s), "stream_destroy: cudaStreamSynchronize");
  cudaStreamDestroy(s->s);
  UD_Error* fault = take_fault(s->device, s->slot, s->gen, true);
  if (s->slot) {
    std::lock_guard<std::mutex> lock(g_mu);
    Slot& sl = g_dev[s->device].slots[s->slot];
    sl.used = false;
    sl.gen++; /* events recorded on it no longer reach it */
    g_watch -= (int)sl.pending.size();
    sl.pending.clear();
  }
  delete s;
  if (e) ud_kit_error_destroy(fault);
  return e ? e : fault;
}

UD_Error* stream_synchronize(UD_Stream s) {
  UD_KIT_TRY(cuda_error(cudaStreamSynchronize(cs(s)), "cudaStreamSynchronize"));
  int dev = s ? s->device : 0;
  if (!s) cudaGetDevice(&dev);
  return take_fault(dev, slot_of(s), gen_of(dev, s), true);
}

UD_Error* stream_query(UD_Stream s, int32_t* done) {
  cudaError_t e = cudaStreamQuery(cs(s));
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    *done = 0;
    return nullptr;
  }
  *done = 1;
  return cuda_error(e, "cudaStreamQuery");
}

UD_Error* stream_wait_event(UD_Stream s, UD_Event ev) {
  return cuda_error(cudaStreamWaitEvent(cs(s), ev->e, 0), "cudaStreamWaitEvent");
}

UD_Error* event_create(int32_t device, UD_Event* out) {
  UD_KIT_TRY(device_ok(device));
  cudaEvent_t e;
  UD_KIT_TRY(cuda_error(cudaEventCreate(&e), "cudaEventCreate"));
  *out = new UD_EventImpl();
  (*out)->device = device;
  (*out)->e = e;
  return nullptr;
}

UD_Error* event_destroy(UD_Event e) {
  if (!e) return nullptr;
  UD_Error* err = cuda_error(cudaEventDestroy(e->e), "cudaEventDestroy");
  delete e;
  return err;
}

UD_Error* event_record(UD_Event e, UD_Stream s) {
  UD_KIT_TRY(cuda_error(cudaEventRecord(e->e, cs(s)), "cudaEventRecord"));
  int dev = s ? s->device : e->device;
  e->slot = slot_of(s);
  e->gen = gen_of(dev, s);
  e->failure.clear();
  return nullptr;
}

UD_Error* event_query(UD_Event e, int32_t* done) {
  cudaError_t r = cudaEventQuery(e->e);
  if (r == cudaErrorNotReady) {
    cudaGetLastError();
    *done = 0;
    return nullptr;
  }
  *done = 1;
  return cuda_error(r, "cudaEventQuery");
}

UD_Error* event_synchronize(UD_Event e) {
  UD_KIT_TRY(cuda_error(cudaEventSynchronize(e->e), "cudaEventSynchronize"));
  if (e->failure.empty()) {
    if (UD_Error* err = take_fault(e->device, e->slot, e->gen, false, &e->failure))
      ud_kit_error_destroy(err);
  }
  if (e->failure.empty()) return nullptr;
  return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "event_synchronize: work before the event failed: "
                      "%s", e->failure.c_str());
}

UD_Error* event_elapsed(UD_Event a, UD_Event b, double* ms) {
  float f = 0;
  UD_KIT_TRY(cuda_error(cudaEventElapsedTime(&f, a->e, b->e), "cudaEventElapsedTime"));
  *ms = f;
  return nullptr;
}

/* ---- kernels: one entry per op (the contract's UD_KernelFn carries no op identity) --------- */

LaunchFn launcher_for(Family f) {
  switch (f) {
    case F_COPY: case F_CAST: return launch_copy;
    case F_FILL: case F_ARANGE: return launch_fill;
    case F_EW: return launch_ew;
    case F_REDUCE: case F_ARG: return launch_reduce;
    case F_MATMUL: case F_GEMM: return launch_matmul;
    case F_CONV: case F_CONV_BI: case F_CONV_BW: return launch_conv;
    case F_MAXPOOL: case F_MAXPOOL_B: case F_AVGPOOL: case F_AVGPOOL_B: case F_ADAPT:
    case F_ADAPT_B: return launch_pool;
    case F_BN: case F_BN_B: return launch_bn;
    case F_SOFTMAX: case F_SOFTMAX_B: return launch_softmax;
    case F_NLL: case F_NLL_B: case F_MSE: case F_MSE_B: return launch_loss;
    case F_CONCAT: return launch_concat;
    case F_PAD: return launch_pad;
    case F_OPTIM: return launch_optim;
    case F_PROGRAM: return launch_program;
    case F_CONV_ACT: return launch_conv;
    case F_GEMM_ACT: return launch_matmul;
    default: return nullptr;
  }
}

UD_Error* check_memory(const OpInfo& op, const UD_KernelArgs* a) {
  for (int k = 0; k < a->num_inputs + a->num_outputs; k++) {
    bool in = k < a->num_inputs;
    const UD_Tensor& t = in ? a->inputs[k] : a->outputs[k - a->num_inputs];
    if (!ud_kit_present(&t)) continue;
    uint64_t extent = ud_kit_extent(&t);
    if (!extent) continue;
    if (UD_Error* e = check_range(op.name, t.handle, extent, a->device)) {
      UD_Error* r = ud_kit_error(ud_kit_error_code(e), "%s: %s %d reaches %llu bytes past its "
                                 "handle: %s", op.name, in ? "input" : "output",
                                 in ? k : k - a->num_inputs, (unsigned long long)extent,
                                 ud_kit_error_message(e));
      ud_kit_error_destroy(e);
      return r;
    }
  }
  return nullptr;
}

UD_Error* run_kernel(int id, const UD_KernelArgs* a) {
  const OpInfo& op = op_at(id);
  UD_KIT_TRY(check_args(op, a));
  UD_KIT_TRY(device_ok(a->device));
  if (a->stream && a->stream->device != a->device)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: stream of device %d used on device %d",
                        op.name, a->stream->device, a->device);
  UD_KIT_TRY(check_memory(op, a));
  for (int k = 0; k < a->num_inputs; k++)
    if (ud_kit_present(&a->inputs[k]))
      if (UD_Error* e = poisoned(op.name, a->inputs[k].handle, ud_kit_extent(&a->inputs[k])))
        return e;
  for (int k = 0; k < a->num_outputs; k++)
    if (ud_kit_is_contiguous(&a->outputs[k]))
      written(a->outputs[k].handle + a->outputs[k].byte_offset,
              ud_kit_extent(&a->outputs[k]) - a->outputs[k].byte_offset);
  tl_slot = slot_of(a->stream);
  tl_fault_used = false;
  UD_Error* err = launcher_for(op.family)(op, a, cs(a->stream));
  tl_slot = 0;
  if (err || !tl_fault_used) return err;
  /* an op that may fault: its outputs are poisoned if the stream's slot reports it */
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<Written>& pending = g_dev[a->device].slots[slot_of(a->stream)].pending;
  if (pending.size() >= 1024) { /* never synchronized: forget the oldest */
    pending.erase(pending.begin(), pending.begin() + 512);
    g_watch -= 512;
  }
  for (int k = 0; k < a->num_outputs; k++) {
    const UD_Tensor& t = a->outputs[k];
    uint64_t extent = ud_kit_present(&t) ? ud_kit_extent(&t) : 0;
    if (extent <= t.byte_offset) continue;
    uint64_t lo = (t.handle & kAddrMask) + t.byte_offset;
    pending.push_back({id, lo, lo + extent - t.byte_offset});
    g_watch++;
  }
  return nullptr;
}

template <int I>
UD_Error* entry(const UD_KernelArgs* a) { return run_kernel(I, a); }
template <int... I>
constexpr std::array<UD_KernelFn, sizeof...(I)> make_entries(std::integer_sequence<int, I...>) {
  return {{&entry<I>...}};
}
const auto kEntries = make_entries(std::make_integer_sequence<int, UD_OP_COUNT>{});  /* by UD_OpId */

UD_Error* kernel_lookup(const char* name, UD_DType dtype, UD_KernelFn* kernel) {
  *kernel = nullptr;
  if (!name) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "kernel_lookup: op name is NULL");
  const OpInfo* op = op_find(name);
  if (op && dtype_bit(dtype) & op->dtypes) *kernel = kEntries[op->id];
  return nullptr;
}

const UD_Api kApi = {
    sizeof(UD_Api), UD_ABI_MAJOR, UD_ABI_MINOR, "cuda", UD_CUDA_VERSION,
    ud_kit_error_code, ud_kit_error_message, ud_kit_error_destroy,
    device_count, device_properties, device_memory_info, device_synchronize,
    mem_alloc, mem_free, memcpy_h2d, memcpy_d2h, memcpy_d2d, memset_,
    stream_create, stream_destroy, stream_synchronize, stream_query, stream_wait_event,
    event_create, event_destroy, event_record, event_query, event_synchronize, event_elapsed,
    kernel_lookup, mem_device, kernel_compile,
};

}  // namespace

DeviceFault* device_fault_slot(int device) {
  tl_fault_used = true;
  DeviceFault* dev = g_dev[device].fault_dev;
  return dev ? dev + tl_slot : nullptr;
}

UD_Error* cuda_error(int status, const char* what) {
  cudaError_t e = (cudaError_t)status;
  if (e == cudaSuccess) return nullptr;
  cudaGetLastError(); /* clear non-sticky errors so the next call starts clean */
  UD_ErrorCode code = UD_ERR_DEVICE;
  if (e == cudaErrorMemoryAllocation) code = UD_ERR_OUT_OF_MEMORY;
  else if (e == cudaErrorInvalidValue || e == cudaErrorInvalidDevice ||
           e == cudaErrorInvalidResourceHandle || e == cudaErrorInvalidConfiguration)
    code = UD_ERR_INVALID_ARGUMENT;
  else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) code = UD_ERR_UNSUPPORTED;
  return ud_kit_error(code, "%s: %s: %s", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

}  // namespace udc

extern "C" UD_EXPORT const UD_Api* unidev_get_api(void) { return &udc::kApi; }

/* For tests and tools: the host-side checks alone (no device needed). */
extern "C" UD_EXPORT UD_Error* unidev_cuda_check_args(const char* op, const UD_KernelArgs* a) {
  const udc::OpInfo* info = op ? udc::op_find(op) : nullptr;
  if (!info) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "unknown op '%s'", op ? op : "(null)");
  return udc::check_args(*info, a);
}

/* For `unidev info` and gpu-check: one line per runtime library and what was found. */
extern "C" UD_EXPORT const char* unidev_cuda_status(void) {
  static char buf[2048];
  static std::once_flag once;
  std::call_once(once, [] {
    int32_t n = 0;
    const char* reason = nullptr;
    udc::device_count(&n, &reason);
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    snprintf(buf, sizeof buf, "devices: %d%s%s\ndriver CUDA: %d\nruntime CUDA: %d (static)\n%s", n,
             reason ? " — " : "", reason ? reason : "", driver, runtime, udc::libs_status());
  });
  return buf;
}
