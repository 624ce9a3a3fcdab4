/* ud_run.c — runs a saved unidev plan from C: no Python, no framework (SOL's "deploy" mode).
 *
 *   cc -std=c17 -I<unidev>/contract/include ud_run.c ud_plan.c -ldl -o ud_run
 *   ud_run PLUGIN.so PLAN.udplan [--device N] [--repeat N] [--profile] IN0.bin ... -o OUT0.bin ...
 *
 * Inputs and outputs are raw files holding each buffer's bytes (row-major for contiguous plans,
 * as numpy's tofile writes them). The plugin is loaded through loader.h, the one ABI rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unidev/loader.h>
#include <unidev/ops.h>

#include "ud_plan.h"

static int die(const char* what, const char* msg) {
  fprintf(stderr, "ud_run: %s: %s\n", what, msg);
  return 1;
}

static int api_fail(const UD_Api* api, UD_Error* e, const char* what) {
  fprintf(stderr, "ud_run: %s: %s\n", what, api->error_message(e));
  api->error_destroy(e);
  return 1;
}

int main(int argc, char** argv) {
  const char *lib = NULL, *plan_path = NULL, *ins[64], *outs[64];
  int n_in = 0, n_out = 0, device = 0, repeat = 1, profile = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) device = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--profile")) profile = 1;
    else if (!strcmp(argv[i], "-o") && i + 1 < argc && n_out < 64) outs[n_out++] = argv[++i];
    else if (!lib) lib = argv[i];
    else if (!plan_path) plan_path = argv[i];
    else if (n_in < 64) ins[n_in++] = argv[i];
  }
  if (!lib || !plan_path || repeat < 1)
    return die("usage", "ud_run PLUGIN.so PLAN.udplan [--device N] [--repeat N] [--profile] "
               "IN.bin ... -o OUT.bin ...");
  UD_Loaded loaded;
  if (ud_loader_open(lib, &loaded) != UD_LOAD_OK) return die("loading the plugin", loaded.error);
  const UD_Api* api = loaded.api;
  UD_PlanStatus st;
  UD_Plan* plan = NULL;
  if (ud_plan_create_from_file(api, device, plan_path, &plan, &st)) return die("plan", st.message);
  if (n_in != ud_plan_num_inputs(plan) || n_out != ud_plan_num_outputs(plan)) {
    fprintf(stderr, "ud_run: the plan takes %d inputs and %d outputs, got %d and %d files\n",
            ud_plan_num_inputs(plan), ud_plan_num_outputs(plan), n_in, n_out);
    ud_plan_destroy(plan);
    return 1;
  }
  UD_Stream s = ud_plan_stream(plan);
  UD_Tensor in_t[64], out_t[64];
  uint64_t out_n[64];
  void* host[128] = {0};
  int rc = 0;
  UD_Error* e;
  for (int k = 0; k < n_in + n_out && !rc; k++) {
    int is_in = k < n_in;
    UD_Tensor* t = is_in ? &in_t[k] : &out_t[k - n_in];
    uint64_t nbytes = 0;
    if (is_in) {
      ud_plan_input(plan, k, t, &nbytes);
    } else {
      ud_plan_output(plan, k - n_in, t, &nbytes);
      out_n[k - n_in] = nbytes;
    }
    host[k] = malloc(nbytes ? nbytes : 1);
    if (!host[k]) rc = die("host memory", "out of memory");
    else if ((e = api->mem_alloc(device, s, nbytes, &t->handle))) rc = api_fail(api, e, "mem_alloc");
    if (rc || !is_in) continue;
    FILE* f = fopen(ins[k], "rb");
    size_t got = f ? fread(host[k], 1, nbytes, f) : 0;
    int extra = f ? fgetc(f) != EOF : 0;
    if (f) fclose(f);
    if (!f || got != nbytes || extra) {
      fprintf(stderr, "ud_run: input %d (%s): expected %llu bytes of %s\n", k, ins[k],
              (unsigned long long)nbytes, ud_dtype_name(t->dtype));
      rc = 1;
    } else if ((e = api->memcpy_h2d(s, t->handle, host[k], nbytes))) {
      rc = api_fail(api, e, "memcpy_h2d");
    }
  }
  if (!rc && profile && ud_plan_set_profiling(plan, 1, &st)) rc = die("profiling", st.message);
  for (int r = 0; r < repeat && !rc; r++)
    if (ud_plan_run(plan, s, in_t, n_in, out_t, n_out, &st)) rc = die("run", st.message);
  if (!rc && (e = api->stream_synchronize(s))) rc = api_fail(api, e, "run");
  if (!rc && profile) {
    int n = ud_plan_num_steps(plan);
    double* ms = (double*)calloc((size_t)n + 1, sizeof(double));
    if (ms && !ud_plan_step_times(plan, ms, n, &st))
      for (int i = 0; i < n; i++)
        printf("%-32s %-20s %10.4f ms\n", ud_plan_step_node(plan, i), ud_plan_step_op(plan, i),
               ms[i]);
    else rc = die("profiling", ms ? st.message : "out of memory");
    free(ms);
  }
  for (int k = 0; k < n_out && !rc; k++) {
    void* buf = host[n_in + k];
    if ((e = api->memcpy_d2h(s, buf, out_t[k].handle, out_n[k])) ||
        (e = api->stream_synchronize(s))) {
      rc = api_fail(api, e, "memcpy_d2h");
      break;
    }
    FILE* f = fopen(outs[k], "wb");
    if (!f || fwrite(buf, 1, out_n[k], f) != out_n[k]) rc = die(outs[k], "cannot write");
    if (f) fclose(f);
    if (!rc) printf("output %d: %s, %llu bytes -> %s\n", k, ud_dtype_name(out_t[k].dtype),
                    (unsigned long long)out_n[k], outs[k]);
  }
  for (int k = 0; k < n_in + n_out; k++) {
    UD_Tensor* t = k < n_in ? &in_t[k] : &out_t[k - n_in];
    if (host[k] && t->handle && (e = api->mem_free(device, s, t->handle))) api->error_destroy(e);
    free(host[k]);
  }
  ud_plan_destroy(plan);
  return rc;
}
