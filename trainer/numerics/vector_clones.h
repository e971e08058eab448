// SWEEP_VECTOR_CLONES: an AVX2 clone of a hot loop beside the baseline one, picked when
// the program loads. Both give the same bits: nothing is contracted to FMA
// (-ffp-contract=off), and every sum's order is written in the source (fixed lanes),
// never left to the vector width.
#pragma once

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(SWEEP_NO_CLONES)
#define SWEEP_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SWEEP_VECTOR_CLONES
#endif
