#include "io/text_format_registry.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "io/formats/builtin.h"

namespace ember::io {
namespace {

TextFormatRegistry& MutableDefaultRegistry() {
  // Never destroyed: entries handed out stay valid until the process exits.
  static TextFormatRegistry* registry = [] {
    auto* r = new TextFormatRegistry();
    const Status status = formats::RegisterBuiltinTextFormats(r);
    CHECK(status.ok()) << "registering the built-in text formats: " << status;
    return r;
  }();
  return *registry;
}

bool IsOption(const std::string& name) {
  const std::vector<FormatOption>& options = FormatOptions();
  return std::any_of(options.begin(), options.end(),
                     [&](const FormatOption& option) { return name == option.name; });
}

// "a, b, c or d".
std::string JoinNames(const std::vector<std::string>& names) {
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return list;
}

}  // namespace

Status TextFormatRegistry::Register(TextFormatEntry entry) {
  if (entry.name.empty()) return Status::InvalidArgument("a text format needs a name");
  if (!entry.make) {
    return Status::InvalidArgument("text format ", entry.name, " has no factory");
  }
  if (entry.example_spec.name != entry.name || entry.example_rows <= 0) {
    return Status::InvalidArgument("text format ", entry.name,
                                   " needs an example spec of its name and example rows");
  }
  for (const std::string& option : entry.options) {
    if (!IsOption(option)) {
      return Status::InvalidArgument("text format ", entry.name, " reads \"", option,
                                     "\", which is not an option of io::FormatSpec");
    }
  }
  MutexLock lock(mu_);
  for (const auto& known : entries_) {
    if (known->name == entry.name) {
      return Status::AlreadyExists("text format ", entry.name, " is already registered");
    }
  }
  entries_.push_back(std::make_unique<const TextFormatEntry>(std::move(entry)));
  return Status::OK();
}

Result<const TextFormatEntry*> TextFormatRegistry::Find(const std::string& name) const {
  std::vector<std::string> names;
  {
    MutexLock lock(mu_);
    for (const auto& entry : entries_) {
      if (entry->name == name) return entry.get();
      names.push_back(entry->name);
    }
  }
  return Status::InvalidArgument("unknown text format \"", name, "\" (expected ",
                                 JoinNames(names), ")");
}

std::vector<std::string> TextFormatRegistry::Names() const {
  std::vector<std::string> names;
  MutexLock lock(mu_);
  for (const auto& entry : entries_) names.push_back(entry->name);
  return names;
}

std::vector<const TextFormatEntry*> TextFormatRegistry::Entries() const {
  std::vector<const TextFormatEntry*> entries;
  MutexLock lock(mu_);
  for (const auto& entry : entries_) entries.push_back(entry.get());
  return entries;
}

const TextFormatRegistry& DefaultTextFormatRegistry() { return MutableDefaultRegistry(); }

Status RegisterTextFormat(TextFormatEntry entry) {
  return MutableDefaultRegistry().Register(std::move(entry));
}

std::string TextFormatNameList() { return JoinNames(DefaultTextFormatRegistry().Names()); }

std::vector<std::string> TextFormatOptionKeys() {
  const std::vector<const TextFormatEntry*> entries = DefaultTextFormatRegistry().Entries();
  std::vector<std::string> keys;
  for (const FormatOption& option : FormatOptions()) {
    const bool used = std::any_of(entries.begin(), entries.end(), [&](const TextFormatEntry* e) {
      return std::find(e->options.begin(), e->options.end(), option.name) != e->options.end();
    });
    if (used) keys.insert(keys.end(), option.keys.begin(), option.keys.end());
  }
  return keys;
}

}  // namespace ember::io
