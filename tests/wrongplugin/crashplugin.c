/* crashplugin.c — test plugins whose native code crashes, hangs or exits where discovery and
 * the adapters' initialisation call it (tests only; never install one).
 *
 * It wraps tests/testplugin/testplugin.c like wrongplugin.c does. Build with one of
 *   -DCRASH_IN_DEVICE_COUNT   device_count dereferences NULL (SIGSEGV)
 *   -DHANG_IN_DEVICE_COUNT    device_count never returns
 *   -DEXIT_IN_DEVICE_COUNT    device_count calls _exit(7)
 *   -DABORT_IN_KERNEL_LOOKUP  kernel_lookup("add", float32) calls abort() (SIGABRT)
 *   -DCRASH_IN_CONSTRUCTOR    a library constructor dereferences NULL, before any unidev call */
#define unidev_get_api testplugin_inner_get_api
#include "../testplugin/testplugin.c"
#undef unidev_get_api

#include <signal.h>
#include <unistd.h>

static volatile int* volatile g_null = NULL;

static UD_Error* crash_device_count(int32_t* count, const char** reason) {
#if defined(CRASH_IN_DEVICE_COUNT)
  *g_null = 1;
#elif defined(HANG_IN_DEVICE_COUNT)
  for (;;) pause();
#elif defined(EXIT_IN_DEVICE_COUNT)
  _exit(7);
#endif
  return device_count(count, reason);
}

static UD_Error* crash_kernel_lookup(const char* op, UD_DType dtype, UD_KernelFn* out) {
#if defined(ABORT_IN_KERNEL_LOOKUP)
  if (op && !strcmp(op, "add") && dtype.code == UD_DTYPE_FLOAT && dtype.bits == 32) abort();
#endif
  return kernel_lookup(op, dtype, out);
}

#if defined(CRASH_IN_CONSTRUCTOR)
__attribute__((constructor)) static void crash_at_load(void) { *g_null = 1; }
#endif

static UD_Api g_crash;

UD_EXPORT const UD_Api* unidev_get_api(void) {
  g_crash = *testplugin_inner_get_api();
  g_crash.plugin_name = "crashdev";
  g_crash.device_count = crash_device_count;
  g_crash.kernel_lookup = crash_kernel_lookup;
  return &g_crash;
}
