/* ud_plan.h — runs a serialized unidev plan (unidev/graph/plan.py) through a plugin's UD_Api.
 *
 * C17 (and C++17: unidev._C compiles ud_plan.c into its own translation unit). No allocation
 * or kernel lookup happens per run: ud_plan_create parses and validates the file, looks every
 * step's kernel up once (kernel_compile first where the plugin has it), allocates the arena and
 * the constants on the device and uploads the constants; ud_plan_run then binds the caller's
 * input and output descriptors and enqueues the steps on a stream.
 *
 * Errors: every call returns a UD_ErrorCode (UD_OK = 0) and, when `status` is not NULL, fills
 * it with the code and a message; a plugin error raised by a step names the step's node and op
 * ("node 'conv3' (conv2d): <plugin message>"). Nothing aborts on a malformed file or a wrong
 * binding. A plan is used by one thread at a time; runs on different streams are ordered after
 * one another (they share the arena).
 *
 * File format (version 1, little-endian): a 48-byte header — magic "UDPLAN\r\n", u32 version,
 * u32 flags (0), u64 meta_bytes, u64 data_bytes, u32 CRC-32 (zlib's) of everything after the
 * header, u32 0x01020304 (byte order), u64 0 — then the metadata (key, plugin, meta JSON, arena
 * size, constants, buffers, plan inputs/outputs, steps; see plan.py for the field order) and the
 * constants' bytes, each at a 64-byte aligned offset of the data section.
 */
#ifndef UNIDEV_UD_PLAN_H_
#define UNIDEV_UD_PLAN_H_

#include <stddef.h>
#include <stdint.h>

#include <unidev/unidev.h>

#ifdef __cplusplus
extern "C" {
#endif

#define UD_PLAN_VERSION 1
#define UD_PLAN_HEADER_BYTES 48
#define UD_PLAN_MAX_DIMS 16

typedef struct UD_Plan UD_Plan;

typedef struct UD_PlanStatus {
  int32_t code;        /* a UD_ErrorCode */
  char message[1024];  /* empty on success */
} UD_PlanStatus;

/* Parses `data` (the whole file; it may be freed when this returns), checks it and prepares it
 * on `device`. On failure *plan is NULL. */
int32_t ud_plan_create(const UD_Api* api, int32_t device, const void* data, size_t size,
                       UD_Plan** plan, UD_PlanStatus* status);
/* The same from a file. */
int32_t ud_plan_create_from_file(const UD_Api* api, int32_t device, const char* path,
                                 UD_Plan** plan, UD_PlanStatus* status);
/* Waits for the plan's last run, frees its device memory, events and stream. NULL is a no-op. */
void ud_plan_destroy(UD_Plan* plan);

int32_t ud_plan_num_inputs(const UD_Plan* plan);
int32_t ud_plan_num_outputs(const UD_Plan* plan);
int32_t ud_plan_num_steps(const UD_Plan* plan);
/* The descriptor input/output k must have (handle 0; shape/strides live as long as the plan),
 * and the bytes its buffer spans. UD_ERR_INVALID_ARGUMENT for k out of range. */
int32_t ud_plan_input(const UD_Plan* plan, int32_t k, UD_Tensor* desc, uint64_t* nbytes);
int32_t ud_plan_output(const UD_Plan* plan, int32_t k, UD_Tensor* desc, uint64_t* nbytes);
const char* ud_plan_step_node(const UD_Plan* plan, int32_t step); /* NULL when out of range */
const char* ud_plan_step_op(const UD_Plan* plan, int32_t step);
const char* ud_plan_key(const UD_Plan* plan);
const char* ud_plan_plugin(const UD_Plan* plan);
/* How many steps run a kernel_compile specialization (the rest use kernel_lookup's). */
int32_t ud_plan_num_compiled(const UD_Plan* plan);
/* The plan's own stream (made by ud_plan_create); ud_plan_run with stream NULL uses it. */
UD_Stream ud_plan_stream(const UD_Plan* plan);

/* Enqueues every step on `stream` (NULL: the plan's stream) with inputs[k]/outputs[k] bound to
 * the plan's inputs/outputs; each must match the plan's dtype, shape and strides (device_id the
 * plan's device). Returns before the work is done: synchronize `stream` to wait for it. */
int32_t ud_plan_run(UD_Plan* plan, UD_Stream stream, const UD_Tensor* inputs, int32_t num_inputs,
                    const UD_Tensor* outputs, int32_t num_outputs, UD_PlanStatus* status);

/* Profiling: while on, ud_plan_run records an event before the first step and after each step.
 * ud_plan_step_times waits for the last profiled run and writes each step's milliseconds to
 * ms[0 .. num_steps) (needs UD_CAP_EVENT_TIMING for meaningful figures). */
int32_t ud_plan_set_profiling(UD_Plan* plan, int32_t on, UD_PlanStatus* status);
int32_t ud_plan_step_times(UD_Plan* plan, double* ms, int32_t n, UD_PlanStatus* status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UNIDEV_UD_PLAN_H_ */
