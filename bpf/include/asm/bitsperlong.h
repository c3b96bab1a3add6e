/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The BPF target has no architecture of its own: use the generic definitions,
 * so the object is the same whatever machine compiles it. */
#include <asm-generic/bitsperlong.h>
