/* testplugin.c — the smallest real unidev plugin: host memory, tier 0 + add, mul, matmul.
 *
 * Used by the core tests to prove discovery → ABI check → memory → kernel → DLPack. Streams run
 * work synchronously at enqueue, which the contract allows. It keeps a table of live allocations
 * so that freed or foreign handles are refused (UD_ERR_UNKNOWN_HANDLE) rather than dereferenced.
 * Build: cc -std=c17 -O2 -shared -fPIC -I<unidev/contract/include> testplugin.c -o libtestplugin.so
 * -DTESTPLUGIN_ABI_MAJOR=N / -DTESTPLUGIN_ABI_MINOR=N build a plugin that claims another ABI
 * version; -DTESTPLUGIN_DEVICES=0 one without devices (all for the loader tests).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unidev/plugin_kit.h>
#include <unidev/unidev.h>

#ifndef TESTPLUGIN_ABI_MAJOR
#define TESTPLUGIN_ABI_MAJOR UD_ABI_MAJOR
#endif
#ifndef TESTPLUGIN_ABI_MINOR
#define TESTPLUGIN_ABI_MINOR UD_ABI_MINOR
#endif
#ifndef TESTPLUGIN_DEVICES
#define TESTPLUGIN_DEVICES 2
#endif

/* ---- allocations ---------------------------------------------------------------------------- */

typedef struct {
  uint64_t base, size;
  int32_t device;
} Alloc;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static Alloc* g_allocs;
static size_t g_count, g_cap;
static uint64_t g_used[TESTPLUGIN_DEVICES + 1];

/* Finds the allocation holding [h, h + size); -1 if none. Caller holds g_mu. */
static long find_alloc(uint64_t h, uint64_t size) {
  for (size_t i = 0; i < g_count; i++) {
    const Alloc* a = &g_allocs[i];
    if (h >= a->base && h - a->base <= a->size && size <= a->size - (h - a->base)) return (long)i;
  }
  return -1;
}

static UD_Error* check_range(const char* what, uint64_t h, uint64_t size) {
  pthread_mutex_lock(&g_mu);
  long i = find_alloc(h, size);
  pthread_mutex_unlock(&g_mu);
  if (i < 0)
    return ud_kit_error(UD_ERR_OUT_OF_BOUNDS, "%s: %llu bytes at 0x%llx are not inside a live "
                        "allocation", what, (unsigned long long)size, (unsigned long long)h);
  return NULL;
}

static UD_Error* device_ok(int32_t device) {
  if (device < 0 || device >= TESTPLUGIN_DEVICES)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "device %d out of range [0, %d)", device,
                        TESTPLUGIN_DEVICES);
  return NULL;
}

/* ---- devices, memory, streams ------------------------------------------------------------- */

struct UD_StreamImpl { int32_t device; };
struct UD_EventImpl { int32_t device; };

static UD_Error* device_count(int32_t* count, const char** reason) {
  *count = TESTPLUGIN_DEVICES;
  if (reason) *reason = TESTPLUGIN_DEVICES ? NULL : "built with TESTPLUGIN_DEVICES=0";
  return NULL;
}

static UD_Error* device_properties(int32_t device, UD_DeviceProperties* p) {
  UD_Error* e = device_ok(device);
  if (e) return e;
  strncpy(p->name, "unidev test plugin (host memory)", sizeof p->name - 1);
  p->total_memory = 1ull << 32;
  p->compute_units = 1;
  p->vector_width = 8;
  p->host_addressable = 1;
  p->capabilities = 0;
  return NULL;
}

static UD_Error* device_memory_info(int32_t device, uint64_t* free_b, uint64_t* total) {
  UD_Error* e = device_ok(device);
  if (e) return e;
  *total = 1ull << 32;
  *free_b = *total - g_used[device];
  return NULL;
}

static UD_Error* device_synchronize(int32_t device) { return device_ok(device); }

static UD_Error* mem_alloc(int32_t device, UD_Stream s, uint64_t size, UD_Handle* out) {
  (void)s;
  UD_Error* e = device_ok(device);
  if (e) return e;
  if (size > (1ull << 32) - g_used[device])
    return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "malloc: %llu bytes exceed the 4 GiB device",
                        (unsigned long long)size);
  void* p = aligned_alloc(64, ((size + 63) / 64) * 64 + 64);
  if (!p) return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "malloc: host allocation failed");
  pthread_mutex_lock(&g_mu);
  if (g_count == g_cap) {
    size_t cap = g_cap ? g_cap * 2 : 64;
    Alloc* n = realloc(g_allocs, cap * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&g_mu);
      free(p);
      return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "malloc: allocation table full");
    }
    g_allocs = n;
    g_cap = cap;
  }
  g_allocs[g_count++] = (Alloc){(uint64_t)(uintptr_t)p, size, device};
  g_used[device] += size;
  pthread_mutex_unlock(&g_mu);
  *out = (uint64_t)(uintptr_t)p;
  return NULL;
}

static UD_Error* mem_free(int32_t device, UD_Stream s, UD_Handle h) {
  (void)s;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_count; i++) {
    if (g_allocs[i].base == h && g_allocs[i].device == device) {
      g_used[device] -= g_allocs[i].size;
      g_allocs[i] = g_allocs[--g_count];
      pthread_mutex_unlock(&g_mu);
      free((void*)(uintptr_t)h);
      return NULL;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return ud_kit_error(UD_ERR_UNKNOWN_HANDLE, "free: 0x%llx is not a live allocation of device %d",
                      (unsigned long long)h, device);
}

static UD_Error* memcpy_h2d(UD_Stream s, UD_Handle dst, const void* src, uint64_t n) {
  (void)s;
  UD_Error* e = check_range("memcpy_h2d", dst, n);
  if (!e && n) memcpy((void*)(uintptr_t)dst, src, n);
  return e;
}

static UD_Error* memcpy_d2h(UD_Stream s, void* dst, UD_Handle src, uint64_t n) {
  (void)s;
  UD_Error* e = check_range("memcpy_d2h", src, n);
  if (!e && n) memcpy(dst, (const void*)(uintptr_t)src, n);
  return e;
}

static UD_Error* memcpy_d2d(UD_Stream s, UD_Handle dst, UD_Handle src, uint64_t n) {
  (void)s;
  UD_Error* e = check_range("memcpy_d2d(dst)", dst, n);
  if (!e) e = check_range("memcpy_d2d(src)", src, n);
  if (!e && n) memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, n);
  return e;
}

static UD_Error* memset_(UD_Stream s, UD_Handle dst, uint64_t pattern, uint32_t size, uint64_t n) {
  (void)s;
  if (size != 1 && size != 2 && size != 4 && size != 8)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "memset: elem_size %u, expected 1, 2, 4 or 8",
                        size);
  UD_Error* e = check_range("memset", dst, size * n);
  if (e) return e;
  unsigned char* p = (unsigned char*)(uintptr_t)dst;
  for (uint64_t i = 0; i < n; i++) memcpy(p + i * size, &pattern, size); /* little endian */
  return NULL;
}

static UD_Error* stream_create(int32_t device, UD_Stream* out) {
  UD_Error* e = device_ok(device);
  if (e) return e;
  *out = malloc(sizeof **out);
  if (!*out) return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "stream_create: out of host memory");
  (*out)->device = device;
  return NULL;
}
static UD_Error* stream_destroy(UD_Stream s) { free(s); return NULL; }
static UD_Error* stream_synchronize(UD_Stream s) { (void)s; return NULL; }
static UD_Error* stream_query(UD_Stream s, int32_t* done) { (void)s; *done = 1; return NULL; }
static UD_Error* stream_wait_event(UD_Stream s, UD_Event e) { (void)s; (void)e; return NULL; }
static UD_Error* event_create(int32_t device, UD_Event* out) {
  UD_Error* e = device_ok(device);
  if (e) return e;
  *out = malloc(sizeof **out);
  if (!*out) return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "event_create: out of host memory");
  (*out)->device = device;
  return NULL;
}
static UD_Error* event_destroy(UD_Event e) { free(e); return NULL; }
static UD_Error* event_record(UD_Event e, UD_Stream s) { (void)e; (void)s; return NULL; }
static UD_Error* event_query(UD_Event e, int32_t* done) { (void)e; *done = 1; return NULL; }
static UD_Error* event_synchronize(UD_Event e) { (void)e; return NULL; }
static UD_Error* event_elapsed(UD_Event a, UD_Event b, double* ms) {
  (void)a; (void)b; *ms = 0.0;
  return ud_kit_error(UD_ERR_UNSUPPORTED, "event_elapsed: the test plugin keeps no timing");
}

/* ---- kernels ---------------------------------------------------------------------------------
 * Every tensor is checked structurally and against its allocation before any access. */

static UD_Error* check_view(const char* op, const char* arg, const UD_Tensor* t) {
  UD_Error* e = ud_kit_check_tensor(op, arg, t);
  if (e) return e;
  uint64_t extent = ud_kit_extent(t);
  if (extent == 0) return NULL;
  e = check_range(op, t->handle, extent);
  if (e) {
    ud_kit_error_destroy(e);
    return ud_kit_error(UD_ERR_OUT_OF_BOUNDS, "%s: '%s' reaches %llu bytes past its handle, "
                        "beyond its allocation", op, arg, (unsigned long long)extent);
  }
  return NULL;
}

static UD_Error* check_args(const char* op, const UD_KernelArgs* a, int nin, int nout) {
  UD_Error* bad = device_ok(a->device);
  if (bad) return bad;
  if (a->num_inputs != nin || a->num_outputs != nout)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: got %d inputs and %d outputs, expected %d "
                        "and %d", op, a->num_inputs, a->num_outputs, nin, nout);
  for (int i = 0; i < nin; i++) {
    UD_Error* e = check_view(op, "input", &a->inputs[i]);
    if (e) return e;
  }
  for (int i = 0; i < nout; i++) {
    UD_Error* e = check_view(op, "output", &a->outputs[i]);
    if (e) return e;
  }
  return NULL;
}

static char* elem(const UD_Tensor* t, const int64_t* idx) {
  int64_t off = 0;
  for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
  return (char*)(uintptr_t)t->handle + t->byte_offset + off * ud_kit_itemsize(t->dtype);
}

/* Odometer over `shape`; returns 0 when every index has been visited. */
static int next_index(int ndim, const int64_t* shape, int64_t* idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    if (++idx[d] < shape[d]) return 1;
    idx[d] = 0;
  }
  return 0;
}

typedef union {
  double f;
  int64_t i;
} Scalar;

static int is_float(UD_DType d) { return d.code == UD_DTYPE_FLOAT; }

static Scalar load(const UD_Tensor* t, const char* p) {
  Scalar s;
  switch (t->dtype.code * 100 + t->dtype.bits) {
    case UD_DTYPE_FLOAT * 100 + 32: s.f = *(const float*)p; break;
    case UD_DTYPE_FLOAT * 100 + 64: s.f = *(const double*)p; break;
    case UD_DTYPE_INT * 100 + 32: s.i = *(const int32_t*)p; break;
    case UD_DTYPE_INT * 100 + 64: s.i = *(const int64_t*)p; break;
    default: s.i = *(const uint8_t*)p != 0; break; /* bool */
  }
  return s;
}

static void store(const UD_Tensor* t, char* p, Scalar s) {
  switch (t->dtype.code * 100 + t->dtype.bits) {
    case UD_DTYPE_FLOAT * 100 + 32: *(float*)p = (float)s.f; break;
    case UD_DTYPE_FLOAT * 100 + 64: *(double*)p = s.f; break;
    case UD_DTYPE_INT * 100 + 32: *(int32_t*)p = (int32_t)s.i; break;
    case UD_DTYPE_INT * 100 + 64: *(int64_t*)p = s.i; break;
    default: *(uint8_t*)p = s.i != 0; break;
  }
}

static Scalar convert(Scalar s, UD_DType from, UD_DType to) {
  Scalar r;
  if (to.code == UD_DTYPE_BOOL) r.i = is_float(from) ? s.f != 0.0 : s.i != 0;
  else if (is_float(to)) r.f = is_float(from) ? s.f : (double)s.i;
  else r.i = is_float(from) ? (int64_t)s.f : s.i;
  return r;
}

static int known_dtype(UD_DType d) {
  return (d.code == UD_DTYPE_FLOAT && (d.bits == 32 || d.bits == 64)) ||
         (d.code == UD_DTYPE_INT && (d.bits == 32 || d.bits == 64)) ||
         (d.code == UD_DTYPE_BOOL && d.bits == 8);
}

static UD_Error* k_copy_or_cast(const char* op, const UD_KernelArgs* a) {
  UD_Error* e = check_args(op, a, 1, 1);
  if (e) return e;
  const UD_Tensor *x = &a->inputs[0], *y = &a->outputs[0];
  if (!ud_kit_same_shape(x, y))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: 'x' and 'y' shapes differ", op);
  if (!known_dtype(y->dtype) || (!strcmp(op, "copy") && !ud_kit_dtype_eq(x->dtype, y->dtype)))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: output dtype %s, expected %s", op,
                        ud_kit_dtype_name(y->dtype), ud_kit_dtype_name(x->dtype));
  if (!strcmp(op, "cast")) {
    if (a->num_attrs != 1 || a->attrs[0].type != UD_ATTR_STRING || !a->attrs[0].value.s)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "cast: expected one string attribute 'dtype'");
    if (strcmp(a->attrs[0].value.s, ud_kit_dtype_name(y->dtype)) != 0)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "cast: attribute dtype '%s' but output 'y' "
                          "has dtype %s", a->attrs[0].value.s, ud_kit_dtype_name(y->dtype));
  }
  if (ud_kit_numel(y) == 0) return NULL;
  int64_t idx[UD_KIT_MAX_DIMS] = {0};
  do {
    store(y, elem(y, idx), convert(load(x, elem(x, idx)), x->dtype, y->dtype));
  } while (next_index(y->ndim, y->shape, idx));
  return NULL;
}
static UD_Error* k_copy(const UD_KernelArgs* a) { return k_copy_or_cast("copy", a); }
static UD_Error* k_cast(const UD_KernelArgs* a) { return k_copy_or_cast("cast", a); }

static UD_Error* fill_with(const char* op, const UD_KernelArgs* a, double v) {
  UD_Error* e = check_args(op, a, 0, 1);
  if (e) return e;
  const UD_Tensor* y = &a->outputs[0];
  if ((e = ud_kit_check_scalar(op, "value", v, y->dtype, 0))) return e;
  if (ud_kit_numel(y) == 0) return NULL;
  Scalar s = {.f = v};
  s = convert(s, ud_kit_dtype(UD_DTYPE_FLOAT, 64), y->dtype);
  int64_t idx[UD_KIT_MAX_DIMS] = {0};
  do {
    store(y, elem(y, idx), s);
  } while (next_index(y->ndim, y->shape, idx));
  return NULL;
}
static UD_Error* k_fill(const UD_KernelArgs* a) { return fill_with("fill", a, a->attrs[0].value.f); }
static UD_Error* k_zero(const UD_KernelArgs* a) { return fill_with("zero", a, 0.0); }

static UD_Error* k_arange(const UD_KernelArgs* a) {
  UD_Error* e = check_args("arange", a, 0, 1);
  if (e) return e;
  const UD_Tensor* y = &a->outputs[0];
  if (y->ndim != 1)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "arange: output has ndim %d, expected 1", y->ndim);
  double start = a->attrs[0].value.f, step = a->attrs[2].value.f;
  e = ud_kit_check_arange("arange", start, a->attrs[1].value.f, step, y->shape[0], y->dtype);
  if (e) return e;
  for (int64_t i = 0; i < y->shape[0]; i++) {
    Scalar s = {.f = start + (double)i * step};
    store(y, elem(y, &i), convert(s, ud_kit_dtype(UD_DTYPE_FLOAT, 64), y->dtype));
  }
  return NULL;
}

static UD_Error* binary(const char* op, const UD_KernelArgs* a, int is_mul) {
  UD_Error* e = check_args(op, a, 2, 1);
  if (e) return e;
  const UD_Tensor *x = &a->inputs[0], *y = &a->inputs[1], *out = &a->outputs[0];
  if ((e = ud_kit_check_same_shape(op, "x", x, out)) || (e = ud_kit_check_same_shape(op, "y", y, out)))
    return e;
  if ((e = ud_kit_check_dtype(op, "y", y, x->dtype)) || (e = ud_kit_check_dtype(op, "out", out, x->dtype)))
    return e;
  double alpha = is_mul ? 1.0 : a->attrs[0].value.f;
  if ((e = ud_kit_check_scalar(op, "alpha", alpha, x->dtype, 1))) return e;
  if (ud_kit_numel(out) == 0) return NULL;
  int fl = is_float(x->dtype);
  int64_t idx[UD_KIT_MAX_DIMS] = {0};
  do {
    Scalar u = load(x, elem(x, idx)), v = load(y, elem(y, idx)), r;
    if (fl) r.f = is_mul ? u.f * v.f : u.f + alpha * v.f;
    else if (is_mul) r.i = (int64_t)((uint64_t)u.i * (uint64_t)v.i);
    else r.i = (int64_t)((uint64_t)u.i + (uint64_t)((int64_t)alpha * v.i));
    store(out, elem(out, idx), r);
  } while (next_index(out->ndim, out->shape, idx));
  return NULL;
}
static UD_Error* k_add(const UD_KernelArgs* a) { return binary("add", a, 0); }
static UD_Error* k_mul(const UD_KernelArgs* a) { return binary("mul", a, 1); }

static UD_Error* k_matmul(const UD_KernelArgs* a) {
  UD_Error* e = check_args("matmul", a, 2, 1);
  if (e) return e;
  const UD_Tensor *x = &a->inputs[0], *w = &a->inputs[1], *out = &a->outputs[0];
  int n = out->ndim;
  if (n < 2 || x->ndim != n || w->ndim != n)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "matmul: a, b, out need one ndim >= 2");
  int64_t M = out->shape[n - 2], N = out->shape[n - 1], K = x->shape[n - 1];
  if (x->shape[n - 2] != M || w->shape[n - 2] != K || w->shape[n - 1] != N)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "matmul: shapes do not agree (a [..,%lld,%lld], "
                        "b [..,%lld,%lld], out [..,%lld,%lld])", (long long)x->shape[n - 2],
                        (long long)K, (long long)w->shape[n - 2], (long long)w->shape[n - 1],
                        (long long)M, (long long)N);
  for (int d = 0; d < n - 2; d++)
    if (x->shape[d] != out->shape[d] || w->shape[d] != out->shape[d])
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "matmul: batch dim %d differs", d);
  if ((e = ud_kit_check_dtype("matmul", "b", w, x->dtype)) ||
      (e = ud_kit_check_dtype("matmul", "out", out, x->dtype)))
    return e;
  if (ud_kit_numel(out) == 0) return NULL;
  int64_t idx[UD_KIT_MAX_DIMS] = {0};
  do { /* idx runs over out; the k loop walks a's row and b's column */
    int64_t ai[UD_KIT_MAX_DIMS], bi[UD_KIT_MAX_DIMS];
    memcpy(ai, idx, sizeof ai);
    memcpy(bi, idx, sizeof bi);
    double acc = 0.0;
    for (int64_t k = 0; k < K; k++) {
      ai[n - 1] = k;
      bi[n - 2] = k;
      acc += load(x, elem(x, ai)).f * load(w, elem(w, bi)).f;
    }
    Scalar r = {.f = acc};
    store(out, elem(out, idx), r);
  } while (next_index(n, out->shape, idx));
  return NULL;
}

typedef struct {
  const char* op;
  UD_KernelFn fn;
  int floats_only;
} KernelEntry;

static const KernelEntry kKernels[] = {
    {"copy", k_copy, 0},   {"cast", k_cast, 0}, {"fill", k_fill, 0}, {"zero", k_zero, 0},
    {"arange", k_arange, 0}, {"add", k_add, 0}, {"mul", k_mul, 0},  {"matmul", k_matmul, 2},
};

static UD_Error* kernel_lookup(const char* op, UD_DType dtype, UD_KernelFn* out) {
  *out = NULL;
  if (!op) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "kernel_lookup: op is NULL");
  if (!known_dtype(dtype)) return NULL;
  for (size_t i = 0; i < sizeof kKernels / sizeof kKernels[0]; i++) {
    if (strcmp(kKernels[i].op, op) != 0) continue;
    if (kKernels[i].floats_only == 2 && !(dtype.code == UD_DTYPE_FLOAT && dtype.bits == 32))
      return NULL;
    if (!strcmp(op, "arange") && dtype.code == UD_DTYPE_BOOL) return NULL;
    if ((!strcmp(op, "add")) && dtype.code == UD_DTYPE_BOOL) return NULL;
    *out = kKernels[i].fn;
    return NULL;
  }
  return NULL;
}

static const UD_Api kApi = {
    .struct_size = sizeof(UD_Api),
    .abi_major = TESTPLUGIN_ABI_MAJOR,
    .abi_minor = TESTPLUGIN_ABI_MINOR,
    .plugin_name = "testdev",
    .plugin_version = "0.1",
    .error_code = ud_kit_error_code,
    .error_message = ud_kit_error_message,
    .error_destroy = ud_kit_error_destroy,
    .device_count = device_count,
    .device_properties = device_properties,
    .device_memory_info = device_memory_info,
    .device_synchronize = device_synchronize,
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .memcpy_h2d = memcpy_h2d,
    .memcpy_d2h = memcpy_d2h,
    .memcpy_d2d = memcpy_d2d,
    .memset = memset_,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_synchronize = stream_synchronize,
    .stream_query = stream_query,
    .stream_wait_event = stream_wait_event,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .event_query = event_query,
    .event_synchronize = event_synchronize,
    .event_elapsed = event_elapsed,
    .kernel_lookup = kernel_lookup,
};

UD_EXPORT const UD_Api* unidev_get_api(void) { return &kApi; }
