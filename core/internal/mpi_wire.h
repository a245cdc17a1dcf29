#pragma once

// The data messages of the MPI communicators (core/mpi_communicator.cc):
// a fixed header that names the operation, its signature, its collective
// number and the communicator, then the payload. Ranks share one byte order
// and layout (one build of Ember on one kind of host). Internal to core/.

#include <cstdint>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/internal/collective.h"
#include "core/internal/mpi_world.h"
#include "core/status.h"

namespace ember::internal {

// Leads every data message.
struct WireHeader {
  uint32_t magic;
  uint8_t kind;
  uint8_t dtype;
  uint8_t invalid;  // The sender's arguments were invalid; the payload is its error text.
  uint8_t reserved0;
  int32_t root;
  // The sender's communicator id (the same on every rank): OpenMPI may hand
  // a message that arrives after its communicator was freed to the next
  // communicator that reuses its context id; such strays are dropped.
  int32_t communicator;
  int64_t count;
  int64_t seq;            // Collective number; 0 for Send.
  int64_t payload_count;  // Elements of dtype after the header (bytes of text if invalid).
};
static_assert(sizeof(WireHeader) == 40, "the payload after the header stays 8-byte aligned");

// A message of collective `seq` (0 for Send) of `communicator` carrying
// `count` elements of signature.dtype from `data`.
Bytes MakeMessage(int64_t communicator, const Signature& signature, int64_t seq, const void* data,
                  int64_t count);

// A message that tells the peers this rank's arguments were invalid, with
// `problem` as its payload.
Bytes MakeInvalidMessage(int64_t communicator, const Signature& signature, int64_t seq,
                         const std::string& problem);

// False for a well-formed message of another communicator (see
// WireHeader::communicator).
bool IsFor(int64_t communicator, const std::vector<char>& bytes);

// A received data message, its header checked for shape.
struct Received {
  WireHeader header;
  Signature signature;
  const char* payload = nullptr;  // Into `bytes`.
  Bytes bytes;
};

// Checks the header of the message `bytes` from `peer` and that its size
// matches; Internal naming `what` and the peer if it is malformed.
Result<Received> ParseMessage(const std::string& what, int peer, Bytes bytes);

// InvalidArgument unless `buffer` is in host memory.
Status HostOnly(const char* op, ConstCommBuffer buffer);

// InvalidArgument if `bytes` and a header exceed one MPI message (MPI
// counts are int: INT_MAX bytes).
Status FitsOneMessage(const char* op, int64_t bytes);

}  // namespace ember::internal
