#include "hdf5_tokens.h"

#include <hdf5.h>

#include <stdexcept>

#include "run_files.h"  // regular_file_problem

namespace sweep {

std::vector<int32_t> read_hdf5_tokens(const std::string& path, const std::string& name) {
  // HDF5 would block forever opening a FIFO: look before opening.
  if (std::string why = regular_file_problem(path); !why.empty()) throw std::runtime_error(path + ": " + why);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) throw std::runtime_error(path + ": not a readable HDF5 file");
  std::string err;
  std::vector<int32_t> out;
  hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  if (d < 0) {
    err = "has no dataset '" + name + "'";
  } else {
    hid_t space = H5Dget_space(d), type = H5Dget_type(d);
    if (H5Sget_simple_extent_ndims(space) != 1) {
      err = "dataset '" + name + "' is not 1-D";
    } else if (H5Tget_class(type) != H5T_INTEGER) {
      err = "dataset '" + name + "' is not integer";
    } else {
      out.resize(size_t(H5Sget_simple_extent_npoints(space)));
      if (!out.empty() && H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
        err = "cannot read dataset '" + name + "'";
    }
    H5Tclose(type);
    H5Sclose(space);
    H5Dclose(d);
  }
  H5Fclose(f);
  if (!err.empty()) throw std::runtime_error(path + ": " + err);
  return out;
}

}  // namespace sweep
