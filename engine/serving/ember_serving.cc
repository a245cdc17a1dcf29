// The C API of engine/serving/ember_serving.h over engine::Scorer.
#include "engine/serving/ember_serving.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "engine/scorer.h"
#include "engine/serving_input.h"
#include "io/feature_hash.h"
#include "io/text_reader.h"

struct ember_model {
  std::unique_ptr<ember::engine::Scorer> scorer;
  // Line parsers of the bundle's text format, with and without the label
  // column(s); null when the bundle's input cannot be read so (`*_error`
  // says why). ParseLine is const and may run concurrently.
  std::unique_ptr<ember::io::TextFormat> labelled_format, unlabelled_format;
  std::unique_ptr<ember::io::LineParser> labelled, unlabelled;
  ember::Status labelled_error, unlabelled_error;
};

namespace {

using ember::Status;
using ember::StatusCode;

ember_code CodeOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return EMBER_OK;
    case StatusCode::kInvalidArgument: return EMBER_INVALID_ARGUMENT;
    case StatusCode::kNotFound: return EMBER_NOT_FOUND;
    case StatusCode::kDataLoss: return EMBER_DATA_LOSS;
    case StatusCode::kIOError: return EMBER_IO_ERROR;
    case StatusCode::kFailedPrecondition: return EMBER_FAILED_PRECONDITION;
    default: return EMBER_INTERNAL;
  }
}

ember_code Report(const Status& status, ember_error* error) {
  const ember_code code = CodeOf(status);
  if (error != nullptr) {
    error->code = code;
    std::snprintf(error->message, sizeof(error->message), "%s",
                  status.ok() ? "" : status.message().c_str());
  }
  return code;
}

// Runs `body`, turning an exception (std::bad_alloc, say) into an error:
// nothing escapes into C.
template <typename Body>
ember_code Guarded(ember_error* error, Body body) {
  try {
    return Report(body(), error);
  } catch (const std::exception& e) {
    return Report(Status::Internal(e.what()), error);
  } catch (...) {
    return Report(Status::Internal("unknown exception"), error);
  }
}

// The parser of `model`'s input with or without labels; its error otherwise.
void MakeParser(const ember::engine::BundleConfig& config, bool labelled,
                std::unique_ptr<ember::io::TextFormat>* format,
                std::unique_ptr<ember::io::LineParser>* parser, Status* error) {
  if (config.columnar_input) {
    *error = Status::InvalidArgument(
        "the bundle's model was trained on columnar files: score keys (ember_score_keys)");
    return;
  }
  auto made = ember::engine::ServingTextFormat(config.input, labelled);
  if (!made.ok()) {
    *error = made.status();
    return;
  }
  if ((*made)->has_header()) {
    *error = Status::InvalidArgument("the bundle's input format has a header line; score keys");
    return;
  }
  auto line_parser = (*made)->NewLineParser("");
  if (!line_parser.ok()) {
    *error = line_parser.status();
    return;
  }
  *format = *std::move(made);
  *parser = *std::move(line_parser);
}

Status Score(ember_model* model, ember::io::Batch& batch, float* scores) {
  std::vector<float> out;
  out.reserve(batch.size * model->scorer->num_tasks());
  EMBER_RETURN_IF_ERROR(model->scorer->Score(batch, &out));
  std::copy(out.begin(), out.end(), scores);
  return Status::OK();
}

}  // namespace

extern "C" {

ember_code ember_model_open(const char* bundle_dir, int threads, ember_model** model,
                            ember_error* error) {
  if (model != nullptr) *model = nullptr;
  return Guarded(error, [&]() -> Status {
    if (bundle_dir == nullptr || model == nullptr) {
      return Status::InvalidArgument("ember_model_open: bundle_dir and model must not be NULL");
    }
    ember::engine::ScorerOptions options;
    options.threads = threads;
    EMBER_ASSIGN_OR_RETURN(auto scorer, ember::engine::Scorer::Open(bundle_dir, options));
    auto opened = std::make_unique<ember_model>();
    const ember::engine::BundleConfig& config = scorer->config();
    MakeParser(config, true, &opened->labelled_format, &opened->labelled,
               &opened->labelled_error);
    MakeParser(config, false, &opened->unlabelled_format, &opened->unlabelled,
               &opened->unlabelled_error);
    opened->scorer = std::move(scorer);
    *model = opened.release();
    return Status::OK();
  });
}

ember_code ember_model_apply_delta(ember_model* model, const char* delta_dir,
                                   ember_error* error) {
  return Guarded(error, [&]() -> Status {
    if (model == nullptr || delta_dir == nullptr) {
      return Status::InvalidArgument("ember_model_apply_delta: model and delta_dir must not be "
                                     "NULL");
    }
    return model->scorer->ApplyDelta(delta_dir);
  });
}

int64_t ember_model_step(const ember_model* model) {
  return model == nullptr ? -1 : model->scorer->step();
}

void ember_model_close(ember_model* model) { delete model; }

int ember_model_num_tasks(const ember_model* model) {
  return model == nullptr ? 0 : model->scorer->num_tasks();
}
int ember_model_num_dense(const ember_model* model) {
  return model == nullptr ? 0 : model->scorer->config().model.num_dense;
}
int ember_model_num_slots(const ember_model* model) {
  return model == nullptr ? 0 : model->scorer->config().model.num_slots;
}

ember_code ember_score_lines(ember_model* model, const char* const* lines, size_t count,
                             int labelled, float* scores, ember_error* error) {
  return Guarded(error, [&]() -> Status {
    if (model == nullptr) return Status::InvalidArgument("ember_score_lines: model is NULL");
    if (count == 0) return Status::OK();
    if (lines == nullptr || scores == nullptr) {
      return Status::InvalidArgument("ember_score_lines: lines and scores must not be NULL");
    }
    const ember::io::LineParser* parser =
        labelled ? model->labelled.get() : model->unlabelled.get();
    if (parser == nullptr) return labelled ? model->labelled_error : model->unlabelled_error;
    const ember::io::TextFormat& format =
        labelled ? *model->labelled_format : *model->unlabelled_format;
    std::string text;
    for (size_t i = 0; i < count; ++i) {
      if (lines[i] == nullptr) return Status::InvalidArgument("line ", i, " is NULL");
      const std::string_view line(lines[i]);
      if (line.find('\n') != std::string_view::npos) {
        return Status::InvalidArgument("line ", i, " holds a line break");
      }
      text.append(line);
      text.push_back('\n');
    }
    ember::io::ParsedLines parsed;
    ember::io::ParseLines(text, *parser, format.layout(), /*stop_at_bad_line=*/true, &parsed);
    if (parsed.bad_lines > 0) {
      const ember::io::BadLine& bad = parsed.examples.front();
      return Status::InvalidArgument("line ", bad.line - 1, ": ",
                                     ember::io::BadLineReasonName(bad.reason), " (got ", bad.got,
                                     ")");
    }
    return Score(model, parsed.rows, scores);
  });
}

ember_code ember_score_keys(ember_model* model, size_t count, const float* dense,
                            const int64_t* offsets, const uint64_t* keys, float* scores,
                            ember_error* error) {
  return Guarded(error, [&]() -> Status {
    if (model == nullptr) return Status::InvalidArgument("ember_score_keys: model is NULL");
    if (count == 0) return Status::OK();
    const int num_dense = ember_model_num_dense(model);
    const int num_slots = ember_model_num_slots(model);
    const int64_t bags = static_cast<int64_t>(count) * num_slots;
    if (offsets == nullptr || scores == nullptr || (num_dense > 0 && dense == nullptr)) {
      return Status::InvalidArgument("ember_score_keys: offsets, scores and dense (with dense "
                                     "features) must not be NULL");
    }
    if (offsets[0] != 0) return Status::InvalidArgument("offsets[0] is ", offsets[0], ", not 0");
    for (int64_t b = 0; b < bags; ++b) {
      if (offsets[b + 1] < offsets[b]) {
        return Status::InvalidArgument("offsets[", b + 1, "] = ", offsets[b + 1],
                                       " is below offsets[", b, "] = ", offsets[b]);
      }
    }
    if (offsets[bags] > 0 && keys == nullptr) {
      return Status::InvalidArgument("ember_score_keys: keys is NULL for ", offsets[bags],
                                     " keys");
    }
    ember::io::Batch batch;
    batch.Clear(num_dense, num_slots, model->scorer->num_tasks());
    batch.size = static_cast<int64_t>(count);
    batch.dense.assign(dense, dense + count * num_dense);
    batch.offsets.assign(offsets, offsets + bags + 1);
    batch.keys.assign(keys, keys + offsets[bags]);
    batch.labels.assign(count * model->scorer->num_tasks(), 0.0f);
    return Score(model, batch, scores);
  });
}

uint64_t ember_hash_feature(const ember_model* model, int slot, const char* value,
                            size_t length) {
  if (model == nullptr || slot < 0 || slot >= ember_model_num_slots(model)) return 0;
  const std::string_view text(value == nullptr ? "" : value, value == nullptr ? 0 : length);
  return ember::io::HashCategorical(slot, text, model->scorer->config().input.slot_bits);
}

}  // extern "C"
