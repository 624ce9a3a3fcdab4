/* ud_plan.c — the plan runtime (see ud_plan.h). Written in the common subset of C17 and C++17
 * (casts on malloc, no designated initializers) so unidev._C can compile it as C++. */
#include "ud_plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unidev/ops.h>

enum { KIND_INPUT = 0, KIND_OUTPUT = 1, KIND_CONST = 2, KIND_TEMP = 3 };

typedef struct PlanRef { /* a TensorRef as read from the file */
  uint32_t buffer;
  int32_t dtype; /* ud dtype id */
  int32_t ndim;
  int64_t* shape;
  int64_t* strides;
  int64_t offset;
} PlanRef;

typedef struct PlanBuffer {
  uint8_t kind;
  int64_t slot;
  uint64_t nbytes, offset;
} PlanBuffer;

typedef struct Patch { /* a step tensor whose handle comes from a bound input/output */
  UD_Tensor* tensor;
  int32_t kind, slot;
  int32_t writes; /* the step writes it (an output, or an input updated in place) */
  uint64_t byte_offset;
} Patch;

typedef struct PlanStep {
  char *op, *dtype, *node;
  UD_KernelFn fn;
  int32_t compiled;
  UD_Tensor* inputs;
  int32_t num_inputs;
  UD_Tensor* outputs;
  int32_t num_outputs;
  UD_Attr* attrs;
  int32_t num_attrs;
} PlanStep;

struct UD_Plan {
  const UD_Api* api;
  int32_t device, dl_type;
  char *key, *plugin;
  uint64_t arena_bytes, data_bytes;
  PlanBuffer* buffers;
  uint32_t num_buffers;
  PlanRef *inputs, *outputs;
  uint32_t num_inputs, num_outputs;
  UD_Tensor *in_desc, *out_desc; /* what a bound tensor must look like */
  uint8_t* in_written;           /* per input: some step writes it (state updated in place) */
  PlanStep* steps;
  uint32_t num_steps;
  Patch* patches;
  uint32_t num_patches;
  UD_Handle arena, consts;
  UD_Stream stream, last_stream;
  UD_Event done;     /* recorded after each run: the next run and destroy wait for it */
  int32_t ran;
  UD_Event* events;  /* num_steps + 1 while profiling */
  int32_t profiled;  /* a profiled run was enqueued */
  void** allocs;     /* every host block of the plan, freed by destroy */
  size_t num_allocs, cap_allocs;
};

/* ---- status and host memory ---------------------------------------------------------------- */

static int32_t fail(UD_PlanStatus* st, int32_t code, const char* fmt, ...) {
  if (st) {
    va_list ap;
    va_start(ap, fmt);
    st->code = code;
    vsnprintf(st->message, sizeof st->message, fmt, ap);
    va_end(ap);
  }
  return code;
}

static int32_t ok(UD_PlanStatus* st) {
  if (st) {
    st->code = UD_OK;
    st->message[0] = '\0';
  }
  return UD_OK;
}

/* Takes a plugin error: its code and "<prefix>: <message>", then destroys it. */
static int32_t plugin_fail(const UD_Plan* p, UD_PlanStatus* st, UD_Error* err, const char* prefix) {
  int32_t code = (int32_t)p->api->error_code(err);
  const char* msg = p->api->error_message(err);
  fail(st, code ? code : UD_ERR_INTERNAL, "%s: %s", prefix, msg ? msg : "(no message)");
  p->api->error_destroy(err);
  return code ? code : UD_ERR_INTERNAL;
}

static void* pa(UD_Plan* p, size_t n) {
  if (p->num_allocs == p->cap_allocs) {
    size_t cap = p->cap_allocs ? 2 * p->cap_allocs : 64;
    void** grown = (void**)realloc(p->allocs, cap * sizeof(void*));
    if (!grown) return NULL;
    p->allocs = grown;
    p->cap_allocs = cap;
  }
  void* block = calloc(1, n ? n : 1);
  if (block) p->allocs[p->num_allocs++] = block;
  return block;
}

/* ---- reading the file ---------------------------------------------------------------------- */

typedef struct Reader {
  const uint8_t* data;
  size_t size, pos;
  int bad;
  UD_Plan* plan;
} Reader;

static int take(Reader* r, void* out, size_t n) {
  if (r->bad || n > r->size - r->pos) {
    r->bad = 1;
    memset(out, 0, n);
    return 0;
  }
  memcpy(out, r->data + r->pos, n);
  r->pos += n;
  return 1;
}
static uint8_t rd_u8(Reader* r) { uint8_t v; take(r, &v, 1); return v; }
static uint32_t rd_u32(Reader* r) { uint32_t v; take(r, &v, 4); return v; }
static uint64_t rd_u64(Reader* r) { uint64_t v; take(r, &v, 8); return v; }
static int64_t rd_i64(Reader* r) { int64_t v; take(r, &v, 8); return v; }
static double rd_f64(Reader* r) { double v; take(r, &v, 8); return v; }

/* Well-formed UTF-8 without NUL: names end up in messages and Python strings. */
static int utf8_ok(const uint8_t* s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint8_t c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!c || !len || len > n - i || (len == 2 && c < 0xC2)) return 0;
    for (size_t k = 1; k < len; k++)
      if ((s[i + k] & 0xC0) != 0x80) return 0;
    i += len;
  }
  return 1;
}

/* A NUL-terminated copy owned by the plan. */
static char* rd_str(Reader* r) {
  uint32_t n = rd_u32(r);
  if (r->bad || n > r->size - r->pos || !utf8_ok(r->data + r->pos, n)) {
    r->bad = 1;
    return NULL;
  }
  char* s = (char*)pa(r->plan, (size_t)n + 1);
  if (!s) {
    r->bad = 1;
    return NULL;
  }
  take(r, s, n);
  s[n] = '\0';
  return s;
}

/* `count` elements of `elem` bytes, refusing counts the remaining bytes cannot hold. */
static void* rd_array(Reader* r, uint64_t count, size_t elem) {
  if (r->bad || count > (r->size - r->pos) / elem) {
    r->bad = 1;
    return NULL;
  }
  void* a = pa(r->plan, (size_t)count * elem);
  if (!a) r->bad = 1;
  else take(r, a, (size_t)count * elem);
  return a;
}

static uint32_t crc32_of(const uint8_t* data, size_t n) {
  uint32_t table[256];
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = table[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

/* ---- validation ---------------------------------------------------------------------------- */

/* Bytes from the buffer's start to the end of the view's last element (0 when empty); -1 on
 * overflow. */
static int64_t ref_extent(const PlanRef* t) {
  unsigned __int128 last = (unsigned __int128)t->offset;
  for (int32_t i = 0; i < t->ndim; i++) {
    if (t->shape[i] == 0) return 0;
    last += (unsigned __int128)(t->shape[i] - 1) * (unsigned __int128)t->strides[i];
  }
  unsigned __int128 bytes = (last + 1) * (unsigned __int128)(ud_dtype_of(t->dtype).bits / 8);
  return bytes > ((unsigned __int128)1 << 62) ? -1 : (int64_t)bytes;
}

static int read_ref(Reader* r, PlanRef* t, const char* what, UD_PlanStatus* st) {
  t->buffer = rd_u32(r);
  char* dtype = rd_str(r);
  t->dtype = ud_dtype_from_name(dtype);
  uint32_t ndim = rd_u32(r);
  if (r->bad) return fail(st, UD_ERR_INVALID_ARGUMENT, "%s: truncated", what);
  if (t->dtype < 0)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "%s: unknown dtype '%s'", what, dtype);
  if (ndim > UD_PLAN_MAX_DIMS)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "%s: %u dims, at most %d", what, ndim,
                UD_PLAN_MAX_DIMS);
  t->ndim = (int32_t)ndim;
  t->shape = (int64_t*)rd_array(r, ndim, 8);
  t->strides = (int64_t*)rd_array(r, ndim, 8);
  t->offset = rd_i64(r);
  if (r->bad) return fail(st, UD_ERR_INVALID_ARGUMENT, "%s: truncated", what);
  for (uint32_t i = 0; i < ndim; i++)
    if (t->shape[i] < 0 || t->strides[i] < 0)
      return fail(st, UD_ERR_INVALID_ARGUMENT, "%s: shape[%u] = %lld, strides[%u] = %lld, "
                  "expected >= 0", what, i, (long long)t->shape[i], i, (long long)t->strides[i]);
  if (t->offset < 0)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "%s: offset %lld < 0", what, (long long)t->offset);
  return UD_OK;
}

/* The view must lie inside its buffer. */
static int check_ref(const UD_Plan* p, const PlanRef* t, const char* what, UD_PlanStatus* st) {
  if (t->buffer >= p->num_buffers)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "%s: buffer %u of %u", what, t->buffer,
                p->num_buffers);
  int64_t extent = ref_extent(t);
  const PlanBuffer* b = &p->buffers[t->buffer];
  if (extent < 0 || (uint64_t)extent > b->nbytes)
    return fail(st, UD_ERR_OUT_OF_BOUNDS, "%s: the view reaches byte %lld of buffer %u, which "
                "has %llu bytes", what, (long long)extent, t->buffer,
                (unsigned long long)b->nbytes);
  return UD_OK;
}

static void to_tensor(const UD_Plan* p, const PlanRef* t, UD_Tensor* out) {
  memset(out, 0, sizeof *out);
  out->device.device_type = p->dl_type;
  out->device.device_id = p->device;
  out->ndim = t->ndim;
  out->dtype = ud_dtype_of(t->dtype);
  out->shape = t->shape;
  out->strides = t->strides;
  out->byte_offset = (uint64_t)t->offset * (out->dtype.bits / 8);
}


static int32_t code_of(const UD_PlanStatus* st) { return st ? st->code : UD_ERR_INVALID_ARGUMENT; }

/* The plan's inputs/outputs: view k of the buffer of (kind, slot k), at offset 0, spanning it. */
static int read_io(Reader* r, UD_Plan* p, int kind, PlanRef** refs, UD_Tensor** descs,
                   uint32_t* count, UD_PlanStatus* st) {
  const char* name = kind == KIND_INPUT ? "input" : "output";
  char what[64];
  *count = rd_u32(r);
  if (*count > r->size) r->bad = 1;
  size_t n = r->bad ? 0 : *count;
  *refs = (PlanRef*)pa(p, n * sizeof(PlanRef));
  *descs = (UD_Tensor*)pa(p, n * sizeof(UD_Tensor));
  if (r->bad || !*refs || !*descs) return fail(st, UD_ERR_INVALID_ARGUMENT, "%ss: truncated", name);
  for (uint32_t k = 0; k < *count; k++) {
    PlanRef* t = &(*refs)[k];
    snprintf(what, sizeof what, "plan %s %u", name, k);
    if (read_ref(r, t, what, st) || check_ref(p, t, what, st)) return code_of(st);
    const PlanBuffer* b = &p->buffers[t->buffer];
    if (b->kind != kind || b->slot != (int64_t)k || t->offset != 0 ||
        (uint64_t)ref_extent(t) < b->nbytes)
      return fail(st, UD_ERR_INVALID_ARGUMENT, "%s: buffer %u is not the whole %s buffer of "
                  "slot %u", what, t->buffer, name, k);
    to_tensor(p, t, &(*descs)[k]);
  }
  return UD_OK;
}

static int read_step(Reader* r, UD_Plan* p, uint32_t i, size_t max_patches, UD_PlanStatus* st) {
  PlanStep* s = &p->steps[i];
  s->op = rd_str(r);
  s->dtype = rd_str(r);
  s->node = rd_str(r);
  if (r->bad) return fail(st, UD_ERR_INVALID_ARGUMENT, "step %u: truncated", i);
  char what[320];
  const int op_id = ud_op_id(s->op);
  const uint32_t mutated = op_id >= 0 ? ud_op_info(op_id)->mutated_inputs : 0;
  for (int io = 0; io < 2; io++) {
    uint32_t n = rd_u32(r);
    if (n > r->size) r->bad = 1;
    UD_Tensor* ts = (UD_Tensor*)pa(p, (size_t)(r->bad ? 0 : n) * sizeof(UD_Tensor));
    if (r->bad || !ts) return fail(st, UD_ERR_INVALID_ARGUMENT, "step %u: truncated", i);
    for (uint32_t k = 0; k < n; k++) {
      snprintf(what, sizeof what, "node '%s' (%s): %s %u", s->node, s->op,
               io ? "output" : "input", k);
      if (!io && !rd_u8(r)) { /* an absent optional input */
        ts[k].ndim = -1;
        continue;
      }
      PlanRef t;
      if (read_ref(r, &t, what, st) || check_ref(p, &t, what, st)) return code_of(st);
      if (p->num_patches >= max_patches)
        return fail(st, UD_ERR_INVALID_ARGUMENT, "%s: metadata inconsistent", what);
      to_tensor(p, &t, &ts[k]);
      const PlanBuffer* b = &p->buffers[t.buffer];
      /* constants are shared by every run; inputs may be written (state updated in place) */
      if (b->kind == KIND_CONST && (io || (k < 32 && (mutated >> k) & 1u)))
        return fail(st, UD_ERR_INVALID_ARGUMENT, "%s writes constant buffer %u", what, t.buffer);
      Patch* pt = &p->patches[p->num_patches++];
      pt->tensor = &ts[k];
      pt->kind = b->kind;
      pt->slot = (int32_t)b->slot;
      pt->writes = io || (k < 32 && (mutated >> k) & 1u);
      pt->byte_offset = ts[k].byte_offset + (b->kind >= KIND_CONST ? b->offset : 0);
    }
    if (io) {
      s->outputs = ts;
      s->num_outputs = (int32_t)n;
    } else {
      s->inputs = ts;
      s->num_inputs = (int32_t)n;
    }
  }
  uint32_t na = rd_u32(r);
  if (na > r->size) r->bad = 1;
  s->attrs = (UD_Attr*)pa(p, (size_t)(r->bad ? 0 : na) * sizeof(UD_Attr));
  s->num_attrs = (int32_t)na;
  for (uint32_t k = 0; k < na && !r->bad && s->attrs; k++) {
    UD_Attr* a = &s->attrs[k];
    a->name = rd_str(r);
    uint8_t type = rd_u8(r);
    a->type = (UD_AttrType)type;
    if (type == UD_ATTR_INT) a->value.i = rd_i64(r);
    else if (type == UD_ATTR_FLOAT) a->value.f = rd_f64(r);
    else if (type == UD_ATTR_BOOL) a->value.b = rd_u8(r) ? 1 : 0;
    else if (type == UD_ATTR_STRING) a->value.s = rd_str(r);
    else if (type == UD_ATTR_INTS) {
      uint32_t len = rd_u32(r);
      a->value.ints.data = (const int64_t*)rd_array(r, len, 8);
      a->value.ints.len = len;
    } else if (!r->bad) {
      return fail(st, UD_ERR_INVALID_ARGUMENT, "node '%s' (%s): attribute '%s' has type %u",
                  s->node, s->op, a->name, type);
    }
  }
  if (r->bad || !s->attrs)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "node '%s' (%s): attributes truncated", s->node,
                s->op);
  return UD_OK;
}

static int parse(UD_Plan* p, const uint8_t* data, size_t size, UD_PlanStatus* st) {
  if (size < UD_PLAN_HEADER_BYTES || memcmp(data, "UDPLAN\r\n", 8) != 0)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "not a unidev plan file (no UDPLAN header)");
  Reader h = {data, UD_PLAN_HEADER_BYTES, 8, 0, p};
  uint32_t version = rd_u32(&h), flags = rd_u32(&h);
  uint64_t meta_bytes = rd_u64(&h), data_bytes = rd_u64(&h);
  uint32_t crc = rd_u32(&h), order = rd_u32(&h);
  if (order != 0x01020304u)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "plan file of another byte order");
  if (version != UD_PLAN_VERSION || flags != 0)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "plan file version %u (flags %u); this runtime "
                "reads version %d", version, flags, UD_PLAN_VERSION);
  if (meta_bytes > size - UD_PLAN_HEADER_BYTES ||
      data_bytes != size - UD_PLAN_HEADER_BYTES - meta_bytes)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "plan file truncated or padded: %zu bytes, the "
                "header says %llu", size,
                (unsigned long long)(UD_PLAN_HEADER_BYTES + meta_bytes + data_bytes));
  uint32_t actual = crc32_of(data + UD_PLAN_HEADER_BYTES, size - UD_PLAN_HEADER_BYTES);
  if (actual != crc)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "plan file corrupt: CRC-32 %08x, the header says "
                "%08x", actual, crc);
  Reader rr = {data + UD_PLAN_HEADER_BYTES, (size_t)meta_bytes, 0, 0, p};
  Reader* r = &rr;
  p->data_bytes = data_bytes;
  p->key = rd_str(r);
  p->plugin = rd_str(r);
  rd_str(r); /* the meta JSON is for Python */
  p->arena_bytes = rd_u64(r);
  uint32_t nconsts = rd_u32(r);
  if (nconsts > r->size) r->bad = 1;
  uint64_t* const_off = (uint64_t*)pa(p, (size_t)(r->bad ? 0 : nconsts) * 8);
  uint64_t* const_len = (uint64_t*)pa(p, (size_t)(r->bad ? 0 : nconsts) * 8);
  for (uint32_t k = 0; k < nconsts && !r->bad && const_off && const_len; k++) {
    rd_str(r); /* dtype and shape: for Python */
    rd_array(r, rd_u32(r), 8);
    uint64_t off = rd_u64(r), n = rd_u64(r);
    if (!r->bad && (off > data_bytes || n > data_bytes - off))
      return fail(st, UD_ERR_INVALID_ARGUMENT, "constant %u: bytes [%llu, +%llu) outside the "
                  "data section of %llu", k, (unsigned long long)off, (unsigned long long)n,
                  (unsigned long long)data_bytes);
    const_off[k] = off;
    const_len[k] = n;
  }
  p->num_buffers = rd_u32(r);
  if (p->num_buffers > r->size) r->bad = 1;
  p->buffers = (PlanBuffer*)pa(p, (size_t)(r->bad ? 0 : p->num_buffers) * sizeof(PlanBuffer));
  if (r->bad || !p->buffers || !const_off || !const_len)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "plan metadata truncated");
  for (uint32_t k = 0; k < p->num_buffers; k++) {
    PlanBuffer* b = &p->buffers[k];
    b->kind = rd_u8(r);
    b->slot = rd_i64(r);
    b->nbytes = rd_u64(r);
    b->offset = rd_u64(r);
    if (r->bad) return fail(st, UD_ERR_INVALID_ARGUMENT, "buffers truncated");
    if (b->kind > KIND_TEMP)
      return fail(st, UD_ERR_INVALID_ARGUMENT, "buffer %u: kind %u", k, b->kind);
    if (b->kind == KIND_TEMP &&
        (b->offset > p->arena_bytes || b->nbytes > p->arena_bytes - b->offset))
      return fail(st, UD_ERR_INVALID_ARGUMENT, "buffer %u: bytes [%llu, +%llu) outside the "
                  "arena of %llu", k, (unsigned long long)b->offset,
                  (unsigned long long)b->nbytes, (unsigned long long)p->arena_bytes);
    if (b->kind == KIND_CONST) {
      if (b->slot < 0 || b->slot >= (int64_t)nconsts || b->nbytes > const_len[b->slot])
        return fail(st, UD_ERR_INVALID_ARGUMENT, "buffer %u: constant %lld (of %u) cannot hold "
                    "%llu bytes", k, (long long)b->slot, nconsts, (unsigned long long)b->nbytes);
      b->offset = const_off[b->slot];
    }
    if (b->kind <= KIND_OUTPUT && (b->slot < 0 || b->slot > INT32_MAX))
      return fail(st, UD_ERR_INVALID_ARGUMENT, "buffer %u: slot %lld", k, (long long)b->slot);
  }
  if (read_io(r, p, KIND_INPUT, &p->inputs, &p->in_desc, &p->num_inputs, st) ||
      read_io(r, p, KIND_OUTPUT, &p->outputs, &p->out_desc, &p->num_outputs, st))
    return code_of(st);
  for (uint32_t k = 0; k < p->num_buffers; k++) {
    const PlanBuffer* b = &p->buffers[k];
    if ((b->kind == KIND_INPUT && b->slot >= (int64_t)p->num_inputs) ||
        (b->kind == KIND_OUTPUT && b->slot >= (int64_t)p->num_outputs))
      return fail(st, UD_ERR_INVALID_ARGUMENT, "buffer %u: slot %lld has no plan %s", k,
                  (long long)b->slot, b->kind == KIND_INPUT ? "input" : "output");
  }
  p->num_steps = rd_u32(r);
  if (p->num_steps > r->size) r->bad = 1;
  p->steps = (PlanStep*)pa(p, (size_t)(r->bad ? 0 : p->num_steps) * sizeof(PlanStep));
  /* a tensor reference takes at least 20 bytes of metadata */
  size_t max_patches = r->size / 20 + 1;
  p->patches = (Patch*)pa(p, max_patches * sizeof(Patch));
  if (r->bad || !p->steps || !p->patches)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "steps truncated");
  for (uint32_t i = 0; i < p->num_steps; i++)
    if (read_step(r, p, i, max_patches, st)) return code_of(st);
  if (r->pos != r->size)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "%zu bytes of metadata left over", r->size - r->pos);
  return UD_OK;
}

/* ---- device side --------------------------------------------------------------------------- */

static int32_t prepare(UD_Plan* p, const uint8_t* data_section, UD_PlanStatus* st) {
  const UD_Api* api = p->api;
  UD_Error* e;
  char what[320];
  for (uint32_t i = 0; i < p->num_steps; i++) {
    PlanStep* s = &p->steps[i];
    int id = ud_dtype_from_name(s->dtype);
    snprintf(what, sizeof what, "node '%s' (%s)", s->node, s->op);
    if (id < 0) return fail(st, UD_ERR_INVALID_ARGUMENT, "%s: unknown dtype '%s'", what, s->dtype);
    UD_DType dt = ud_dtype_of(id);
#if UD_ABI_MINOR >= 2
    if (UD_API_HAS(api, kernel_compile)) {
      if ((e = api->kernel_compile(s->op, dt, s->attrs, s->num_attrs, &s->fn)))
        return plugin_fail(p, st, e, what);
      s->compiled = s->fn != NULL;
    }
#endif
    if (!s->fn && (e = api->kernel_lookup(s->op, dt, &s->fn))) return plugin_fail(p, st, e, what);
    if (!s->fn)
      return fail(st, UD_ERR_UNSUPPORTED, "%s: plugin '%s' has no %s kernel for %s", what,
                  api->plugin_name, s->op, s->dtype);
  }
  if ((e = api->stream_create(p->device, &p->stream)))
    return plugin_fail(p, st, e, "stream_create");
  if ((e = api->event_create(p->device, &p->done))) return plugin_fail(p, st, e, "event_create");
  if ((e = api->mem_alloc(p->device, p->stream, p->arena_bytes, &p->arena)))
    return plugin_fail(p, st, e, "allocating the plan's arena");
  if ((e = api->mem_alloc(p->device, p->stream, p->data_bytes, &p->consts)))
    return plugin_fail(p, st, e, "allocating the plan's constants");
  if (p->data_bytes && (e = api->memcpy_h2d(p->stream, p->consts, data_section, p->data_bytes)))
    return plugin_fail(p, st, e, "uploading the plan's constants");
  if ((e = api->stream_synchronize(p->stream)))
    return plugin_fail(p, st, e, "uploading the plan's constants");
  /* temps and constants have fixed handles from now on: only bound views stay patches */
  uint32_t kept = 0;
  if (!(p->in_written = (uint8_t*)pa(p, p->num_inputs)))
    return fail(st, UD_ERR_OUT_OF_MEMORY, "plan '%s': out of host memory", p->key);
  for (uint32_t k = 0; k < p->num_patches; k++) {
    Patch* pt = &p->patches[k];
    if (pt->kind == KIND_INPUT && pt->writes) p->in_written[pt->slot] = 1;
    if (pt->kind >= KIND_CONST) {
      pt->tensor->handle = pt->kind == KIND_CONST ? p->consts : p->arena;
      pt->tensor->byte_offset = pt->byte_offset;
    } else {
      p->patches[kept++] = *pt;
    }
  }
  p->num_patches = kept;
  return UD_OK;
}

int32_t ud_plan_create(const UD_Api* api, int32_t device, const void* data, size_t size,
                       UD_Plan** plan, UD_PlanStatus* status) {
  if (!plan) return fail(status, UD_ERR_INVALID_ARGUMENT, "ud_plan_create: plan is NULL");
  *plan = NULL;
  if (!api || !data)
    return fail(status, UD_ERR_INVALID_ARGUMENT, "ud_plan_create: api or data is NULL");
  UD_Plan* p = (UD_Plan*)calloc(1, sizeof(UD_Plan));
  if (!p) return fail(status, UD_ERR_OUT_OF_MEMORY, "ud_plan_create: out of host memory");
  p->api = api;
  p->device = device;
  p->dl_type = UD_DLPACK_EXT_DEV;
  int32_t n = 0, rc;
  const char* reason = NULL;
  UD_Error* e = api->device_count(&n, &reason);
  if (e) {
    rc = plugin_fail(p, status, e, "device_count");
  } else if (device < 0 || device >= n) {
    rc = fail(status, UD_ERR_INVALID_ARGUMENT, "ud_plan_create: device %d out of range; plugin "
              "'%s' has %d device(s)", device, api->plugin_name, n);
  } else {
    UD_DeviceProperties props;
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    if ((e = api->device_properties(device, &props))) api->error_destroy(e);
    else if (props.host_addressable) p->dl_type = UD_DLPACK_CPU;
    rc = parse(p, (const uint8_t*)data, size, status);
    if (rc == UD_OK) {
      uint64_t meta_bytes;
      memcpy(&meta_bytes, (const uint8_t*)data + 16, 8);
      rc = prepare(p, (const uint8_t*)data + UD_PLAN_HEADER_BYTES + meta_bytes, status);
    }
  }
  if (rc != UD_OK) {
    ud_plan_destroy(p);
    return rc;
  }
  *plan = p;
  return ok(status);
}

int32_t ud_plan_create_from_file(const UD_Api* api, int32_t device, const char* path,
                                 UD_Plan** plan, UD_PlanStatus* status) {
  if (plan) *plan = NULL;
  if (!path) return fail(status, UD_ERR_INVALID_ARGUMENT, "ud_plan_create_from_file: path is NULL");
  FILE* f = fopen(path, "rb");
  if (!f) return fail(status, UD_ERR_INVALID_ARGUMENT, "cannot open plan file %s", path);
  uint8_t* data = NULL;
  long size = -1;
  if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
    data = (uint8_t*)malloc((size_t)size + 1);
    if (data && fread(data, 1, (size_t)size, f) != (size_t)size) size = -1;
  }
  fclose(f);
  int32_t rc;
  if (!data || size < 0) {
    rc = fail(status, UD_ERR_INVALID_ARGUMENT, "cannot read plan file %s", path);
  } else {
    rc = ud_plan_create(api, device, data, (size_t)size, plan, status);
    if (rc != UD_OK && status) {  /* name the file */
      char msg[2 * sizeof status->message];
      snprintf(msg, sizeof msg, "%s: %s", path, status->message);
      memcpy(status->message, msg, sizeof status->message - 1);
      status->message[sizeof status->message - 1] = '\0';
    }
  }
  free(data);
  return rc;
}

static void drop_events(UD_Plan* p) {
  if (!p->events) return;
  for (uint32_t i = 0; i <= p->num_steps; i++)
    if (p->events[i]) p->api->event_destroy(p->events[i]);
  free(p->events);
  p->events = NULL;
  p->profiled = 0;
}

void ud_plan_destroy(UD_Plan* p) {
  if (!p) return;
  const UD_Api* api = p->api;
  UD_Error* e;
  if (p->stream) {
    /* the last run (on whichever stream) comes before the frees */
    if (p->ran && (e = api->stream_wait_event(p->stream, p->done))) api->error_destroy(e);
    if (p->arena && (e = api->mem_free(p->device, p->stream, p->arena))) api->error_destroy(e);
    if (p->consts && (e = api->mem_free(p->device, p->stream, p->consts))) api->error_destroy(e);
    if ((e = api->stream_destroy(p->stream))) api->error_destroy(e);
  }
  drop_events(p);
  if (p->done && (e = api->event_destroy(p->done))) api->error_destroy(e);
  for (size_t i = 0; i < p->num_allocs; i++) free(p->allocs[i]);
  free(p->allocs);
  free(p);
}

int32_t ud_plan_num_inputs(const UD_Plan* p) { return p ? (int32_t)p->num_inputs : 0; }
int32_t ud_plan_num_outputs(const UD_Plan* p) { return p ? (int32_t)p->num_outputs : 0; }
int32_t ud_plan_num_steps(const UD_Plan* p) { return p ? (int32_t)p->num_steps : 0; }
const char* ud_plan_key(const UD_Plan* p) { return p ? p->key : NULL; }
const char* ud_plan_plugin(const UD_Plan* p) { return p ? p->plugin : NULL; }
UD_Stream ud_plan_stream(const UD_Plan* p) { return p ? p->stream : NULL; }

int32_t ud_plan_num_compiled(const UD_Plan* p) {
  int32_t n = 0;
  for (uint32_t i = 0; p && i < p->num_steps; i++) n += p->steps[i].compiled;
  return n;
}

static int32_t io_desc(const UD_Plan* p, int out, int32_t k, UD_Tensor* desc, uint64_t* nbytes) {
  uint32_t n = !p ? 0 : out ? p->num_outputs : p->num_inputs;
  if (k < 0 || (uint32_t)k >= n) return UD_ERR_INVALID_ARGUMENT;
  const PlanRef* t = out ? &p->outputs[k] : &p->inputs[k];
  if (desc) *desc = out ? p->out_desc[k] : p->in_desc[k];
  if (nbytes) *nbytes = p->buffers[t->buffer].nbytes;
  return UD_OK;
}
int32_t ud_plan_input(const UD_Plan* p, int32_t k, UD_Tensor* desc, uint64_t* nbytes) {
  return io_desc(p, 0, k, desc, nbytes);
}
int32_t ud_plan_output(const UD_Plan* p, int32_t k, UD_Tensor* desc, uint64_t* nbytes) {
  return io_desc(p, 1, k, desc, nbytes);
}
const char* ud_plan_step_node(const UD_Plan* p, int32_t i) {
  return p && i >= 0 && (uint32_t)i < p->num_steps ? p->steps[i].node : NULL;
}
const char* ud_plan_step_op(const UD_Plan* p, int32_t i) {
  return p && i >= 0 && (uint32_t)i < p->num_steps ? p->steps[i].op : NULL;
}

/* ---- running ------------------------------------------------------------------------------- */

static void dims(char* buf, size_t n, int32_t ndim, const int64_t* v) {
  size_t at = (size_t)snprintf(buf, n, "(");
  for (int32_t i = 0; i < ndim && at < n; i++)
    at += (size_t)snprintf(buf + at, n - at, i ? ", %lld" : "%lld", (long long)v[i]);
  if (at < n) snprintf(buf + at, n - at, ndim == 1 ? ",)" : ")");
}

static int32_t check_bound(const UD_Plan* p, const char* name, uint32_t k, const UD_Tensor* want,
                           const UD_Tensor* got, UD_PlanStatus* st) {
  char a[200], b[200];
  if (got->ndim < 0 || got->handle == 0)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "plan '%s': %s %u is absent (handle 0 or ndim -1)",
                p->key, name, k);
  if (got->dtype.code != want->dtype.code || got->dtype.bits != want->dtype.bits ||
      got->dtype.lanes != 1)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "plan '%s': %s %u has dtype %s, expected %s", p->key,
                name, k, ud_dtype_name(got->dtype), ud_dtype_name(want->dtype));
  int same = got->ndim == want->ndim && (got->ndim == 0 || (got->shape && got->strides));
  for (int32_t i = 0; same && i < want->ndim; i++) same = got->shape[i] == want->shape[i];
  if (!same) {
    if (got->ndim > UD_PLAN_MAX_DIMS || (got->ndim > 0 && !got->shape))
      snprintf(a, sizeof a, "%d dims", got->ndim);
    else dims(a, sizeof a, got->ndim, got->shape);
    dims(b, sizeof b, want->ndim, want->shape);
    return fail(st, UD_ERR_INVALID_ARGUMENT, "plan '%s': %s %u has shape %s, expected %s "
                "(plans are shape-specialized: compile one for this shape)", p->key, name, k, a, b);
  }
  int empty = 0;
  for (int32_t i = 0; i < want->ndim; i++) empty |= want->shape[i] == 0;
  for (int32_t i = 0; !empty && i < want->ndim; i++)
    if (want->shape[i] != 1 && got->strides[i] != want->strides[i]) {
      dims(a, sizeof a, got->ndim, got->strides);
      dims(b, sizeof b, want->ndim, want->strides);
      return fail(st, UD_ERR_INVALID_ARGUMENT, "plan '%s': %s %u has strides %s, expected %s",
                  p->key, name, k, a, b);
    }
  if (got->device.device_id != p->device)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "plan '%s': %s %u is on device %d, the plan on %d",
                p->key, name, k, got->device.device_id, p->device);
  return UD_OK;
}

/* Bytes [lo, hi) of a bound tensor (checked against the plan's shape: strides >= 0 where the
   extent is > 1); empty tensors span nothing. */
static void span(const UD_Tensor* t, unsigned __int128* lo, unsigned __int128* hi) {
  const uint64_t es = t->dtype.bits / 8;
  unsigned __int128 last = 0;
  *lo = *hi = t->byte_offset;
  for (int32_t i = 0; i < t->ndim; i++) {
    if (t->shape[i] == 0) return;
    if (t->shape[i] > 1) last += (unsigned __int128)(t->shape[i] - 1) * (uint64_t)t->strides[i];
  }
  *hi = *lo + (last + 1) * es;
}

/* A tensor the plan writes must not share bytes with another bound tensor: the steps read and
   write them in an order the caller cannot see (an output over an input gave wrong numbers). */
static int32_t check_aliasing(const UD_Plan* p, const UD_Tensor* inputs, const UD_Tensor* outputs,
                              UD_PlanStatus* st) {
  const uint32_t n = p->num_inputs + p->num_outputs;
  for (uint32_t a = 0; a < n; a++) {
    const int a_in = a < p->num_inputs;
    const UD_Tensor* ta = a_in ? &inputs[a] : &outputs[a - p->num_inputs];
    unsigned __int128 alo, ahi, blo, bhi;
    span(ta, &alo, &ahi);
    for (uint32_t b = a + 1; b < n && alo < ahi; b++) {
      const int b_in = b < p->num_inputs;
      const UD_Tensor* tb = b_in ? &inputs[b] : &outputs[b - p->num_inputs];
      if (tb->handle != ta->handle || (a_in && !p->in_written[a] && b_in && !p->in_written[b]))
        continue;
      span(tb, &blo, &bhi);
      if (blo < bhi && alo < bhi && blo < ahi)
        return fail(st, UD_ERR_INVALID_ARGUMENT, "plan '%s': %s %u and %s %u share memory "
                    "(handle 0x%llx), expected separate memory for a tensor the plan writes",
                    p->key, a_in ? "input" : "output", a_in ? a : a - p->num_inputs,
                    b_in ? "input" : "output", b_in ? b : b - p->num_inputs,
                    (unsigned long long)ta->handle);
    }
  }
  return UD_OK;
}

int32_t ud_plan_run(UD_Plan* p, UD_Stream stream, const UD_Tensor* inputs, int32_t num_inputs,
                    const UD_Tensor* outputs, int32_t num_outputs, UD_PlanStatus* st) {
  if (!p) return fail(st, UD_ERR_INVALID_ARGUMENT, "ud_plan_run: plan is NULL");
  if (num_inputs != (int32_t)p->num_inputs || num_outputs != (int32_t)p->num_outputs ||
      (num_inputs && !inputs) || (num_outputs && !outputs))
    return fail(st, UD_ERR_INVALID_ARGUMENT, "plan '%s': takes %u inputs and %u outputs, got %d "
                "and %d", p->key, p->num_inputs, p->num_outputs, num_inputs, num_outputs);
  for (uint32_t k = 0; k < p->num_inputs; k++)
    if (check_bound(p, "input", k, &p->in_desc[k], &inputs[k], st)) return st ? st->code : 1;
  for (uint32_t k = 0; k < p->num_outputs; k++)
    if (check_bound(p, "output", k, &p->out_desc[k], &outputs[k], st)) return st ? st->code : 1;
  if (check_aliasing(p, inputs, outputs, st)) return st ? st->code : 1;
  const UD_Api* api = p->api;
  UD_Stream s = stream ? stream : p->stream;
  UD_Error* e;
  /* runs share the arena: one on another stream waits for the previous one */
  if (p->ran && s != p->last_stream && (e = api->stream_wait_event(s, p->done)))
    return plugin_fail(p, st, e, "ordering after the previous run");
  for (uint32_t k = 0; k < p->num_patches; k++) {
    const Patch* pt = &p->patches[k];
    const UD_Tensor* b = pt->kind == KIND_INPUT ? &inputs[pt->slot] : &outputs[pt->slot];
    pt->tensor->handle = b->handle;
    pt->tensor->byte_offset = b->byte_offset + pt->byte_offset;
  }
  UD_KernelArgs args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.device = p->device;
  args.stream = s;
  int32_t rc = UD_OK;
  if (p->events && (e = api->event_record(p->events[0], s)))
    return plugin_fail(p, st, e, "profiling: event_record");
  for (uint32_t i = 0; i < p->num_steps && rc == UD_OK; i++) {
    const PlanStep* step = &p->steps[i];
    args.inputs = step->inputs;
    args.num_inputs = step->num_inputs;
    args.outputs = step->outputs;
    args.num_outputs = step->num_outputs;
    args.attrs = step->attrs;
    args.num_attrs = step->num_attrs;
    if ((e = step->fn(&args))) {
      char what[320];
      snprintf(what, sizeof what, "node '%s' (%s)", step->node, step->op);
      rc = plugin_fail(p, st, e, what);
    } else if (p->events && (e = api->event_record(p->events[i + 1], s))) {
      rc = plugin_fail(p, st, e, "profiling: event_record");
    }
  }
  /* recorded even after a failure: what was enqueued still uses the arena */
  if ((e = api->event_record(p->done, s))) {
    if (rc == UD_OK) rc = plugin_fail(p, st, e, "event_record");
    else api->error_destroy(e);
  }
  p->ran = 1;
  p->last_stream = s;
  if (p->events) p->profiled = rc == UD_OK;
  return rc == UD_OK ? ok(st) : rc;
}

int32_t ud_plan_set_profiling(UD_Plan* p, int32_t on, UD_PlanStatus* st) {
  if (!p) return fail(st, UD_ERR_INVALID_ARGUMENT, "ud_plan_set_profiling: plan is NULL");
  if (!on || p->events) {
    if (!on) {
      UD_Error* e;
      if (p->ran && (e = p->api->event_synchronize(p->done))) p->api->error_destroy(e);
      drop_events(p);
    }
    return ok(st);
  }
  p->events = (UD_Event*)calloc((size_t)p->num_steps + 1, sizeof(UD_Event));
  if (!p->events) return fail(st, UD_ERR_OUT_OF_MEMORY, "profiling: out of host memory");
  for (uint32_t i = 0; i <= p->num_steps; i++) {
    UD_Error* e = p->api->event_create(p->device, &p->events[i]);
    if (e) {
      drop_events(p);
      return plugin_fail(p, st, e, "profiling: event_create");
    }
  }
  return ok(st);
}

int32_t ud_plan_step_times(UD_Plan* p, double* ms, int32_t n, UD_PlanStatus* st) {
  if (!p || !ms || n < (int32_t)p->num_steps)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "ud_plan_step_times: needs room for %u steps",
                p ? p->num_steps : 0);
  if (!p->profiled)
    return fail(st, UD_ERR_INVALID_ARGUMENT, "plan '%s': no profiled run (set_profiling(1), "
                "then run)", p->key);
  UD_Error* e = p->api->event_synchronize(p->events[p->num_steps]);
  if (e) return plugin_fail(p, st, e, "profiling: event_synchronize");
  for (uint32_t i = 0; i < p->num_steps; i++)
    if ((e = p->api->event_elapsed(p->events[i], p->events[i + 1], &ms[i]))) {
      char what[320];
      snprintf(what, sizeof what, "profiling node '%s' (%s): event_elapsed", p->steps[i].node,
               p->steps[i].op);
      return plugin_fail(p, st, e, what);
    }
  return ok(st);
}
