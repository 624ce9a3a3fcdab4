/* api.c — unidev-arm64's entry point: x86's UD_Api table (plugins/x86/src/api.c, built with
 * x86_api_shim.h and its entry point renamed) under the name "arm64", with this CPU's
 * description. Every other function — memory (mem_device too), streams, events, kernels — is
 * x86's, unchanged. */
#include <pthread.h>
#include <stdio.h>
#include <sys/auxv.h>
#include <unidev/unidev.h>

#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif

const UD_Api* ud_arm64_x86_api(void);

static UD_Api g_api;
static UD_Error* (*g_x86_properties)(int32_t device, UD_DeviceProperties* props);

static UD_Error* device_properties(int32_t device, UD_DeviceProperties* props) {
  UD_Error* err = g_x86_properties(device, props);  /* checks device and props, fills the rest */
  if (err) return err;
  const int neon = (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
  snprintf(props->name, sizeof props->name, "aarch64 host CPU (%s)", neon ? "NEON" : "no NEON");
  props->vector_width = 16; /* the kernels are built for neon-i32x4: 128-bit vectors */
  return NULL;
}

static void init(void) {
  g_api = *ud_arm64_x86_api();
  g_x86_properties = g_api.device_properties;
  g_api.plugin_name = "arm64";
  g_api.device_properties = device_properties;
}

UD_EXPORT const UD_Api* unidev_get_api(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init);
  return &g_api;
}
