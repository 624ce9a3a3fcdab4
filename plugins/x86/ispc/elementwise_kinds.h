/* elementwise_kinds.h — what each kind of elementwise.def means, for ispc/elementwise.ispc and
 * src/elementwise.c: UD_EW(op id, expression, inputs, dtype group, output type, type of the third
 * input), where T is the dtype of the first input and the groups are those of src/x86.h
 * (UD_X86_FLOAT, ...). */
#define U_F(N, E) UD_EW(N, E, 1, FLOAT, T, T)
#define U_N(N, E) UD_EW(N, E, 1, NUMERIC, T, T)
#define U_A2B(N, E) UD_EW(N, E, 1, ALL, bool8, T)
#define B_F(N, E) UD_EW(N, E, 2, FLOAT, T, T)
#define B_N(N, E) UD_EW(N, E, 2, NUMERIC, T, T)
#define B_A(N, E) UD_EW(N, E, 2, ALL, T, T)
#define B_N2B(N, E) UD_EW(N, E, 2, NUMERIC, bool8, T)
#define B_A2B(N, E) UD_EW(N, E, 2, ALL, bool8, T)
#define T_F(N, E) UD_EW(N, E, 3, FLOAT, T, T)
#define T_W(N, E) UD_EW(N, E, 3, ALL, T, bool8)
