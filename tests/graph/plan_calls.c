/* plan_calls.c — drives ud_plan.c against a recording fake UD_Api (host memory, no threads) and
 * prints how often each entry was called, so test_plan_calls.py can count work, not time.
 *
 *   plan_calls PLAN.udplan   (the plan: y = (x + x) * c, steps "add" then "mul")
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ud_plan.h"

struct UD_Error { int code; char msg[128]; };
enum { C_LOOKUP, C_COMPILE, C_ALLOC, C_FREE, C_H2D, C_SCREATE, C_SDESTROY, C_SSYNC, C_WAIT,
       C_ECREATE, C_EDESTROY, C_RECORD, C_ADD, C_MUL, C_N };
static const char* names[C_N] = {"kernel_lookup", "kernel_compile", "mem_alloc", "mem_free",
                                 "memcpy_h2d", "stream_create", "stream_destroy",
                                 "stream_synchronize", "stream_wait_event", "event_create",
                                 "event_destroy", "event_record", "add_calls", "mul_calls"};
static int calls[C_N];
static int streams, events;

static UD_ErrorCode e_code(const UD_Error* e) { return (UD_ErrorCode)e->code; }
static const char* e_msg(const UD_Error* e) { return e->msg; }
static void e_destroy(UD_Error* e) { free(e); }
static UD_Error* nyi(void) {
  UD_Error* e = (UD_Error*)calloc(1, sizeof *e);
  e->code = UD_ERR_UNSUPPORTED;
  strcpy(e->msg, "not in the fake");
  return e;
}
static UD_Error* count(int32_t* n, const char** r) { *n = 1; *r = NULL; return NULL; }
static UD_Error* props(int32_t d, UD_DeviceProperties* p) { (void)d; p->host_addressable = 1; return NULL; }
static UD_Error* meminfo(int32_t d, uint64_t* f, uint64_t* t) { (void)d; *f = *t = 1; return NULL; }
static UD_Error* dsync(int32_t d) { (void)d; return NULL; }
static UD_Error* alloc(int32_t d, UD_Stream s, uint64_t n, UD_Handle* h) {
  (void)d, (void)s;
  calls[C_ALLOC]++;
  *h = (UD_Handle)(uintptr_t)malloc(n ? n : 1);
  return NULL;
}
static UD_Error* mfree(int32_t d, UD_Stream s, UD_Handle h) {
  (void)d, (void)s;
  calls[C_FREE]++;
  free((void*)(uintptr_t)h);
  return NULL;
}
static UD_Error* h2d(UD_Stream s, UD_Handle d, const void* p, uint64_t n) {
  (void)s;
  calls[C_H2D]++;
  memcpy((void*)(uintptr_t)d, p, n);
  return NULL;
}
static UD_Error* d2h(UD_Stream s, void* p, UD_Handle d, uint64_t n) { (void)s, (void)p, (void)d, (void)n; return nyi(); }
static UD_Error* d2d(UD_Stream s, UD_Handle a, UD_Handle b, uint64_t n) { (void)s, (void)a, (void)b, (void)n; return nyi(); }
static UD_Error* mset(UD_Stream s, UD_Handle d, uint64_t p, uint32_t e, uint64_t n) { (void)s, (void)d, (void)p, (void)e, (void)n; return nyi(); }
static UD_Error* screate(int32_t d, UD_Stream* s) { (void)d; calls[C_SCREATE]++; *s = (UD_Stream)(uintptr_t)(0x1000 + ++streams); return NULL; }
static UD_Error* sdestroy(UD_Stream s) { (void)s; calls[C_SDESTROY]++; return NULL; }
static UD_Error* ssync(UD_Stream s) { (void)s; calls[C_SSYNC]++; return NULL; }
static UD_Error* squery(UD_Stream s, int32_t* d) { (void)s; *d = 1; return NULL; }
static UD_Error* swait(UD_Stream s, UD_Event e) { (void)s, (void)e; calls[C_WAIT]++; return NULL; }
static UD_Error* ecreate(int32_t d, UD_Event* e) { (void)d; calls[C_ECREATE]++; *e = (UD_Event)(uintptr_t)(0x2000 + ++events); return NULL; }
static UD_Error* edestroy(UD_Event e) { (void)e; calls[C_EDESTROY]++; return NULL; }
static UD_Error* erecord(UD_Event e, UD_Stream s) { (void)e, (void)s; calls[C_RECORD]++; return NULL; }
static UD_Error* equery(UD_Event e, int32_t* d) { (void)e; *d = 1; return NULL; }
static UD_Error* esync(UD_Event e) { (void)e; return NULL; }
static UD_Error* elapsed(UD_Event a, UD_Event b, double* ms) { (void)a, (void)b; *ms = 1; return NULL; }

/* contiguous float32 binary ops: the plan's views are whole, dense buffers */
static float* at(const UD_Tensor* t) { return (float*)(uintptr_t)(t->handle + t->byte_offset); }
static int64_t numel(const UD_Tensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}
static UD_Error* add(const UD_KernelArgs* a) {
  calls[C_ADD]++;
  for (int64_t i = 0; i < numel(&a->outputs[0]); i++)
    at(&a->outputs[0])[i] = at(&a->inputs[0])[i] + (float)a->attrs[0].value.f * at(&a->inputs[1])[i];
  return NULL;
}
static UD_Error* mul(const UD_KernelArgs* a) {
  calls[C_MUL]++;
  for (int64_t i = 0; i < numel(&a->outputs[0]); i++)
    at(&a->outputs[0])[i] = at(&a->inputs[0])[i] * at(&a->inputs[1])[i];
  return NULL;
}
static UD_Error* lookup(const char* op, UD_DType dt, UD_KernelFn* k) {
  (void)dt;
  calls[C_LOOKUP]++;
  *k = !strcmp(op, "add") ? add : NULL;
  return NULL;
}
/* specializes "mul" only: the plan must take it and fall back to lookup for "add" */
static UD_Error* compile(const char* op, UD_DType dt, const UD_Attr* a, int32_t n, UD_KernelFn* k) {
  (void)dt, (void)a, (void)n;
  calls[C_COMPILE]++;
  *k = !strcmp(op, "mul") ? mul : NULL;
  return NULL;
}

int main(int argc, char** argv) {
  UD_Api api;
  memset(&api, 0, sizeof api);
  api.struct_size = sizeof api;
  api.abi_major = UD_ABI_MAJOR;
  api.abi_minor = UD_ABI_MINOR;
  api.plugin_name = "fake";
  api.plugin_version = "0";
  api.error_code = e_code; api.error_message = e_msg; api.error_destroy = e_destroy;
  api.device_count = count; api.device_properties = props; api.device_memory_info = meminfo;
  api.device_synchronize = dsync; api.mem_alloc = alloc; api.mem_free = mfree;
  api.memcpy_h2d = h2d; api.memcpy_d2h = d2h; api.memcpy_d2d = d2d; api.memset = mset;
  api.stream_create = screate; api.stream_destroy = sdestroy; api.stream_synchronize = ssync;
  api.stream_query = squery; api.stream_wait_event = swait; api.event_create = ecreate;
  api.event_destroy = edestroy; api.event_record = erecord; api.event_query = equery;
  api.event_synchronize = esync; api.event_elapsed = elapsed; api.kernel_lookup = lookup;
#if UD_ABI_MINOR >= 2
  api.kernel_compile = compile;
#endif
  UD_Plan* plan;
  UD_PlanStatus st;
  if (argc < 2 || ud_plan_create_from_file(&api, 0, argv[1], &plan, &st)) {
    printf("create failed: %s\n", argc < 2 ? "no file" : st.message);
    return 1;
  }
  printf("after_create");
  for (int i = 0; i < C_N; i++) printf(" %s=%d", names[i], calls[i]);
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {0};
  UD_Tensor in, out;
  ud_plan_input(plan, 0, &in, NULL);
  ud_plan_output(plan, 0, &out, NULL);
  in.handle = (UD_Handle)(uintptr_t)x;
  out.handle = (UD_Handle)(uintptr_t)y;
  UD_Stream a = (UD_Stream)(uintptr_t)0x9001, b = (UD_Stream)(uintptr_t)0x9002;
  UD_Stream order[4] = {a, a, a, b};
  for (int r = 0; r < 4; r++)
    if (ud_plan_run(plan, order[r], &in, 1, &out, 1, &st)) {
      printf("\nrun failed: %s\n", st.message);
      return 1;
    }
  printf("\nafter_runs");
  for (int i = 0; i < C_N; i++) printf(" %s=%d", names[i], calls[i]);
  printf("\ny");
  for (int i = 0; i < 6; i++) printf(" %g", y[i]);
  ud_plan_destroy(plan);
  printf("\nafter_destroy");
  for (int i = 0; i < C_N; i++) printf(" %s=%d", names[i], calls[i]);
  printf("\n");
  return 0;
}
