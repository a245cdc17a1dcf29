#pragma once

#include <gflags/gflags_declare.h>

#include "core/status.h"
#include "io/synthetic.h"

// Flags shared by several commands, defined in common_flags.cc.
DECLARE_uint64(seed);
DECLARE_int32(threads);
DECLARE_double(progress_seconds);
DECLARE_int64(rows);
DECLARE_string(vocabulary);
DECLARE_double(zipf_exponent);
DECLARE_int32(num_dense);
DECLARE_int32(num_slots);
DECLARE_int32(multi_hot_slots);
DECLARE_int32(max_bag_size);
DECLARE_int32(tasks);

namespace ember::tools {

// The generator options the shared flags describe (and --slot_bits of
// format_flags.h). The format stays kCriteo; gen-data sets it. InvalidArgument
// naming the flag for a bad --vocabulary or options the generator rejects.
Result<io::SyntheticOptions> SyntheticOptionsFromFlags();

}  // namespace ember::tools
