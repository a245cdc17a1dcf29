#pragma once

// The text formats that Ember ships: one file each in io/formats/, all
// registered by RegisterBuiltinTextFormats (builtin.cc, one line per format).

#include "core/status.h"
#include "io/text_format_registry.h"

namespace ember::io::formats {

// Registers criteo, csv, libsvm, libffm and slot, in that order (the order
// of the "expected ..." list of an unknown name). The errors of
// TextFormatRegistry::Register: AlreadyExists when `registry` already holds
// one of these names.
Status RegisterBuiltinTextFormats(TextFormatRegistry* registry);

}  // namespace ember::io::formats
