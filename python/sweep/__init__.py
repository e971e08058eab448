"""sweep: the Python API of sweep for training scripts.

`sweep.init()` gives a script its run (config, run directory, seed, rank), and takes its
steps, evaluations, custom metrics, checksums, checkpoints and end (run.py; python/README.md
shows a script before and after). `sweep.invariant` holds the layout-free pieces for
torch.distributed scripts: a sampler, the canonical gradient accumulator and all-reduce
(docs/design.md, "The promise for PyTorch scripts").

Nothing here imports torch at import time.
"""

from .run import Run, init, read_config

__all__ = ["Run", "init", "read_config"]
