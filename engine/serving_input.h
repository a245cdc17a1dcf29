#pragma once

// Input for scoring: the text formats training reads (io/format_spec.h), and
// the same lines without their label column(s), which a scorer sees most.

#include <memory>

#include "core/status.h"
#include "io/format_spec.h"
#include "io/text_format.h"

namespace ember::engine {

// The text format of `spec` (io::MakeTextFormat). With `labelled` false its
// lines lack the leading label column(s): each line is read as if it began
// with a 0 label per example label, so that the examples, their keys and
// dense values are those of the labelled line (labels read as 0). Formats
// whose label is first on the line take unlabelled lines (their registry
// entry's label_separator, io/text_format_registry.h): criteo, libsvm,
// libffm, and slot without label_slots; InvalidArgument for the others
// (csv, whose schema needs a label column, and slot with label_slots: keep
// the label column(s) there). Errors of io::MakeTextFormat.
Result<std::unique_ptr<io::TextFormat>> ServingTextFormat(const io::FormatSpec& spec,
                                                          bool labelled);

}  // namespace ember::engine
