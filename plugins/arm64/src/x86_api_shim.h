/* x86_api_shim.h — force-included (-include) into plugins/x86/src/api.c when it is built for
 * aarch64: that file asks the x86 CPU for AVX-512, which GCC offers only on x86, so the query
 * answers "no" here, and the table it exports is renamed to be wrapped by src/api.c. */
#ifndef UD_ARM64_X86_API_SHIM_H_
#define UD_ARM64_X86_API_SHIM_H_
#define __builtin_cpu_init() ((void)0)
#define __builtin_cpu_supports(feature) 0
#endif
