#include "io/formats/builtin.h"

namespace ember::io::formats {

// The built-in formats, in registration order: X(Name) registers the
// TextFormatEntry that io/formats/<name>.cc defines as `TextFormatEntry
// NameFormat()`. A new format is its parser, a new file in this folder
// (CMake picks it up), one line here and its flags (tools/format_flags.cc).
#define EMBER_BUILTIN_TEXT_FORMATS(X) \
  X(Criteo)                           \
  X(Csv)                              \
  X(LibSvm)                           \
  X(LibFfm)                           \
  X(Slot)

#define EMBER_DECLARE_ENTRY(Name) TextFormatEntry Name##Format();
EMBER_BUILTIN_TEXT_FORMATS(EMBER_DECLARE_ENTRY)
#undef EMBER_DECLARE_ENTRY

Status RegisterBuiltinTextFormats(TextFormatRegistry* registry) {
#define EMBER_REGISTER_ENTRY(Name) EMBER_RETURN_IF_ERROR(registry->Register(Name##Format()));
  EMBER_BUILTIN_TEXT_FORMATS(EMBER_REGISTER_ENTRY)
#undef EMBER_REGISTER_ENTRY
  return Status::OK();
}

}  // namespace ember::io::formats
