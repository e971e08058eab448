"""Parameter checksums, byte for byte those of results/record/checksum.cpp.

The C++ definitions (results/record/checksum.{h,cpp}, pinned by tests/unit/checksum_test.cpp):

* ``tensor_checksum``: XXH3-64 (seed 0) of one tensor's fp32 bytes.
* ``flat_checksum``: XXH3-64 of each 65,536-element block of the flat fp32 vector (the
  last block may be short), then XXH3-64 of the array of those uint64 hashes (their
  little-endian bytes, as x86-64 and aarch64 hold them in memory).

The fp32 values are hashed as their little-endian bytes, which is what the C++ code hashes
on the little-endian machines it runs on. Only float32 input is accepted: a float64 or
bfloat16 array has other bytes and would give another checksum silently.
"""

import numpy as np
import xxhash

__all__ = [
    "CHECKSUM_BLOCK",
    "block_hashes",
    "combine_block_hashes",
    "flat_checksum",
    "tensor_checksum",
    "checksums_of",
    "run_id_of",
]

#: Elements per checksum block (results/record/checksum.h kChecksumBlock). Fixed forever for a
#: schema version: changing it changes every recorded checksum.
CHECKSUM_BLOCK = 65536

_F32 = np.dtype("<f4")
_BLOCK_BYTES = CHECKSUM_BLOCK * _F32.itemsize


def _xxh3_64(data):
    """XXH3-64 with seed 0 of a bytes-like object, as libxxhash's XXH3_64bits."""
    return xxhash.xxh3_64_intdigest(data, seed=0)


def _f32_bytes(array, what="array"):
    """A contiguous little-endian float32 view of `array`, flattened, as a byte memoryview."""
    a = np.asarray(array)
    if a.dtype.kind != "f" or a.dtype.itemsize != 4:
        raise TypeError(
            f"{what}: expected float32 values, got dtype {a.dtype}; checksums are defined on fp32 bytes "
            "(convert explicitly if that is what the run trains, e.g. .float() in PyTorch)"
        )
    a = np.ascontiguousarray(a.reshape(-1), dtype=_F32)  # copies only when not already <f4 contiguous
    return memoryview(a).cast("B")


def block_hashes(array_f32):
    """XXH3-64 of each CHECKSUM_BLOCK-element block of the flattened array."""
    b = _f32_bytes(array_f32)
    return [_xxh3_64(b[lo : lo + _BLOCK_BYTES]) for lo in range(0, len(b), _BLOCK_BYTES)]


def combine_block_hashes(blocks):
    """The run checksum from block hashes: XXH3-64 of their little-endian uint64 bytes."""
    return _xxh3_64(np.asarray(blocks, dtype="<u8").tobytes())


def flat_checksum(array_f32):
    """The run checksum of a flat fp32 vector (C++ ``flat_checksum``): an unsigned 64-bit int."""
    return combine_block_hashes(block_hashes(array_f32))


def tensor_checksum(array_f32):
    """XXH3-64 of one tensor's fp32 bytes (C++ ``tensor_checksum``): an unsigned 64-bit int."""
    return _xxh3_64(_f32_bytes(array_f32))


def checksums_of(named_tensors):
    """(params checksum, [per-tensor checksums]) of tensors in the flat order.

    `named_tensors` is a sequence of (name, fp32 array) in the model's canonical order, e.g.
    ``[(n, p.detach().cpu().numpy()) for n, p in model.named_parameters()]``. The params
    checksum is ``flat_checksum`` of their concatenation (computed block by block, without
    building the concatenation), the list holds ``tensor_checksum`` of each tensor.
    """
    blocks, tensors = [], []
    state, filled = xxhash.xxh3_64(seed=0), 0  # bytes of the current block hashed so far
    for name, array in named_tensors:
        b = _f32_bytes(array, what=f"parameter {name!r}")
        tensors.append(_xxh3_64(b))
        pos = 0
        while pos < len(b):
            take = min(_BLOCK_BYTES - filled, len(b) - pos)
            state.update(b[pos : pos + take])
            pos += take
            filled += take
            if filled == _BLOCK_BYTES:
                blocks.append(state.intdigest())
                state, filled = xxhash.xxh3_64(seed=0), 0
    if filled:
        blocks.append(state.intdigest())
    return combine_block_hashes(blocks), tensors


def run_id_of(config_yaml):
    """The run id sweep gives a resolved config: 16 hex digits of XXH3-64 of its text (UTF-8)."""
    return "%016x" % _xxh3_64(config_yaml.encode("utf-8"))
