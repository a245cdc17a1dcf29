// StreamPosition as one line of JSON (io/stream_reader.h).

#include <charconv>
#include <string>
#include <system_error>

#include "core/json.h"
#include "io/stream_reader.h"

namespace ember::io {
namespace {

constexpr int64_t kPositionVersion = 1;

// Reads the fields of one JSON object, remembering the first problem.
class FieldReader {
 public:
  explicit FieldReader(const JsonValue& object) : object_(object) {}

  template <typename T>
  void Integer(const char* key, T* out) {
    const JsonValue* value = Find(key, JsonValue::Type::kNumber);
    if (value == nullptr) return;
    const char* begin = value->text.data();
    const char* end = begin + value->text.size();
    auto [ptr, ec] = std::from_chars(begin, end, *out);
    if (ec != std::errc() || ptr != end) Fail(key);
  }
  void Bool(const char* key, bool* out) {
    const JsonValue* value = Find(key, JsonValue::Type::kBool);
    if (value != nullptr) *out = value->boolean;
  }
  void String(const char* key, std::string* out) {
    const JsonValue* value = Find(key, JsonValue::Type::kString);
    if (value != nullptr) *out = value->text;
  }
  const JsonValue* Find(const char* key, JsonValue::Type type) {
    const JsonValue* value = object_.Find(key);
    if (value == nullptr || value->type != type) {
      Fail(key);
      return nullptr;
    }
    return value;
  }
  Status status() const { return status_; }

 private:
  void Fail(const char* key) {
    if (status_.ok()) {
      status_ =
          Status::InvalidArgument("reader position: missing or malformed field \"", key, "\"");
    }
  }

  const JsonValue& object_;
  Status status_;
};

std::string JsonArray(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += JsonQuote(items[i]);
  }
  return out + "]";
}

}  // namespace

std::string StreamPosition::Serialize() const {
  JsonObject reasons;
  for (const auto& [reason, count] : bad_lines.by_reason) reasons.Add(reason, count);
  JsonObject report;
  report.Add("lines_read", bad_lines.lines_read)
      .Add("bad_lines", bad_lines.bad_lines)
      .Add("by_reason", reasons)
      .AddRaw("first_examples", JsonArray(bad_lines.first_examples));
  JsonObject o;
  o.Add("version", kPositionVersion)
      .Add("input", input)
      .Add("num_files", num_files)
      .AddRaw("files_fingerprint", std::to_string(files_fingerprint))
      .Add("piece_size", piece_size)
      .AddRaw("seed", std::to_string(seed))
      .Add("shuffle_files", shuffle_files)
      .Add("shuffle_pieces", shuffle_pieces)
      .Add("shuffle_buffer", shuffle_buffer)
      .Add("num_shards", num_shards)
      .Add("shard_index", shard_index)
      .Add("equal_shards", equal_shards)
      .Add("batch_size", batch_size)
      .Add("drop_last", drop_last)
      .Add("bad_line_policy", bad_line_policy)
      .Add("epoch", epoch)
      .Add("epoch_started", epoch_started)
      .Add("batches_in_epoch", batches_in_epoch)
      .Add("records_out", records_out)
      .Add("piece", piece)
      .Add("piece_row", piece_row)
      .Add("counted_through", counted_through)
      .Add("records_in", records_in)
      .Add("input_done", input_done)
      .Add("cycling", cycling)
      .Add("first_pass_records", first_pass_records)
      .Add("replay_piece", replay_piece)
      .Add("replay_row", replay_row)
      .Add("replay_input", replay_input)
      .Add("drain_step", drain_step)
      .Add("last_epoch", last_epoch)
      .Add("last_batch_in_epoch", last_batch_in_epoch)
      .Add("records_delivered", records_delivered)
      .Add("batches_delivered", batches_delivered)
      .Add("padded_for_equal_shards", padded_for_equal_shards)
      .Add("dropped_for_equal_shards", dropped_for_equal_shards)
      .Add("bad_lines", report);
  std::string text = o.ToString(-1);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

Result<StreamPosition> StreamPosition::Parse(std::string_view text) {
  EMBER_ASSIGN_OR_RETURN(const JsonValue json, ParseJson(std::string(text)));
  if (json.type != JsonValue::Type::kObject) {
    return Status::InvalidArgument("reader position: expected a JSON object");
  }
  FieldReader fields(json);
  int64_t version = 0;
  fields.Integer("version", &version);
  EMBER_RETURN_IF_ERROR(fields.status());
  if (version != kPositionVersion) {
    return Status::InvalidArgument("reader position: version ", version, ", expected ",
                                   kPositionVersion);
  }
  StreamPosition p;
  fields.String("input", &p.input);
  fields.Integer("num_files", &p.num_files);
  fields.Integer("files_fingerprint", &p.files_fingerprint);
  fields.Integer("piece_size", &p.piece_size);
  fields.Integer("seed", &p.seed);
  fields.Bool("shuffle_files", &p.shuffle_files);
  fields.Bool("shuffle_pieces", &p.shuffle_pieces);
  fields.Integer("shuffle_buffer", &p.shuffle_buffer);
  fields.Integer("num_shards", &p.num_shards);
  fields.Integer("shard_index", &p.shard_index);
  fields.Bool("equal_shards", &p.equal_shards);
  fields.Integer("batch_size", &p.batch_size);
  fields.Bool("drop_last", &p.drop_last);
  fields.String("bad_line_policy", &p.bad_line_policy);
  fields.Integer("epoch", &p.epoch);
  fields.Bool("epoch_started", &p.epoch_started);
  fields.Integer("batches_in_epoch", &p.batches_in_epoch);
  fields.Integer("records_out", &p.records_out);
  fields.Integer("piece", &p.piece);
  fields.Integer("piece_row", &p.piece_row);
  fields.Integer("counted_through", &p.counted_through);
  fields.Integer("records_in", &p.records_in);
  fields.Bool("input_done", &p.input_done);
  fields.Bool("cycling", &p.cycling);
  fields.Integer("first_pass_records", &p.first_pass_records);
  fields.Integer("replay_piece", &p.replay_piece);
  fields.Integer("replay_row", &p.replay_row);
  fields.Integer("replay_input", &p.replay_input);
  fields.Integer("drain_step", &p.drain_step);
  fields.Integer("last_epoch", &p.last_epoch);
  fields.Integer("last_batch_in_epoch", &p.last_batch_in_epoch);
  fields.Integer("records_delivered", &p.records_delivered);
  fields.Integer("batches_delivered", &p.batches_delivered);
  fields.Integer("padded_for_equal_shards", &p.padded_for_equal_shards);
  fields.Integer("dropped_for_equal_shards", &p.dropped_for_equal_shards);
  const JsonValue* report = fields.Find("bad_lines", JsonValue::Type::kObject);
  EMBER_RETURN_IF_ERROR(fields.status());
  FieldReader report_fields(*report);
  report_fields.Integer("lines_read", &p.bad_lines.lines_read);
  report_fields.Integer("bad_lines", &p.bad_lines.bad_lines);
  const JsonValue* reasons = report_fields.Find("by_reason", JsonValue::Type::kObject);
  const JsonValue* examples = report_fields.Find("first_examples", JsonValue::Type::kArray);
  EMBER_RETURN_IF_ERROR(report_fields.status());
  for (const auto& [reason, count] : reasons->fields) {
    FieldReader reason_field(*reasons);
    reason_field.Integer(reason.c_str(), &p.bad_lines.by_reason[reason]);
    EMBER_RETURN_IF_ERROR(reason_field.status());
  }
  for (const JsonValue& example : examples->items) {
    if (example.type != JsonValue::Type::kString) {
      return Status::InvalidArgument("reader position: a bad-line example is not a string");
    }
    p.bad_lines.first_examples.push_back(example.text);
  }
  if (p.num_shards < 1 || p.shard_index < 0 || p.shard_index >= p.num_shards || p.epoch < 0 ||
      p.batches_in_epoch < 0 || p.piece < -1 || p.piece_row < 0 || p.counted_through < -1 ||
      p.records_in < 0 || p.records_out < 0 || p.first_pass_records < 0 || p.drain_step < 0 ||
      p.replay_piece < -1 || p.replay_input < 0 || p.replay_row < 0 || p.bad_lines.bad_lines < 0 ||
      p.bad_lines.lines_read < p.bad_lines.bad_lines) {
    return Status::InvalidArgument("reader position: inconsistent values");
  }
  return p;
}

}  // namespace ember::io
