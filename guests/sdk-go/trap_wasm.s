#include "textflag.h"

// func unreachable(): the WebAssembly `unreachable` instruction, which
// traps (Go's assembler writes it for UNDEF).
TEXT ·unreachable(SB), NOSPLIT, $0-0
	UNDEF
