// memory.ispc — casts between every pair of dtypes and arange. Strides and threads are the
// C side's (src/memory.c); these loops see contiguous tiles (arange writes with a stride).
#include "common.isph"

// C casts (float to int truncates); any dtype to bool is x != 0. The cast of a dtype to itself
// is the engine's copy of large outputs, which streams them (UD_EW_LOOP).
#define UD_Y_NONE(j) 0
#define UD_CAST(tsfx, TO, fsfx, FROM, CONV)                                 \
  export void ud_cast_##fsfx##_##tsfx(UD_EW_ARGS) {                         \
    typedef FROM T;                                                         \
    uniform TO *uniform o = (uniform TO * uniform) o_;                      \
    const uniform FROM *uniform a = (const uniform FROM *uniform)a_;        \
    const uniform FROM *uniform c = a;                                      \
    UD_EW_LOOP(UD_Y_NONE, TO, T, CONV)                                      \
  }
#define UD_CAST_NUM(tsfx, TO, fsfx, FROM) UD_CAST(tsfx, TO, fsfx, FROM, (TO)x)
#define UD_CAST_FROM(fsfx, FROM, _)                                                    \
  UD_CAST_NUM(f32, float, fsfx, FROM) UD_CAST_NUM(f64, double, fsfx, FROM)             \
  UD_CAST_NUM(i32, int32, fsfx, FROM) UD_CAST_NUM(i64, int64, fsfx, FROM)              \
  UD_CAST(b8, bool8, fsfx, FROM, (bool8)(x != 0))
UD_ALL(UD_CAST_FROM, _)

// o[i * st] = start + i * step, converted as a C cast
#define UD_ARANGE(sfx, T, _)                                                       \
  export void ud_arange_##sfx(uniform int64 n, void *uniform o_, uniform int64 st, \
                              uniform double start, uniform double step) {         \
    uniform T *uniform o = (uniform T * uniform) o_;                               \
    foreach (i = 0 ... n) o[(int64)i * st] = (T)(start + (double)i * step);        \
  }
UD_ALL(UD_ARANGE, _)
