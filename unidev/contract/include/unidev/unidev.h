/* unidev.h — the C contract between unidev and a device plugin.
 *
 * A plugin is a shared library exporting one symbol:
 *
 *     const UD_Api* unidev_get_api(void);
 *
 * It returns a table of function pointers (UD_Api). unidev and its framework adapters call the
 * plugin only through that table. The header is C17 and has no dependencies beyond <stdint.h>
 * and <stddef.h>, so a plugin can be written in C, C++ or anything that speaks the C ABI.
 *
 * Versioning. UD_Api begins with `struct_size`, `abi_major` and `abi_minor`. A loader refuses a
 * plugin whose major differs from its own (naming both versions) and accepts any minor: new
 * fields are only ever appended, and a loader reads a field only when `struct_size` shows the
 * plugin's table is long enough to hold it (UD_API_HAS). struct_size is at least
 * UD_API_SIZE_1_0; every 1.0 function pointer is non-NULL; later fields may be NULL (absent).
 * unidev/contract/include/unidev/loader.h is the one implementation of this rule. Every
 * argument struct (UD_KernelArgs, UD_DeviceProperties) also begins with `struct_size`, set by
 * whoever fills it in. 1.1 added mem_device; 1.2 added kernel_compile (and the op set's tier 4:
 * variadic outputs, whose count is num_outputs).
 *
 * Errors. Every call returns `UD_Error*`: NULL means success; anything else is an error object
 * owned by the caller, read with `error_code`/`error_message` and released with `error_destroy`
 * of the same table. No call may throw a C++ exception or abort the process on bad input.
 *
 * Device memory. A device pointer is an opaque 64-bit handle (UD_Handle); the host never
 * dereferences it unless the plugin reports `host_addressable`. Handle 0 is never a valid
 * allocation. A handle plus a byte offset inside its allocation names that byte (frameworks do
 * such arithmetic on data pointers), so plugins must accept offset handles everywhere except
 * `mem_free`, which takes the handle `mem_alloc` returned. A handle belongs to the device that
 * allocated it; a caller holding only a handle (a framework's device-to-device copy) asks
 * `mem_device` (1.1) which device that is, instead of trying each device in turn.
 *
 * Streams. All memory and kernel calls are enqueued on a stream and may return before the work
 * is done. Work on one stream runs in order. Errors found while validating arguments are
 * returned at once, by the call.
 *
 * Errors found while running. A failure of enqueued work (a bad index found by the kernel, a
 * fault) belongs to the stream S the work was enqueued on, and is returned once, by the first
 * of these calls to come:
 *   - stream_synchronize(S);
 *   - event_synchronize(E) of an event E recorded on S after the failed work (every
 *     event_synchronize of that recording returns it; the first takes it from S);
 *   - device_synchronize of S's device, which returns the pending failures of all its streams
 *     in one error.
 * Later synchronizing calls on S succeed unless more work failed. It is never returned by a call
 * on another stream, by stream_query or event_query, or by enqueuing calls; stream_destroy may
 * drop it. The ABI has no synchronous copy: a caller's "synchronous" copy (enqueue, then
 * stream_synchronize) returns whatever failed on that stream before it, so callers that share a
 * stream between threads share its failures.
 *
 * Poisoned outputs. The bytes failed work was to write (each output's extent — from handle +
 * byte_offset to the end of its last element — or a copy's or memset's destination) are
 * poisoned: later work on any stream that reads one of them fails in turn, with the original
 * failure's code and a message naming the failed op and quoting its message (a memcpy_d2h
 * reports it like any failure of its stream; a kernel reading it also poisons its own outputs).
 * The poison of a byte is lifted by a successful write of it without gaps (memcpy_h2d,
 * memcpy_d2d, memset, or a kernel output whose elements cover its extent) and by mem_free; a
 * strided write leaves it. So a failed kernel's output reads back as an error, never as a
 * value. A plugin that validates everything before enqueueing (x86) has nothing to poison; one
 * whose device cannot track it documents the limit (cuda: plugins/cuda/src/runtime.cpp).
 */
#ifndef UNIDEV_UNIDEV_H_
#define UNIDEV_UNIDEV_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define UD_ABI_MAJOR 1
#define UD_ABI_MINOR 2

/* Name of the one symbol a plugin library exports. */
#define UD_ENTRY_POINT "unidev_get_api"

#if defined(_WIN32)
#define UD_EXPORT __declspec(dllexport)
#else
#define UD_EXPORT __attribute__((visibility("default")))
#endif

/* ---------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------- */

typedef enum UD_ErrorCode {
  UD_OK = 0,
  UD_ERR_INVALID_ARGUMENT = 1, /* a malformed call: bad shape, dtype, stride, attribute, index */
  UD_ERR_OUT_OF_MEMORY = 2,    /* the device cannot satisfy an allocation */
  UD_ERR_OUT_OF_BOUNDS = 3,    /* an access outside its allocation */
  UD_ERR_UNKNOWN_HANDLE = 4,   /* a handle that was never allocated or is already freed */
  UD_ERR_UNSUPPORTED = 5,      /* valid, but this plugin does not implement it */
  UD_ERR_NOT_READY = 6,        /* not an error for queries; never returned by other calls */
  UD_ERR_DEVICE = 7,           /* the device failed while running enqueued work */
  UD_ERR_INTERNAL = 8,         /* a bug in the plugin */
} UD_ErrorCode;

/* Opaque; created by the plugin, released with UD_Api.error_destroy. */
typedef struct UD_Error UD_Error;

/* ---------------------------------------------------------------------------------------------
 * Data types and tensor descriptors (DLPack's DLTensor layout, field for field)
 * ------------------------------------------------------------------------------------------- */

/* DLPack's DLDataTypeCode values. */
typedef enum UD_DTypeCode {
  UD_DTYPE_INT = 0,
  UD_DTYPE_UINT = 1,
  UD_DTYPE_FLOAT = 2,
  UD_DTYPE_BFLOAT = 4,
  UD_DTYPE_BOOL = 6,
} UD_DTypeCode;

/* DLPack's DLDataType: code, bits per lane, lanes (always 1 in unidev). */
typedef struct UD_DType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} UD_DType;

/* DLPack's DLDevice. device_type is kDLCPU (1) for host-addressable plugins, otherwise
 * kDLExtDev (12); device_id is the plugin's device index. */
typedef struct UD_DeviceRef {
  int32_t device_type;
  int32_t device_id;
} UD_DeviceRef;

#define UD_DLPACK_CPU 1
#define UD_DLPACK_EXT_DEV 12

typedef uint64_t UD_Handle;

/* A strided view of device memory; same layout as DLPack's DLTensor.
 *   handle       device pointer of the allocation (or an offset handle inside it)
 *   device       which device holds it
 *   ndim         number of dimensions; 0 for a scalar; -1 marks an absent optional input
 *   dtype        element type
 *   shape        ndim extents, each >= 0
 *   strides      ndim strides counted in elements (not bytes); may be 0 (broadcast) but never
 *                negative; never NULL when ndim > 0
 *   byte_offset  bytes from `handle` to element [0, 0, ...]
 * Element i0..in-1 lives at handle + byte_offset + sizeof(dtype) * sum(i_k * strides[k]).
 *
 * Layout is a stride pattern, never a different shape. Image tensors are always described as
 * [N, C, H, W] (conv weights as [K, C/groups, R, S]); channels-last (NHWC, TensorFlow's and
 * torch.channels_last) is that shape with channels-innermost strides (H*W*C, 1, W*C, C) over the
 * caller's buffer, as is. Layout-sensitive kernels (conv2d and its gradients, the fused conv ops,
 * pooling and its gradients, batch norm and its gradient) accept dense NCHW and dense
 * channels-last natively, without reordering, and write each output in the strides of its own
 * descriptor (callers give an output the layout of the op's input). Any other strides must still
 * give correct results (a plugin may copy them, ideally counting it in its debug counters, see
 * unidev_debug_counters) or be refused with an error naming the op and the strides. */
typedef struct UD_Tensor {
  UD_Handle handle;
  UD_DeviceRef device;
  int32_t ndim;
  UD_DType dtype;
  const int64_t* shape;
  const int64_t* strides;
  uint64_t byte_offset;
} UD_Tensor;

/* ---------------------------------------------------------------------------------------------
 * Attributes
 * ------------------------------------------------------------------------------------------- */

typedef enum UD_AttrType {
  UD_ATTR_INT = 0,    /* value.i */
  UD_ATTR_FLOAT = 1,  /* value.f */
  UD_ATTR_BOOL = 2,   /* value.b: 0 or 1 */
  UD_ATTR_STRING = 3, /* value.s: NUL-terminated UTF-8 */
  UD_ATTR_INTS = 4,   /* value.ints: `len` int64 values */
} UD_AttrType;

/* One attribute. Kernels receive every attribute of the op, in the order the op set
 * (unidev/contract/opset.py) declares them, defaults filled in — so a kernel reads attrs[k] by
 * position; `name` is there for checking and error messages. */
typedef struct UD_Attr {
  const char* name;
  UD_AttrType type;
  union {
    int64_t i;
    double f;
    int32_t b;
    const char* s;
    struct {
      const int64_t* data;
      int64_t len;
    } ints;
  } value;
} UD_Attr;

/* ---------------------------------------------------------------------------------------------
 * Streams, events, kernels
 * ------------------------------------------------------------------------------------------- */

typedef struct UD_StreamImpl* UD_Stream; /* opaque, owned by the plugin */
typedef struct UD_EventImpl* UD_Event;   /* opaque, owned by the plugin */

/* Arguments of one kernel call.
 *   inputs/outputs  in the op set's order; an absent optional input has ndim == -1; a variadic
 *                   input (concat's `tensors`) is expanded in place, with its count in
 *                   `num_inputs`
 *   attrs           all of the op's attributes, in op-set order (see UD_Attr)
 * Elementwise ops receive inputs already broadcast to the output's shape (stride 0 on
 * broadcast dimensions) and all of one dtype; see the op set for each op's rules. Outputs are
 * written through their strides. They never overlap inputs, with one exception: an elementwise
 * op's output may be exactly one of its inputs (same handle, byte_offset, shape and strides) —
 * the in-place form frameworks use (x.add_(y)) — and kernels must give the same result then. */
typedef struct UD_KernelArgs {
  size_t struct_size;
  int32_t device;
  UD_Stream stream;
  const UD_Tensor* inputs;
  int32_t num_inputs;
  const UD_Tensor* outputs;
  int32_t num_outputs;
  const UD_Attr* attrs;
  int32_t num_attrs;
} UD_KernelArgs;

/* A kernel: validates its arguments, enqueues the work on args->stream and returns. */
typedef UD_Error* (*UD_KernelFn)(const UD_KernelArgs* args);

/* ---------------------------------------------------------------------------------------------
 * Devices
 * ------------------------------------------------------------------------------------------- */

#define UD_CAP_STREAMS 0x1u      /* streams really run concurrently with the host */
#define UD_CAP_EVENT_TIMING 0x2u /* event_elapsed is meaningful */

typedef struct UD_DeviceProperties {
  size_t struct_size;      /* set by the caller to sizeof(UD_DeviceProperties) */
  char name[64];           /* e.g. "SX-Aurora VE (vesim)" */
  uint64_t total_memory;   /* bytes */
  int32_t compute_units;   /* cores / SMs */
  int32_t vector_width;    /* widest native vector, in bytes */
  int32_t host_addressable; /* 1 if handles are host pointers the host may dereference */
  uint32_t capabilities;   /* UD_CAP_* bits */
} UD_DeviceProperties;

/* ---------------------------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------------------------- */

typedef struct UD_Api {
  size_t struct_size; /* sizeof(UD_Api) as the plugin was compiled */
  int32_t abi_major;  /* UD_ABI_MAJOR the plugin was compiled against */
  int32_t abi_minor;  /* UD_ABI_MINOR the plugin was compiled against */
  const char* plugin_name;    /* short name, e.g. "aurora" */
  const char* plugin_version; /* the plugin's own version string */

  /* errors */
  UD_ErrorCode (*error_code)(const UD_Error* error);
  const char* (*error_message)(const UD_Error* error); /* valid until error_destroy */
  void (*error_destroy)(UD_Error* error);

  /* devices: count may be 0 (no hardware); `reason` then explains why (may be NULL) */
  UD_Error* (*device_count)(int32_t* count, const char** reason);
  UD_Error* (*device_properties)(int32_t device, UD_DeviceProperties* props);
  UD_Error* (*device_memory_info)(int32_t device, uint64_t* free_bytes, uint64_t* total_bytes);
  UD_Error* (*device_synchronize)(int32_t device); /* waits for every stream of the device */

  /* memory, stream-ordered: the allocation may be used by work enqueued on `stream` after the
   * call, and by other streams once they have waited for that point; mem_free returns the memory
   * once all work enqueued on `stream` before it has finished. size 0 gives a valid, unique
   * handle. Allocations are aligned to at least 64 bytes. */
  UD_Error* (*mem_alloc)(int32_t device, UD_Stream stream, uint64_t size, UD_Handle* handle);
  UD_Error* (*mem_free)(int32_t device, UD_Stream stream, UD_Handle handle);
  /* copies: asynchronous with respect to the host; the host buffer must stay valid and unchanged
   * until the stream reaches the copy (synchronize the stream before reusing it) */
  UD_Error* (*memcpy_h2d)(UD_Stream stream, UD_Handle dst, const void* src, uint64_t size);
  UD_Error* (*memcpy_d2h)(UD_Stream stream, void* dst, UD_Handle src, uint64_t size);
  UD_Error* (*memcpy_d2d)(UD_Stream stream, UD_Handle dst, UD_Handle src, uint64_t size);
  /* fills `count` elements of `elem_size` bytes (1, 2, 4 or 8) with the low bytes of `pattern` */
  UD_Error* (*memset)(UD_Stream stream, UD_Handle dst, uint64_t pattern, uint32_t elem_size,
                      uint64_t count);

  /* streams: in-order queues on one device */
  UD_Error* (*stream_create)(int32_t device, UD_Stream* stream);
  UD_Error* (*stream_destroy)(UD_Stream stream); /* waits for its work first */
  UD_Error* (*stream_synchronize)(UD_Stream stream);
  UD_Error* (*stream_query)(UD_Stream stream, int32_t* done); /* *done = 1 when idle */
  UD_Error* (*stream_wait_event)(UD_Stream stream, UD_Event event);

  /* events: a point in a stream */
  UD_Error* (*event_create)(int32_t device, UD_Event* event);
  UD_Error* (*event_destroy)(UD_Event event);
  UD_Error* (*event_record)(UD_Event event, UD_Stream stream);
  UD_Error* (*event_query)(UD_Event event, int32_t* done); /* never recorded counts as done */
  UD_Error* (*event_synchronize)(UD_Event event);
  UD_Error* (*event_elapsed)(UD_Event start, UD_Event end, double* milliseconds);

  /* kernels: look up once, call many times. `op` is an op-set name ("add", "conv2d"); `dtype`
   * is the dtype of the op's first input (of its first output when it has no inputs). Sets
   * *kernel to NULL — and returns NULL — when the plugin does not implement that pair. */
  UD_Error* (*kernel_lookup)(const char* op, UD_DType dtype, UD_KernelFn* kernel);

  /* ---- 1.1 (read only through UD_API_HAS) ---- */

  /* Which device owns a handle: sets *device to the device whose mem_alloc returned the live
   * allocation holding `handle` — the handle mem_alloc returned, or an offset handle inside it
   * (base <= handle < base + size; a 0-byte allocation holds only its base). Returns
   * UD_ERR_UNKNOWN_HANDLE when none does: mem_free already called on it, never allocated, or 0.
   * Synchronous, enqueues nothing, safe from any thread. */
  UD_Error* (*mem_device)(UD_Handle handle, int32_t* device);

  /* ---- 1.2 (read only through UD_API_HAS) ---- */

  /* A kernel specialized for one op, dtype and set of attribute values — e.g. code generated once
   * for one elementwise_program. `attrs` are all of the op's attributes in op-set order, as a
   * kernel receives them (they and their strings need only live for this call). Sets *kernel to
   * a kernel that is then called like any kernel, with the SAME attribute values (it may ignore
   * them), or to NULL — returning NULL — when the plugin has no specialization: the caller uses
   * kernel_lookup's kernel. Invalid attributes (a malformed program) are refused here with
   * UD_ERR_INVALID_ARGUMENT naming the attribute. The plugin owns the compiled code for the
   * life of the process; calling it again with equal arguments may return the same kernel.
   * Synchronous, enqueues nothing, safe from any thread. */
  UD_Error* (*kernel_compile)(const char* op, UD_DType dtype, const UD_Attr* attrs,
                              int32_t num_attrs, UD_KernelFn* kernel);
} UD_Api;

/* Table sizes per ABI version (PJRT style): struct_size >= UD_API_SIZE_1_1 holds mem_device,
 * >= UD_API_SIZE_1_2 kernel_compile. */
#define UD_API_SIZE_1_0 (offsetof(UD_Api, kernel_lookup) + sizeof(void*))
#define UD_API_SIZE_1_1 (offsetof(UD_Api, mem_device) + sizeof(void*))
#define UD_API_SIZE_1_2 (offsetof(UD_Api, kernel_compile) + sizeof(void*))

/* Whether a plugin's table holds `field` (it is inside struct_size) and sets it (non-NULL). */
#define UD_API_HAS(api, field)                                                       \
  ((api)->struct_size >= offsetof(UD_Api, field) + sizeof((api)->field) &&          \
   (api)->field != NULL)

/* The one exported symbol. The table is static: valid for the life of the library. */
typedef const UD_Api* (*UD_GetApiFn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UNIDEV_UNIDEV_H_ */
