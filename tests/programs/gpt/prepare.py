"""Writes tokens.bin: 40,000 uint16 tokens of a 64-symbol Markov chain drawn with integer
arithmetic only (a 64-bit LCG), so the file is the same bytes on every machine."""
import sys

import numpy as np

out = sys.argv[1] if len(sys.argv) > 1 else "tokens.bin"
state, tok, tokens = 12345, 0, []
for _ in range(40000):
    state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
    r = state >> 58  # 0..63
    tok = (tok * 5 + 1) % 64 if r < 48 else int(r)  # mostly a fixed successor, sometimes a jump
    tokens.append(tok)
np.array(tokens, dtype=np.uint16).tofile(out)
