#pragma once

#include <gflags/gflags_declare.h>

#include "io/synthetic.h"

// Flags shared by several commands, defined in common_flags.cc.
DECLARE_uint64(seed);
DECLARE_int32(threads);
DECLARE_int64(rows);
DECLARE_int64(vocabulary);
DECLARE_double(zipf_exponent);

namespace ember::tools {

// The generator options the shared flags describe.
io::SyntheticOptions SyntheticOptionsFromFlags();

}  // namespace ember::tools
