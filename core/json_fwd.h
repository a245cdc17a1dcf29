#pragma once

// `Json` for headers that declare a struct's to_json/from_json without
// pulling in all of nlohmann-json; their .cc files include core/json.h.
//
//   void to_json(Json& j, const TableOptions& options);
//   void from_json(const Json& j, TableOptions& options);

#include <nlohmann/json_fwd.hpp>

namespace ember {
using Json = nlohmann::ordered_json;
}  // namespace ember
