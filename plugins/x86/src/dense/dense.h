/* dense.h — the compute-bound kernels of unidev-x86: matmul, gemm and conv2d (forward, both
 * backwards). Each validates its arguments against the op set and returns a plugin_kit error
 * naming the op, the argument and what was expected. Float32 and float64; kernels run on the
 * calling thread (synchronously) and use every core through OpenBLAS, oneDNN or OpenMP. */
#ifndef UD_X86_DENSE_H_
#define UD_X86_DENSE_H_

#include <unidev/unidev.h>

#ifdef __cplusplus
extern "C" {
#endif

UD_Error* ud_x86_matmul(const UD_KernelArgs* args);
UD_Error* ud_x86_gemm(const UD_KernelArgs* args);
UD_Error* ud_x86_conv2d(const UD_KernelArgs* args);
UD_Error* ud_x86_conv2d_backward_input(const UD_KernelArgs* args);
UD_Error* ud_x86_conv2d_backward_weight(const UD_KernelArgs* args);

#ifdef __cplusplus
}
#endif

#endif /* UD_X86_DENSE_H_ */
