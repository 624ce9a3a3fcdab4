// The plan runtime (unidev/graph/native/ud_plan.c, C17 that is also C++17) compiled into
// unidev._C as C++: setuptools would hand a .c file the extension's -std=c++17.
#include "../graph/native/ud_plan.c"
