// StreamPosition as one line of JSON (io/stream_reader.h).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "io/stream_reader.h"

namespace ember::io {
namespace {

constexpr int64_t kPositionVersion = 1;

// The fields of a (const) StreamPosition by name, in the order they are
// written.
template <typename Position, typename Visit>
void ForEachField(Position& p, Visit visit) {
  visit("input", p.input);
  visit("num_files", p.num_files);
  visit("files_fingerprint", p.files_fingerprint);
  visit("piece_size", p.piece_size);
  visit("seed", p.seed);
  visit("shuffle_files", p.shuffle_files);
  visit("shuffle_pieces", p.shuffle_pieces);
  visit("shuffle_buffer", p.shuffle_buffer);
  visit("num_shards", p.num_shards);
  visit("shard_index", p.shard_index);
  visit("equal_shards", p.equal_shards);
  visit("batch_size", p.batch_size);
  visit("drop_last", p.drop_last);
  visit("bad_line_policy", p.bad_line_policy);
  visit("epoch", p.epoch);
  visit("epoch_started", p.epoch_started);
  visit("batches_in_epoch", p.batches_in_epoch);
  visit("records_out", p.records_out);
  visit("piece", p.piece);
  visit("piece_row", p.piece_row);
  visit("counted_through", p.counted_through);
  visit("records_in", p.records_in);
  visit("input_done", p.input_done);
  visit("cycling", p.cycling);
  visit("first_pass_records", p.first_pass_records);
  visit("replay_piece", p.replay_piece);
  visit("replay_row", p.replay_row);
  visit("replay_input", p.replay_input);
  visit("drain_step", p.drain_step);
  visit("last_epoch", p.last_epoch);
  visit("last_batch_in_epoch", p.last_batch_in_epoch);
  visit("records_delivered", p.records_delivered);
  visit("batches_delivered", p.batches_delivered);
  visit("padded_for_equal_shards", p.padded_for_equal_shards);
  visit("dropped_for_equal_shards", p.dropped_for_equal_shards);
  visit("bad_lines", p.bad_lines);
}

}  // namespace

namespace {
constexpr auto kBadLineReportFields = [](auto& r, auto&& field) {
  field("lines_read", r.lines_read);
  field("bad_lines", r.bad_lines);
  field("by_reason", r.by_reason);
  field("first_examples", r.first_examples);
};
}  // namespace

void to_json(Json& j, const BadLineReport& r) { WriteJsonFields(j, r, kBadLineReportFields); }
void from_json(const Json& j, BadLineReport& r) { ReadJsonFields(j, r, kBadLineReportFields); }

void to_json(Json& j, const StreamPosition& position) {
  j = Json{{"version", kPositionVersion}};
  ForEachField(position, [&j](const char* key, const auto& value) { j[key] = value; });
}

void from_json(const Json& j, StreamPosition& position) {
  JsonFields f(j);
  int64_t version = 0;
  f.Get("version", &version);
  if (version != kPositionVersion) {
    throw JsonFieldError("version",
                         ember::internal::StrCat("is ", version, "; expected ", kPositionVersion));
  }
  ForEachField(position, [&f](const char* key, auto& value) { f.Get(key, &value); });
  f.Done();
}

std::string StreamPosition::Serialize() const { return JsonText(Json(*this)); }

Result<StreamPosition> StreamPosition::Parse(std::string_view text) {
  EMBER_ASSIGN_OR_RETURN(const Json json, ParseJsonText(std::string(text)));
  Result<StreamPosition> read = FromJson<StreamPosition>(json);
  if (!read.ok()) return read.status().WithContext("reader position");
  const StreamPosition& p = *read;
  if (p.num_shards < 1 || p.shard_index < 0 || p.shard_index >= p.num_shards || p.epoch < 0 ||
      p.batches_in_epoch < 0 || p.piece < -1 || p.piece_row < 0 || p.counted_through < -1 ||
      p.records_in < 0 || p.records_out < 0 || p.first_pass_records < 0 || p.drain_step < 0 ||
      p.replay_piece < -1 || p.replay_input < 0 || p.replay_row < 0 || p.bad_lines.bad_lines < 0 ||
      p.bad_lines.lines_read < p.bad_lines.bad_lines) {
    return Status::InvalidArgument("reader position: inconsistent values");
  }
  return read;
}

}  // namespace ember::io
