#include "core/internal/mpi_wire.h"

#include <climits>
#include <cstring>
#include <memory>
#include <utility>

namespace ember::internal {
namespace {

constexpr uint32_t kWireMagic = 0x454d4231;  // "EMB1"

}  // namespace

Bytes MakeMessage(int64_t communicator, const Signature& signature, int64_t seq, const void* data,
                  int64_t count) {
  const size_t payload_bytes = static_cast<size_t>(count) * CommDTypeSize(signature.dtype);
  auto bytes = std::make_shared<std::vector<char>>(sizeof(WireHeader) + payload_bytes);
  WireHeader header{kWireMagic,
                    static_cast<uint8_t>(signature.kind),
                    static_cast<uint8_t>(signature.dtype),
                    0,
                    0,
                    signature.root,
                    static_cast<int32_t>(communicator),
                    signature.count,
                    seq,
                    count};
  std::memcpy(bytes->data(), &header, sizeof(header));
  if (payload_bytes > 0) std::memcpy(bytes->data() + sizeof(header), data, payload_bytes);
  return bytes;
}

Bytes MakeInvalidMessage(int64_t communicator, const Signature& signature, int64_t seq,
                         const std::string& problem) {
  Bytes bytes = MakeMessage(communicator, signature, seq, nullptr, 0);
  WireHeader header;
  std::memcpy(&header, bytes->data(), sizeof(header));
  header.invalid = 1;
  header.payload_count = static_cast<int64_t>(problem.size());
  std::memcpy(bytes->data(), &header, sizeof(header));
  bytes->insert(bytes->end(), problem.begin(), problem.end());
  return bytes;
}

bool IsFor(int64_t communicator, const std::vector<char>& bytes) {
  if (bytes.size() < sizeof(WireHeader)) return true;  // Malformed: ParseMessage says so.
  WireHeader header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  return header.magic != kWireMagic || header.communicator == static_cast<int32_t>(communicator);
}

Result<Received> ParseMessage(const std::string& what, int peer, Bytes bytes) {
  Received r;
  const Status malformed =
      Status::Internal(what, ": malformed message of ", bytes->size(), " bytes from rank ", peer);
  if (bytes->size() < sizeof(WireHeader)) return malformed;
  std::memcpy(&r.header, bytes->data(), sizeof(WireHeader));
  const WireHeader& h = r.header;
  if (h.magic != kWireMagic || h.kind > static_cast<uint8_t>(OpKind::kSend) ||
      h.dtype > static_cast<uint8_t>(CommDType::kU64) || h.payload_count < 0) {
    return malformed;
  }
  r.signature = {static_cast<OpKind>(h.kind), static_cast<CommDType>(h.dtype), h.count, h.root};
  const size_t element_bytes = h.invalid ? 1 : CommDTypeSize(r.signature.dtype);
  if (bytes->size() != sizeof(WireHeader) + static_cast<size_t>(h.payload_count) * element_bytes) {
    return malformed;
  }
  r.payload = bytes->data() + sizeof(WireHeader);
  r.bytes = std::move(bytes);
  return r;
}

Status HostOnly(const char* op, ConstCommBuffer buffer) {
  if (buffer.device.is_cpu()) return Status::OK();
  return Status::InvalidArgument(op, ": the MPI communicator moves host buffers; got ",
                                 CommDTypeName(buffer.dtype), " on ", buffer.device.ToString());
}

Status FitsOneMessage(const char* op, int64_t bytes) {
  if (bytes + static_cast<int64_t>(sizeof(WireHeader)) <= INT_MAX) return Status::OK();
  return Status::InvalidArgument(op, ": ", bytes, " bytes exceed what one MPI message carries (",
                                 INT_MAX - static_cast<int64_t>(sizeof(WireHeader)), " bytes)");
}

}  // namespace ember::internal
