#include "engine/serving_input.h"

#include <string>
#include <string_view>
#include <utility>

#include "io/text_format_registry.h"

namespace ember::engine {
namespace {

// Parses a line without labels as `inner` parses it with `prefix` (the
// label columns, as zeros) in front.
class UnlabelledParser final : public io::LineParser {
 public:
  UnlabelledParser(std::unique_ptr<io::LineParser> inner, std::string prefix)
      : inner_(std::move(inner)), prefix_(std::move(prefix)) {}

  bool ParseLine(std::string_view line, io::Batch* out, io::LineError* error) const override {
    // ParseLine may run on several threads at once (io/text_format.h).
    thread_local std::string labelled;
    labelled.assign(prefix_);
    labelled.append(line);
    return inner_->ParseLine(labelled, out, error);
  }

 private:
  std::unique_ptr<io::LineParser> inner_;
  std::string prefix_;
};

class UnlabelledFormat final : public io::TextFormat {
 public:
  UnlabelledFormat(std::unique_ptr<io::TextFormat> inner, std::string prefix)
      : inner_(std::move(inner)), prefix_(std::move(prefix)) {}

  const char* name() const override { return inner_->name(); }
  io::TextLayout layout() const override { return inner_->layout(); }
  bool has_header() const override { return inner_->has_header(); }
  Result<std::unique_ptr<io::LineParser>> NewLineParser(std::string_view header) const override {
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<io::LineParser> inner, inner_->NewLineParser(header));
    return std::unique_ptr<io::LineParser>(new UnlabelledParser(std::move(inner), prefix_));
  }

 private:
  std::unique_ptr<io::TextFormat> inner_;
  std::string prefix_;
};

}  // namespace

Result<std::unique_ptr<io::TextFormat>> ServingTextFormat(const io::FormatSpec& spec,
                                                          bool labelled) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<io::TextFormat> format, io::MakeTextFormat(spec));
  if (labelled) return format;
  EMBER_ASSIGN_OR_RETURN(const io::TextFormatEntry* entry,
                         io::DefaultTextFormatRegistry().Find(spec.name));
  const std::string separator = entry->label_separator ? entry->label_separator(spec) : "";
  if (separator.empty()) {
    return Status::InvalidArgument(
        "unlabelled input is read for text whose labels lead the line (criteo, libsvm, libffm "
        "and slot without --label_slots); ", spec.name, " input must keep its label column(s)");
  }
  std::string prefix;
  for (int i = 0; i < format->layout().num_labels; ++i) prefix += "0" + separator;
  return std::unique_ptr<io::TextFormat>(new UnlabelledFormat(std::move(format), prefix));
}

}  // namespace ember::engine
