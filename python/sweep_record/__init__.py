"""sweep_record: write sweep run records (results/SCHEMA.md) from Python, in the layouts
``SCHEMA_VERSIONS`` lists (``SCHEMA_VERSION`` the newest).

A training program that is not sweep-train (a PyTorch script, say) writes with this
package a record that sweep's C++ reader accepts: `sweep compare`, `sweep report`.
Pure Python over h5py, numpy and xxhash; see python/README.md.
"""

from .checksum import (
    CHECKSUM_BLOCK,
    block_hashes,
    checksums_of,
    combine_block_hashes,
    flat_checksum,
    run_id_of,
    tensor_checksum,
)
from .digest import record_digest, stored_digest
from .writer import (
    NUMERICS_ENV,
    SLURM_ENV,
    PARTIAL_SUFFIX,
    SCHEMA_VERSION,
    SCHEMA_VERSIONS,
    STEP_FIELDS,
    RecordError,
    RecordWriter,
    environment_defaults,
    valid_metric_name,
)

__version__ = "0.1.0"

__all__ = [
    "CHECKSUM_BLOCK",
    "NUMERICS_ENV",
    "SLURM_ENV",
    "PARTIAL_SUFFIX",
    "SCHEMA_VERSION",
    "SCHEMA_VERSIONS",
    "STEP_FIELDS",
    "RecordError",
    "RecordWriter",
    "block_hashes",
    "checksums_of",
    "combine_block_hashes",
    "environment_defaults",
    "flat_checksum",
    "record_digest",
    "run_id_of",
    "stored_digest",
    "tensor_checksum",
    "valid_metric_name",
]
