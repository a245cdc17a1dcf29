#pragma once

// Text over a Communicator (core/communicator.h): what the ranks of a job
// tell each other that is not numbers (flags, file lists, errors). Each is a
// collective like the calls it is made of: every rank of `comm` calls it.

#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/status.h"

namespace ember {

// Gives every rank `root`'s `*text`. Two broadcasts.
Status BroadcastString(Communicator& comm, int root, std::string* text);

// Every rank's `text`, in rank order, on every rank. Two all-gathers.
Result<std::vector<std::string>> AllGatherStrings(Communicator& comm, const std::string& text);

}  // namespace ember
