#include "core/string_collectives.h"

#include <algorithm>
#include <cstdint>

namespace ember {

Status BroadcastString(Communicator& comm, int root, std::string* text) {
  std::vector<int64_t> length = {static_cast<int64_t>(text->size())};
  EMBER_RETURN_IF_ERROR(comm.Broadcast(length, root));
  std::vector<int32_t> chars(static_cast<size_t>(length[0]));
  if (comm.rank() == root) std::copy(text->begin(), text->end(), chars.begin());
  EMBER_RETURN_IF_ERROR(comm.Broadcast(chars, root));
  text->assign(chars.begin(), chars.end());
  return Status::OK();
}

Result<std::vector<std::string>> AllGatherStrings(Communicator& comm, const std::string& text) {
  const int n = comm.size();
  std::vector<int64_t> length = {static_cast<int64_t>(text.size())}, lengths(n);
  EMBER_RETURN_IF_ERROR(comm.AllGather(length, lengths));
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<int32_t> mine(static_cast<size_t>(longest), 0), all(static_cast<size_t>(longest) * n);
  std::copy(text.begin(), text.end(), mine.begin());
  EMBER_RETURN_IF_ERROR(comm.AllGather(mine, all));
  std::vector<std::string> texts(n);
  for (int r = 0; r < n; ++r) {
    texts[r].assign(all.begin() + r * longest, all.begin() + r * longest + lengths[r]);
  }
  return texts;
}

}  // namespace ember
