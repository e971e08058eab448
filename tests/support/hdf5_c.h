// The HDF5 C API, for tests that write or edit files with it directly. Debian keeps the
// header under hdf5/serial/; CMake's HDF5_C_INCLUDE_DIRS puts it on the path directly.
#pragma once

#if __has_include(<hdf5.h>)
#include <hdf5.h>
#else
#include <hdf5/serial/hdf5.h>
#endif
